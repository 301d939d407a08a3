// ConfigTable (common/config/config_table.h) on a small table of its own:
// the file fills the fields over their defaults, unknown sections and keys,
// wrong types and values out of range are refused naming the file and the
// key, flags override the file, and the sample lists every key at its
// default under its note.
#include "common/config/config_table.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>

namespace surge::config {
namespace {

struct Settings {
  std::string dir = "/var/lib/x";
  bool fast = false;
  int threads = 2;
  uint32_t credits = 128;
  uint64_t bytes = 1ull << 40;
};

const ConfigTable<Settings>& table() {
  using F = Field<Settings>;
  static const ConfigTable<Settings> t(
      "# x: a test daemon.\n",
      {
          F{{"server", "dir", "Where it lives.", "--dir", 1}, &Settings::dir},
          F{{"server", "threads", "Threads.\nAt least one.", "--threads", 1, 64},
            &Settings::threads},
          F{{"server", "fast", "Go fast.", "--fast"}, &Settings::fast},
          F{{"io", "credits", "Credits."}, &Settings::credits},
          F{{"io", "bytes", ""}, &Settings::bytes},
      });
  return t;
}

class ConfigTableTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    std::ofstream(path_) << text;
    return path_;
  }
  std::string path_ = ::testing::TempDir() + "/config_table_test.toml";
};

TEST_F(ConfigTableTest, FileFillsTheFieldsOverTheDefaults) {
  Settings s;
  ASSERT_TRUE(table()
                  .load_file(write("[server]\ndir = \"/d\"\nthreads = 8\nfast = true\n"
                                   "[io]\nbytes = 5\n"),
                             s)
                  .ok());
  EXPECT_EQ(s.dir, "/d");
  EXPECT_EQ(s.threads, 8);
  EXPECT_TRUE(s.fast);
  EXPECT_EQ(s.credits, 128u);  // not in the file: the default
  EXPECT_EQ(s.bytes, 5u);
}

TEST_F(ConfigTableTest, UnknownKeyIsRefusedNamingFileAndKey) {
  Settings s;
  Status st = table().load_file(write("[server]\nthreds = 8\n"), s);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("server.threds"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(path_), std::string::npos) << st.message();
}

TEST_F(ConfigTableTest, UnknownSectionIsRefused) {
  Settings s;
  Status st = table().load_file(write("[serverr]\n"), s);
  EXPECT_NE(st.message().find("[serverr]"), std::string::npos) << st.message();
}

TEST_F(ConfigTableTest, WrongTypesAreRefused) {
  Settings s;
  EXPECT_EQ(table().load_file(write("[server]\nthreads = \"8\"\n"), s).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(table().load_file(write("[server]\nfast = 1\n"), s).code(), Code::kInvalidArgument);
  EXPECT_EQ(table().load_file(write("[server]\ndir = 3\n"), s).code(), Code::kInvalidArgument);
  EXPECT_EQ(table().load_file(write("[io]\nbytes = 1.5\n"), s).code(), Code::kInvalidArgument);
}

TEST_F(ConfigTableTest, OutOfRangeValuesAreRefusedNamingTheKey) {
  Settings s;
  Status big = table().load_file(write("[server]\nthreads = 65\n"), s);
  EXPECT_NE(big.message().find("server.threads = 65 is too large (at most 64)"),
            std::string::npos)
      << big.message();
  Status zero = table().load_file(write("[server]\nthreads = 0\n"), s);
  EXPECT_NE(zero.message().find("server.threads = 0 is too small"), std::string::npos)
      << zero.message();
  Status neg = table().load_file(write("[io]\ncredits = -1\n"), s);
  EXPECT_NE(neg.message().find("io.credits must be a non-negative integer"), std::string::npos)
      << neg.message();
  Status wide = table().load_file(write("[io]\ncredits = 4294967296\n"), s);
  EXPECT_NE(wide.message().find("io.credits = 4294967296 is too large"), std::string::npos)
      << wide.message();
}

TEST_F(ConfigTableTest, CheckAppliesTheRangesToValuesSetInCode) {
  Settings s;
  EXPECT_TRUE(table().check(s).ok());
  s.dir.clear();
  EXPECT_EQ(table().check(s).message(), "server.dir is empty");
  s.dir = "/d";
  s.threads = 100;
  EXPECT_NE(table().check(s).message().find("server.threads = 100"), std::string::npos);
}

TEST_F(ConfigTableTest, FlagsOverrideTheFile) {
  CLI::App app;
  FlagOverrides flags;
  table().add_flags(app, flags);
  const char* argv[] = {"x", "--threads", "4", "--fast"};
  app.parse(4, const_cast<char**>(argv));
  Settings s;
  ASSERT_TRUE(table().load(write("[server]\nthreads = 8\ndir = \"/file\"\n"), flags, s).ok());
  EXPECT_EQ(s.threads, 4);     // the flag, over the file
  EXPECT_EQ(s.dir, "/file");  // no flag: the file
  EXPECT_TRUE(s.fast);
}

TEST_F(ConfigTableTest, BadFlagValueNamesTheFlag) {
  CLI::App app;
  FlagOverrides flags;
  table().add_flags(app, flags);
  const char* argv[] = {"x", "--threads", "many"};
  app.parse(3, const_cast<char**>(argv));
  Settings s;
  Status st = table().load("", flags, s);
  EXPECT_NE(st.message().find("flag --threads 'many'"), std::string::npos) << st.message();
}

TEST_F(ConfigTableTest, SampleListsEveryKeyAtItsDefaultUnderItsNote) {
  EXPECT_EQ(table().sample(),
            "# x: a test daemon.\n"
            "# Flags override the file: --dir, --threads, --fast.\n"
            "# Nothing here changes at run time: restart the daemon to apply a change.\n"
            "\n[server]\n"
            "# Where it lives.\n"
            "dir = \"/var/lib/x\"\n"
            "# Threads.\n# At least one.\n"
            "threads = 2\n"
            "# Go fast.\n"
            "fast = false\n"
            "\n[io]\n"
            "# Credits.\n"
            "credits = 128\n"
            "bytes = 1099511627776\n");
}

TEST_F(ConfigTableTest, SampleReadsBackAsTheDefaults) {
  Settings s;
  s.threads = 9;
  s.dir = "changed";
  ASSERT_TRUE(table().load_file(write(table().sample()), s).ok());
  EXPECT_EQ(s.threads, 2);
  EXPECT_EQ(s.dir, "/var/lib/x");
}

}  // namespace
}  // namespace surge::config
