// surge-bench --mode md (the mdtest-like run) against a real cluster: through
// a FUSE mount and through libsurge, a directory per process and one shared
// directory. Each phase must touch every file of every process (stat and read
// the files another process made), and the tree must be gone afterwards.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/client/local_cluster.h"

namespace surge::test {
namespace {

class SurgeBenchMd : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = LocalCluster::Start(ClusterConfig{});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
  }

  // Runs surge-bench with args; exit status, stdout and stderr in *out.
  int bench(const std::string& args, std::string* out) {
    const char* b = std::getenv("SURGE_BUILD_DIR");
    if (b == nullptr) throw std::runtime_error("SURGE_BUILD_DIR is not set (run through ctest)");
    return sh(std::string(b) + "/tools/surge-bench --mode md --json " + args + " 2>&1", out);
  }
  std::string native_args() {
    return "--api native --mds " + cluster_->mds_address() + " --key-file " +
           cluster_->key_file();
  }
  static bool has(const std::string& s, const std::string& what) {
    return s.find(what) != std::string::npos;
  }
  // Every phase of the JSON result touched `ops` files without error.
  static void expect_phases(const std::string& out, uint64_t ops) {
    for (const char* ph : {"create", "stat", "read", "remove"}) {
      EXPECT_TRUE(has(out, std::string("{\"phase\":\"") + ph + "\",\"ops\":" + std::to_string(ops) +
                               ","))
          << ph << ": " << out;
    }
    EXPECT_FALSE(has(out, "\"error\":\"surge") || has(out, "\"error\":\"process")) << out;
  }

  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(SurgeBenchMd, ThroughTheMountEveryPhaseTouchesEveryFileAndLeavesNothing) {
  auto m = cluster_->mount("m");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::string out;
  ASSERT_EQ(bench("-o " + *m + " -n 2 --files 25 --write-bytes 5000 --read-bytes 5000", &out), 0)
      << out;
  expect_phases(out, 50);
  EXPECT_TRUE(std::filesystem::is_empty(*m)) << out;
}

TEST_F(SurgeBenchMd, ThroughLibsurgeInOneSharedDirectory) {
  std::string out;
  ASSERT_EQ(bench(native_args() + " -o / -n 2 --files 25 --shared-dir --write-bytes 3000 "
                                  "--read-bytes 3000",
                  &out),
            0)
      << out;
  expect_phases(out, 50);
  auto cl = cluster_->connect();
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  auto l = (*cl)->list("/");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_TRUE(l->empty()) << l->front().name;
}

TEST_F(SurgeBenchMd, KeepLeavesEveryFileInPlace) {
  std::string out;
  ASSERT_EQ(bench(native_args() + " -o / -n 2 --files 10 --phases create,stat", &out), 0) << out;
  auto cl = cluster_->connect();
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  auto top = (*cl)->list("/");
  ASSERT_TRUE(top.ok()) << top.status().ToString();
  ASSERT_EQ(top->size(), 1u);
  for (const char* d : {"p0", "p1"}) {
    auto l = (*cl)->list("/" + top->front().name + "/" + d);
    ASSERT_TRUE(l.ok()) << d << ": " << l.status().ToString();
    EXPECT_EQ(l->size(), 10u) << d;
  }
}

TEST_F(SurgeBenchMd, AShortFileIsAnErrorNamingIt) {
  std::string out;
  EXPECT_EQ(bench(native_args() + " -o / -n 1 --files 3 --write-bytes 100 --read-bytes 200", &out),
            1)
      << out;
  EXPECT_TRUE(has(out, "/p0/f0: file shorter than --read-bytes")) << out;
}

}  // namespace
}  // namespace surge::test
