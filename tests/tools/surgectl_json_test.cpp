// surgectl --json against a real cluster (1 MDS + 3 data servers on
// 127.0.0.1): every command that has --json prints one JSON document on
// stdout that parses (nlohmann::json, as a script's parser would) and
// holds the fields a script reads, with the values the cluster has. The
// list of commands checked is compared with surgectl's own list, so a new
// command fails here until its JSON is checked too. df's total counts the
// one file system under the three data dirs once.
#include <sys/statvfs.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <vector>

#include "tests/tools/surgectl_fixture.h"

namespace surge::test {
namespace {

using Json = nlohmann::json;

// Every surgectl subcommand this file checks the JSON of.
const std::set<std::string> kCommandsChecked = {"status", "targets",   "chains", "df",
                                                "setstripe", "getstripe", "drain", "undrain",
                                                "scrub",  "keygen", "rebalance"};

class SurgectlJson : public SurgectlTest {
 protected:
  // Runs `surgectl --json args`, requires exit 0 and a JSON object on
  // stdout alone (stderr apart), and returns it parsed.
  Json json_of(const std::string& args) {
    std::string out, stderr_text;
    const int rc = surgectl_apart("--json " + args, &out, &stderr_text);
    if (rc != 0) {
      ADD_FAILURE() << "surgectl --json " << args << " exited " << rc << "\nstdout: " << out
                    << "\nstderr: " << stderr_text;
      return Json::object();
    }
    Json doc = Json::parse(out, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object()) {
      ADD_FAILURE() << "surgectl --json " << args << " printed no JSON object:\n" << out;
      return Json::object();
    }
    return doc;
  }

  void make_dir(const std::string& path) {
    auto cl = cluster_->connect();
    ASSERT_TRUE(cl.ok()) << cl.status().ToString();
    ASSERT_TRUE((*cl)->mkdir(path, 0755).ok()) << path;
  }

  static std::set<uint64_t> ids_of(const Json& targets) {
    std::set<uint64_t> ids;
    for (const auto& t : targets) ids.insert(t.at("id").get<uint64_t>());
    return ids;
  }
};

// The subcommands `surgectl --help` lists.
std::set<std::string> surgectl_commands() {
  std::string out;
  const char* b = std::getenv("SURGE_BUILD_DIR");
  if (b == nullptr) throw std::runtime_error("SURGE_BUILD_DIR is not set (run through ctest)");
  sh(std::string(b) + "/tools/surgectl --help", &out);
  std::set<std::string> names;
  const auto start = out.find("Subcommands:");
  if (start == std::string::npos) return names;
  std::istringstream lines(out.substr(start));
  std::string line;
  std::getline(lines, line);
  const std::regex entry("^  ([a-z][a-z-]*)( .*)?$");
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_match(line, m, entry)) names.insert(m[1]);
  }
  return names;
}

TEST(SurgectlJsonCoverage, EveryCommandsJsonIsChecked) {
  // A command added to surgectl must get its JSON checked in this file.
  EXPECT_EQ(surgectl_commands(), kCommandsChecked);
}

TEST_F(SurgectlJson, StatusSummarisesTheMap) {
  Json s = json_of("status");
  EXPECT_EQ(s.at("mds").get<std::string>(), cluster_->mds_address());
  EXPECT_GT(s.at("fs_id").get<uint64_t>(), 0u);
  EXPECT_GT(s.at("map_version").get<uint64_t>(), 0u);
  EXPECT_EQ(s.at("targets_up").get<int>(), 3);
  EXPECT_EQ(s.at("targets_down").get<int>(), 0);
  EXPECT_EQ(s.at("targets_draining").get<int>(), 0);
  EXPECT_TRUE(s.at("chains").at("total").is_number_unsigned());
  EXPECT_EQ(ids_of(s.at("targets")), (std::set<uint64_t>{1, 2, 3}));
}

TEST_F(SurgectlJson, TargetsListEachDataServer) {
  Json s = json_of("targets");
  ASSERT_EQ(s.at("targets").size(), 3u);
  for (const auto& t : s.at("targets")) {
    EXPECT_EQ(t.at("state").get<std::string>(), "up") << t;
    EXPECT_EQ(t.at("address").get<std::string>().rfind("tcp://127.0.0.1:", 0), 0u) << t;
    EXPECT_FALSE(t.at("draining").get<bool>()) << t;
    EXPECT_FALSE(t.at("drained").get<bool>()) << t;
    EXPECT_GT(t.at("capacity").get<uint64_t>(), 0u) << t;
    EXPECT_LE(t.at("free").get<uint64_t>(), t.at("capacity").get<uint64_t>()) << t;
    EXPECT_TRUE(t.at("chains").is_number_unsigned()) << t;
    EXPECT_FALSE(t.at("filesystem_id").get<std::string>().empty()) << t;
  }
}

TEST_F(SurgectlJson, ChainsListMembersAndHealth) {
  make_dir("/r");
  json_of("setstripe /r --count 1 --replicas 2");
  write_new_file("/r/f", 4096);  // forms the chains of width 2
  Json c = json_of("chains");
  EXPECT_GT(c.at("chain_table_version").get<uint64_t>(), 0u);
  const Json& chains = c.at("chains");
  ASSERT_FALSE(chains.empty()) << c;
  EXPECT_EQ(c.at("health").at("total").get<size_t>(), chains.size());
  EXPECT_EQ(c.at("health").at("healthy").get<size_t>(), chains.size());
  for (const auto& ch : chains) {
    EXPECT_GT(ch.at("id").get<uint64_t>(), 0u) << ch;
    EXPECT_EQ(ch.at("scheme").get<std::string>(), "replicas 2") << ch;
    EXPECT_EQ(ch.at("health").get<std::string>(), "healthy") << ch;
    ASSERT_EQ(ch.at("members").size(), 2u) << ch;
    for (const auto& m : ch.at("members")) {
      EXPECT_EQ(std::set<uint32_t>({1, 2, 3}).count(m.at("target").get<uint32_t>()), 1u) << ch;
      EXPECT_EQ(m.at("state").get<std::string>(), "serving") << ch;
    }
    EXPECT_TRUE(ch.at("sync").is_array()) << ch;
    EXPECT_TRUE(ch.at("moves").is_array()) << ch;
  }
}

TEST_F(SurgectlJson, SetstripeAndGetstripeShowTheLayout) {
  make_dir("/d");
  Json set = json_of("setstripe /d --size 131072 --count 2");
  EXPECT_EQ(set.at("path").get<std::string>(), "/d");
  EXPECT_EQ(set.at("stripe_size").get<uint32_t>(), 131072u);
  EXPECT_EQ(set.at("stripe_count").get<uint32_t>(), 2u);

  Json dir = json_of("getstripe /d");
  EXPECT_EQ(dir.at("stripe_size").get<uint32_t>(), 131072u);
  EXPECT_FALSE(dir.at("inherited").get<bool>());

  write_new_file("/d/f", 300000);
  Json f = json_of("getstripe /d/f");
  EXPECT_EQ(f.at("path").get<std::string>(), "/d/f");
  EXPECT_EQ(f.at("format").get<uint32_t>(), 1u);
  EXPECT_EQ(f.at("stripe_size").get<uint32_t>(), 131072u);
  EXPECT_EQ(f.at("stripe_count").get<uint32_t>(), 2u);
  ASSERT_EQ(f.at("targets").size(), 2u) << f;
  for (const auto& t : f.at("targets")) EXPECT_GE(t.get<uint32_t>(), 1u);
  EXPECT_TRUE(f.at("slots").empty()) << f;
}

TEST_F(SurgectlJson, DrainAndUndrainShowTheTarget) {
  Json d = json_of("drain 2");
  EXPECT_EQ(d.at("target").at("id").get<uint32_t>(), 2u);
  EXPECT_TRUE(d.at("target").at("draining").get<bool>());
  EXPECT_EQ(d.at("target").at("state").get<std::string>(), "draining");
  const uint64_t drained_at = d.at("map_version").get<uint64_t>();
  Json u = json_of("undrain 2");
  EXPECT_EQ(u.at("target").at("id").get<uint32_t>(), 2u);
  EXPECT_FALSE(u.at("target").at("draining").get<bool>());
  EXPECT_EQ(u.at("target").at("state").get<std::string>(), "up");
  EXPECT_GT(u.at("map_version").get<uint64_t>(), drained_at);
}

TEST_F(SurgectlJson, DrainWaitEndsWithTheDrainedTarget) {
  // No file has chains yet: the target holds nothing at once. Two
  // documents, one per line: the drain, then the end of the wait.
  std::string out, err;
  ASSERT_EQ(surgectl_apart("--json drain 3 --wait", &out, &err), 0) << out << err;
  std::istringstream lines(out);
  std::vector<Json> docs;
  for (std::string line; std::getline(lines, line);) {
    docs.push_back(Json::parse(line, nullptr, false));
    ASSERT_TRUE(docs.back().is_object()) << line;
  }
  ASSERT_EQ(docs.size(), 2u) << out;
  EXPECT_EQ(docs[0].at("target").at("id").get<uint32_t>(), 3u);
  EXPECT_TRUE(docs[0].at("target").at("draining").get<bool>());
  EXPECT_EQ(docs[1].at("target").get<uint32_t>(), 3u);
  EXPECT_TRUE(docs[1].at("drained").get<bool>());
  EXPECT_GE(docs[1].at("seconds").get<double>(), 0.0);
}

TEST_F(SurgectlJson, ScrubCountsWhatItChecked) {
  write_new_file("/a", 200000);
  write_new_file("/b", 200000);
  Json s = json_of("scrub");
  ASSERT_EQ(s.at("targets").size(), 3u) << s;
  for (const auto& t : s.at("targets")) {
    EXPECT_TRUE(t.at("scrubbed").get<bool>()) << t;
    EXPECT_EQ(t.at("error").get<std::string>(), "") << t;
    EXPECT_TRUE(t.at("corrupt").empty()) << t;
  }
  EXPECT_EQ(ids_of(s.at("targets")), (std::set<uint64_t>{1, 2, 3}));
  EXPECT_GE(s.at("objects_checked").get<uint64_t>(), 2u);
  EXPECT_GE(s.at("bytes_checked").get<uint64_t>(), 400000u);
  EXPECT_EQ(s.at("corrupt_blocks").get<uint64_t>(), 0u);
  EXPECT_EQ(s.at("unscrubbed_targets").get<int>(), 0);
  EXPECT_EQ(s.at("replica_differences").get<uint64_t>(), 0u);
  EXPECT_TRUE(s.at("chains").is_array());
}

TEST_F(SurgectlJson, RebalanceListsItsMovesAndTheTargets) {
  // No file has data and formation balanced the chains: nothing to move.
  Json r = json_of("rebalance --dry-run");
  EXPECT_TRUE(r.at("moves").is_array());
  EXPECT_EQ(r.at("moves").size(), 0u);
  EXPECT_EQ(r.at("in_flight").get<uint32_t>(), 0u);
  EXPECT_GT(r.at("map_version").get<uint64_t>(), 0u);
  EXPECT_EQ(ids_of(r.at("targets")), (std::set<uint64_t>{1, 2, 3}));
  for (const auto& t : r.at("targets")) EXPECT_TRUE(t.at("chains").is_number());
}

TEST_F(SurgectlJson, KeygenNamesTheKeyFile) {
  const std::string path = cluster_->dir() + "/new.key";
  Json k = json_of("keygen " + path);
  EXPECT_EQ(k.at("key_file").get<std::string>(), path);
  EXPECT_TRUE(std::filesystem::exists(path));
}

TEST_F(SurgectlJson, DfCountsTheOneFileSystemOfThreeTargetsOnce) {
  // The three data dirs are under one temp dir: one file system.
  struct statvfs v {};
  ASSERT_EQ(::statvfs(cluster_->ods_dir(0).c_str(), &v), 0);
  const uint64_t disk = static_cast<uint64_t>(v.f_blocks) * v.f_frsize;
  Json df = json_of("df");
  EXPECT_EQ(df.at("total_bytes").get<uint64_t>(), disk);
  EXPECT_LE(df.at("free_bytes").get<uint64_t>(), disk);
  EXPECT_GT(df.at("total_inodes").get<uint64_t>(), 0u);
  EXPECT_LE(df.at("free_inodes").get<uint64_t>(), df.at("total_inodes").get<uint64_t>());
  ASSERT_EQ(df.at("file_systems").size(), 1u) << df;
  const Json& fs = df.at("file_systems")[0];
  EXPECT_EQ(fs.at("targets"), Json::array({1, 2, 3})) << df;
  EXPECT_EQ(fs.at("capacity").get<uint64_t>(), disk);
  EXPECT_TRUE(fs.at("up").get<bool>());
  EXPECT_FALSE(fs.at("filesystem_id").get<std::string>().empty());
}

}  // namespace
}  // namespace surge::test
