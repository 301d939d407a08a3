// A data server added to a running cluster (docs/redundancy.md, "Forming
// chains" and "Replacement, rebuild, drain, rebalance"), with real daemons:
// 1 MDS and 3 data servers on 127.0.0.1, files of replicas 2 written, then
// a fourth data server started. New files place a fair share of their
// chains on it at once; `surgectl rebalance --wait --max-moves 2` then
// moves existing chain memberships (the chains that hold the files written
// before) onto it, two chains at a time, each synced before the member it
// replaces leaves. Every chain ends with 2 serving members, the new target
// holds some of the old files' chains, every byte reads back, scrub finds
// the replicas identical, and with the new target killed every byte still
// reads back.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/client/chain_state.h"
#include "tests/client/local_cluster.h"

namespace surge::test {
namespace {

constexpr size_t kBlock = 1 << 20;
constexpr size_t kFileBytes = 6 * kBlock + 99;
constexpr int kIoTimeoutMs = 8000;

class ChainRebalance : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterConfig cfg;
    cfg.ods_count = 3;
    cfg.client_io_timeout_ms = "8000";
    auto c = LocalCluster::Start(cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
  }

  void write(Client& cl, const std::string& path, const std::string& data) {
    auto f = cl.open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
    ASSERT_TRUE(f.ok()) << path << ": " << f.status().ToString();
    auto w = cl.pwrite(**f, data.data(), data.size(), 0);
    ASSERT_TRUE(w.ok()) << path << ": " << w.status().ToString();
    Status st = cl.fsync(**f, false);
    ASSERT_TRUE(st.ok()) << path << ": " << st.ToString();
    ASSERT_TRUE(cl.close(*f).ok()) << path;
    files_.emplace_back(path, data);
  }

  void verify_all(const std::string& when) {
    auto cl = cluster_->connect(kIoTimeoutMs);
    ASSERT_TRUE(cl.ok()) << cl.status().ToString();
    for (const auto& [path, want] : files_) {
      auto f = (*cl)->open(path, O_RDONLY);
      ASSERT_TRUE(f.ok()) << when << ": " << path << ": " << f.status().ToString();
      std::string got(want.size() + 1, '\0');
      size_t done = 0;
      while (done < got.size()) {
        auto n = (*cl)->pread(**f, got.data() + done, got.size() - done, done);
        ASSERT_TRUE(n.ok()) << when << ": " << path << ": " << n.status().ToString();
        if (*n == 0) break;
        done += *n;
      }
      got.resize(done);
      EXPECT_TRUE(got == want) << when << ": " << path << ": the bytes read back differ";
      (void)(*cl)->close(*f);
    }
  }

  // The chain ids a file's layout names (surgectl --json getstripe).
  std::set<uint32_t> chains_of_file(const std::string& path) {
    std::string out;
    EXPECT_EQ(run_surgectl(*cluster_, "--json getstripe " + path, &out), 0) << out;
    std::set<uint32_t> ids;
    for (const auto& c : parse_chains(out)) ids.insert(c.id);
    return ids;
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::vector<std::pair<std::string, std::string>> files_;
};

TEST_F(ChainRebalance, ANewTargetTakesNewFilesAndWithRebalanceExistingChains) {
  auto cl = cluster_->connect(kIoTimeoutMs);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  ASSERT_TRUE((*cl)->mkdir("/old", 0777).ok());
  ASSERT_TRUE((*cl)->mkdir("/new", 0777).ok());
  std::string out;
  ASSERT_EQ(run_surgectl(*cluster_, "setstripe --replicas 2 --count 3 --size 1048576 /old", &out), 0)
      << out;
  ASSERT_EQ(run_surgectl(*cluster_, "setstripe --replicas 2 --count 1 /new", &out), 0) << out;
  std::set<uint32_t> old_chains;
  for (int i = 0; i < 6; ++i) {
    const std::string path = "/old/f" + std::to_string(i);
    write(**cl, path, random_bytes(kFileBytes, 40 + static_cast<uint64_t>(i)));
    if (HasFatalFailure()) return;
    for (uint32_t id : chains_of_file(path)) old_chains.insert(id);
  }

  int added = -1;
  Status st = cluster_->add_ods(&added);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const uint32_t fresh = target_id_of(*cluster_, added);
  ASSERT_NE(fresh, 0u);

  // New placement: one-slot files, each on one chain of 2; the new target
  // is a quarter of the targets, so its fair share is a quarter of the
  // memberships (half the files). At least half of that is asked.
  ASSERT_EQ(run_surgectl(*cluster_, "--json chains", &out), 0) << out;
  std::map<uint32_t, ChainState> by_id;
  for (auto& c : parse_chains(out)) by_id[c.id] = c;
  constexpr int kNew = 24;
  int on_fresh = 0;
  for (int i = 0; i < kNew; ++i) {
    const std::string path = "/new/g" + std::to_string(i);
    write(**cl, path, random_bytes(100000, 70 + static_cast<uint64_t>(i)));
    if (HasFatalFailure()) return;
    for (uint32_t id : chains_of_file(path)) on_fresh += by_id[id].has(fresh);
  }
  std::printf("%d of %d new one-slot files have a copy on the new target %u\n", on_fresh, kNew,
              fresh);
  EXPECT_GE(on_fresh, kNew / 4) << "the new target took less than half its fair share";

  // No existing chain has it yet.
  for (uint32_t id : old_chains) EXPECT_FALSE(by_id[id].has(fresh)) << "chain " << id;

  ASSERT_EQ(run_surgectl(*cluster_, "rebalance --dry-run", &out), 0) << out;
  EXPECT_NE(out.find("would move chain "), std::string::npos) << out;
  ASSERT_EQ(run_surgectl(*cluster_, "rebalance --wait --max-moves 2", &out), 0) << out;
  std::printf("%s", out.c_str());
  EXPECT_NE(out.find("balanced: "), std::string::npos) << out;
  EXPECT_NE(out.find("-> target " + std::to_string(fresh)), std::string::npos) << out;
  // Once balanced, asking again moves nothing.
  ASSERT_EQ(run_surgectl(*cluster_, "rebalance", &out), 0) << out;
  EXPECT_NE(out.find("0 moves started"), std::string::npos) << out;

  ASSERT_EQ(run_surgectl(*cluster_, "--json chains", &out), 0) << out;
  int old_on_fresh = 0;
  for (const auto& c : parse_chains(out)) {
    EXPECT_EQ(c.serving(), 2) << "chain " << c.id;
    EXPECT_EQ(c.members.size(), 2u) << "chain " << c.id;
    if (old_chains.count(c.id)) old_on_fresh += c.has(fresh);
  }
  EXPECT_GT(old_on_fresh, 0) << "no chain holding the old files moved onto the new target";
  EXPECT_LT(old_on_fresh, static_cast<int>(old_chains.size()))
      << "every old chain moved onto the new target";
  std::printf("%d of the %zu chains of the old files now include the new target\n", old_on_fresh,
              old_chains.size());

  verify_all("after the rebalance");
  EXPECT_EQ(run_surgectl(*cluster_, "scrub", &out), 0) << out;
  EXPECT_NE(out.find(" 0 replicas differ, 0 chains not compared"), std::string::npos) << out;
  ASSERT_TRUE(cluster_->kill_ods(added).ok());
  verify_all("with the new target killed");
}

}  // namespace
}  // namespace surge::test
