// Rebuild of EC positions (issue 16; docs/redundancy.md, "EC rebuild"),
// with real daemons: 1 MDS and 6 or 7 data servers on 127.0.0.1, a 4+2
// directory of 64 KiB units over 2 slots.
//
// * A member SIGKILLed and started again comes back SYNCING in every
//   chain; it rebuilds its positions from the others while a writer keeps
//   overwriting groups of the file (whole groups and partial ranges: the
//   writes it missed while away, which wait for it where it holds data,
//   and those during the rebuild, which it takes where it holds data),
//   then serves. The file reads back as the writer's model, the
//   parity scrub finds every window consistent, and with two other
//   servers killed (M lost) every byte still reads back, now from the
//   rebuilt chunks.
// * A member lost for good is replaced (the MDS told to replace after 3 s)
//   by the data server outside the chain, which rebuilds the lost
//   position from K others; then the same checks.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/client/chain_state.h"
#include "tests/client/local_cluster.h"
#include "tests/common/time_scale.h"

namespace surge::test {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

constexpr uint64_t kUnit = 64 << 10;
constexpr uint32_t kData = 4;
constexpr uint32_t kSlots = 2;
constexpr uint64_t kGroup = kData * kUnit;
constexpr uint64_t kGroups = 24;
constexpr uint64_t kFileBytes = kGroups * kGroup + 777;
constexpr int kIoTimeoutMs = 8000;

class EcRebuild : public ::testing::Test {
 protected:
  void start(int ods_count, const std::string& mds_toml) {
    ClusterConfig cfg;
    cfg.ods_count = ods_count;
    cfg.client_io_timeout_ms = std::to_string(kIoTimeoutMs);
    cfg.mds_toml = mds_toml;
    auto c = LocalCluster::Start(cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    auto cl = cluster_->connect(kIoTimeoutMs);
    ASSERT_TRUE(cl.ok()) << cl.status().ToString();
    ASSERT_TRUE((*cl)->mkdir("/ec", 0777).ok());
    std::string out;
    ASSERT_EQ(run_surgectl(*cluster_,
                           "setstripe --ec 4+2 --count " + std::to_string(kSlots) + " --size " +
                               std::to_string(kUnit) + " /ec",
                           &out),
              0)
        << out;
    model_ = random_bytes(kFileBytes, 7);
    auto f = (*cl)->open("/ec/f", O_RDWR | O_CREAT | O_EXCL, 0644);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_TRUE((*cl)->pwrite(**f, model_.data(), model_.size(), 0).ok());
    ASSERT_TRUE((*cl)->fsync(**f, false).ok());
    ASSERT_TRUE((*cl)->close(*f).ok());
    ASSERT_EQ(run_surgectl(*cluster_, "--json getstripe /ec/f", &out), 0) << out;
    layout_ = Json::parse(out);
  }

  // The target holding `position` of slot s.
  uint32_t holder(uint32_t s, uint32_t position) const {
    return layout_.at("slots")[s].at("positions")[position].at("target").get<uint32_t>();
  }
  bool holds_parity(uint32_t s, uint32_t target) const {
    for (uint32_t p = kData; p < kData + 2; ++p) {
      if (holder(s, p) == target) return true;
    }
    return false;
  }

  // Overwrites random groups of the file through one client until stop,
  // keeping model_; alternates whole groups (encoded by the client) and
  // partial ranges (parity deltas from the data positions). A write to a
  // data position whose member is down waits for it (the io timeout is
  // longer than its absence). Returns what failed.
  std::string overwrite(const std::atomic<bool>& stop, std::atomic<int>* writes) {
    auto cl = cluster_->connect(kIoTimeoutMs);
    if (!cl.ok()) return cl.status().ToString();
    auto f = (*cl)->open("/ec/f", O_RDWR);
    if (!f.ok()) return f.status().ToString();
    std::mt19937_64 rng(99);
    std::string err;
    for (int i = 0; !stop.load() || i < 4; ++i) {
      const uint64_t g = rng() % kGroups;
      uint64_t off = g * kGroup, len = kGroup;
      if (i % 2 == 1) {
        off += rng() % kGroup;
        len = 1 + rng() % std::min<uint64_t>(3 * kUnit, g * kGroup + kGroup - off);
      }
      const std::string bytes = random_bytes(len, 1000 + static_cast<uint64_t>(i));
      auto w = (*cl)->pwrite(**f, bytes.data(), len, off);
      if (!w.ok()) {
        err = "write " + std::to_string(i) + " of [" + std::to_string(off) + ", +" +
              std::to_string(len) + "): " + w.status().ToString();
        break;
      }
      model_.replace(off, len, bytes);
      ++*writes;  // after the model: the main thread reads only counts
      std::this_thread::sleep_for(20ms);
    }
    Status st = (*cl)->fsync(**f, false);
    if (err.empty() && !st.ok()) err = "fsync: " + st.ToString();
    (void)(*cl)->close(*f);
    return err;
  }

  // Waits until every chain has all six positions serving, none held by
  // `gone` (0: any), naming what it saw if that never comes.
  void wait_healthy(uint32_t gone) {
    const auto give_up = std::chrono::steady_clock::now() + 180s;
    bool shown = false;
    for (;;) {
      std::string out;
      // What an admin sees meanwhile (printed once, when a poll catches a
      // rebuild's progress: not asserted, the rebuild may be quicker).
      if (!shown && run_surgectl(*cluster_, "chains", &out) == 0 &&
          out.find("rebuilt from the other positions") != std::string::npos) {
        std::printf("during the rebuild, surgectl chains:\n%s", out.c_str());
        shown = true;
      }
      ASSERT_EQ(run_surgectl(*cluster_, "--json chains", &out), 0) << out;
      auto chains = parse_chains(out);
      bool done = !chains.empty();
      for (const auto& c : chains) done = done && c.serving() == 6 && (gone == 0 || !c.has(gone));
      if (done) return;
      ASSERT_LT(std::chrono::steady_clock::now(), give_up)
          << "the EC chains never served on all six positions again: "
          << (run_surgectl(*cluster_, "chains", &out), out);
      std::this_thread::sleep_for(200ms);
    }
  }

  // The whole file through a fresh client, against the model.
  void verify(const std::string& when) {
    auto cl = cluster_->connect(sanitizer_scaled(10000));
    ASSERT_TRUE(cl.ok()) << cl.status().ToString();
    auto f = (*cl)->open("/ec/f", O_RDONLY);
    ASSERT_TRUE(f.ok()) << when << ": " << f.status().ToString();
    std::string got(model_.size() + 4096, '\0');
    auto n = (*cl)->pread(**f, got.data(), got.size(), 0);
    (void)(*cl)->close(*f);
    ASSERT_TRUE(n.ok()) << when << ": " << n.status().ToString();
    got.resize(*n);
    ASSERT_EQ(got.size(), model_.size()) << when;
    size_t at = 0;
    while (at < got.size() && got[at] == model_[at]) ++at;
    EXPECT_EQ(at, got.size()) << when << ": the bytes differ first at " << at;
  }

  // scrub: every block, and every parity window of every EC chain (exit
  // status 2 when a data server is down: its blocks are not scrubbed).
  void scrub_clean(const std::string& when, int status) {
    std::string out;
    EXPECT_EQ(run_surgectl(*cluster_, "scrub", &out), status) << when << ":\n" << out;
    EXPECT_NE(out.find("0 parity windows inconsistent, 0 chains not checked"), std::string::npos)
        << when << ":\n"
        << out;
  }

  // The data server index of target id t.
  int index_of(uint32_t t) const {
    for (int i = 0; i < cluster_->config().ods_count; ++i) {
      if (target_id_of(*cluster_, i) == t) return i;
    }
    return -1;
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::string model_;
  Json layout_;
};

TEST_F(EcRebuild, AReturningMemberIsRebuiltWhileWritesGoOn) {
  start(6, "");
  if (HasFatalFailure()) return;
  // A victim with parity in one slot and data in the other: both kinds of
  // position are rebuilt.
  uint32_t victim = 0;
  for (uint32_t p = 0; p < kData && victim == 0; ++p) {
    const uint32_t t = holder(0, p);
    if (holds_parity(1, t)) victim = t;
  }
  for (uint32_t p = 0; p < kData && victim == 0; ++p) {
    const uint32_t t = holder(1, p);
    if (holds_parity(0, t)) victim = t;
  }
  ASSERT_NE(victim, 0u) << "no target holds data in one slot and parity in the other:\n"
                        << layout_.dump();
  const int v = index_of(victim);
  ASSERT_GE(v, 0);

  std::atomic<bool> stop{false};
  std::atomic<int> writes{0};
  std::string failed;
  ASSERT_TRUE(cluster_->kill_ods(v).ok());
  std::thread writer([&] { failed = overwrite(stop, &writes); });
  std::this_thread::sleep_for(1500ms);  // writes it misses while away
  const int away = writes.load();
  Status started = cluster_->start_ods(v);
  if (started.ok()) wait_healthy(0);
  const int back = writes.load();
  std::this_thread::sleep_for(500ms);  // and some once it serves
  stop = true;
  writer.join();
  ASSERT_TRUE(started.ok()) << started.ToString();
  if (HasFatalFailure()) return;
  ASSERT_EQ(failed, "");
  std::printf("%d writes while target %u was away, %d more until it served again, %d in all\n",
              away, victim, back - away, writes.load());
  // Writes landed while it was away and while it came back (they are what
  // the rebuild must bring it, and what it must take meanwhile).
  EXPECT_GT(away, 0);
  EXPECT_GT(back, away);

  verify("after the rebuild");
  scrub_clean("after the rebuild", 0);
  // M other servers lost: the rebuilt chunks serve in their place.
  int killed = 0;
  for (int i = 0; i < cluster_->config().ods_count && killed < 2; ++i) {
    if (i == v) continue;
    ASSERT_TRUE(cluster_->kill_ods(i).ok());
    ++killed;
  }
  verify("with two other data servers killed");
}

TEST_F(EcRebuild, AMemberLostForGoodIsReplacedFromKOthers) {
  start(7, "[chains]\nreplace_after_ms = 3000\n");
  if (HasFatalFailure()) return;
  const uint32_t victim = holder(0, 0);
  const int v = index_of(victim);
  ASSERT_GE(v, 0);
  ASSERT_TRUE(cluster_->kill_ods(v).ok());
  wait_healthy(victim);
  verify("after the replacement");
  scrub_clean("after the replacement", 2);
  int killed = 0;
  for (uint32_t p = 1; p < kData + 2 && killed < 2; ++p) {
    const int i = index_of(holder(0, p));
    ASSERT_GE(i, 0);
    ASSERT_TRUE(cluster_->kill_ods(i).ok());
    ++killed;
  }
  verify("with two more original members killed");
}

}  // namespace
}  // namespace surge::test
