// Writes to an EC data position whose member is down (issue 16;
// docs/redundancy.md, "EC degraded writes"), with real daemons: 1 MDS and
// 6 data servers on 127.0.0.1, a 4+2 directory of 64 KiB units over 2
// slots (every chain holds all six targets).
//
// * The member of data position 0 of one slot's chain is SIGKILLed; once
//   the MDS has taken it out, writes through libsurge keep landing (whole
//   groups, ranges inside and across its units, an append past the end):
//   the stand-in, the first serving parity position, takes those of its
//   position. A fresh client reads the file back as the writer's model
//   (the down position rebuilt from the parity); the member, started
//   again, is rebuilt and serves; the file reads back, the parity scrub is
//   clean, and with two other servers then killed every byte still reads
//   back, now from the returned member's chunks.
// * Two clients write interleaved ranges of the same groups while the
//   position is down, one into the down position's units (stand-in) and
//   one into the others' (parity deltas from their data positions); then
//   the same checks.
// * A file created while the position is down is placed on the chains
//   with it out (K + 1 positions serve) and written whole through the
//   stand-in; the same checks.
// * The file truncated to 0 and written again while the position is down
//   (the stand-in cuts the position's chunk first), then past its old end
//   over a hole that must read as zeros; the same checks.
// * After writes through the stand-in, two more servers go, so fewer than
//   K positions serve, and the first one returns before them: the MDS
//   takes returning data members back as they are then (none can be
//   rebuilt), but not this one, whose chunks miss what the stand-in took;
//   it is rebuilt once K serve, and the file reads back.
// * With three of six positions down (fewer than K serve) a write to a
//   serving data position fails and lands nowhere: the file reads back
//   unchanged once they return, and scrub is clean.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>

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
constexpr uint64_t kGroups = 12;
constexpr uint64_t kFileBytes = kGroups * kGroup + 777;
constexpr int kIoTimeoutMs = 8000;

class EcDegradedWrite : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterConfig cfg;
    cfg.ods_count = 6;
    cfg.client_io_timeout_ms = std::to_string(kIoTimeoutMs);
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

  // The data server index of target id t.
  int index_of(uint32_t t) const {
    for (int i = 0; i < cluster_->config().ods_count; ++i) {
      if (target_id_of(*cluster_, i) == t) return i;
    }
    return -1;
  }

  // File offset of byte `at` of the unit of data position p in group g
  // (groups alternate between the slots).
  static uint64_t unit_offset(uint64_t g, uint32_t p, uint64_t at) {
    return g * kGroup + p * kUnit + at;
  }

  // The state of `position` of slot s now (`surgectl --json getstripe`).
  std::string position_state(uint32_t s, uint32_t position) {
    std::string out;
    if (run_surgectl(*cluster_, "--json getstripe /ec/f", &out) != 0) {
      return "surgectl failed: " + out;
    }
    return Json::parse(out).at("slots")[s].at("positions")[position].at("state").get<std::string>();
  }

  // Kills the member `victim` and waits until the MDS has it offline in
  // every chain (its writes go to the stand-in from then on).
  void kill_and_wait_offline(uint32_t victim) {
    const int v = index_of(victim);
    ASSERT_GE(v, 0);
    ASSERT_TRUE(cluster_->kill_ods(v).ok());
    wait_offline(victim);
  }
  void wait_offline(uint32_t victim) {
    const auto give_up = std::chrono::steady_clock::now() + 60s;
    for (;;) {
      std::string out;
      ASSERT_EQ(run_surgectl(*cluster_, "--json chains", &out), 0) << out;
      bool offline = true;
      for (const auto& c : parse_chains(out)) {
        for (const auto& m : c.members)
          offline = offline && (m.target != victim || m.state == "offline");
      }
      if (offline) return;
      ASSERT_LT(std::chrono::steady_clock::now(), give_up)
          << "target " << victim << " was never taken out: " << out;
      std::this_thread::sleep_for(200ms);
    }
  }

  // Writes [off, off + len) through cl's open file f with fresh bytes and
  // keeps the model; "" or what failed.
  std::string write(Client& cl, File& f, uint64_t off, uint64_t len, uint64_t seed) {
    const std::string bytes = random_bytes(len, seed);
    auto w = cl.pwrite(f, bytes.data(), len, off);
    if (!w.ok()) {
      return "write of [" + std::to_string(off) + ", +" + std::to_string(len) +
             "): " + w.status().ToString();
    }
    std::lock_guard lk(model_mu_);
    if (model_.size() < off + len) model_.resize(off + len, '\0');
    model_.replace(off, len, bytes);
    return "";
  }

  void start_and_wait_healthy(uint32_t victim, bool start) {
    if (start) {
      ASSERT_TRUE(cluster_->start_ods(index_of(victim)).ok());
    }
    const auto give_up = std::chrono::steady_clock::now() + 180s;
    for (;;) {
      std::string out;
      ASSERT_EQ(run_surgectl(*cluster_, "--json chains", &out), 0) << out;
      auto chains = parse_chains(out);
      bool done = !chains.empty();
      for (const auto& c : chains) done = done && c.serving() == 6;
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
    auto f = (*cl)->open(path_, O_RDONLY);
    ASSERT_TRUE(f.ok()) << when << ": " << path_ << ": " << f.status().ToString();
    std::string got(model_.size() + 4096, '\0');
    auto n = (*cl)->pread(**f, got.data(), got.size(), 0);
    (void)(*cl)->close(*f);
    ASSERT_TRUE(n.ok()) << when << ": " << n.status().ToString();
    got.resize(*n);
    ASSERT_EQ(got.size(), model_.size()) << when;
    size_t at = 0;
    while (at < got.size() && got[at] == model_[at]) ++at;
    EXPECT_EQ(at, got.size()) << when << ": the bytes differ first at " << at << " (group "
                              << at / kGroup << ", unit " << at % kGroup / kUnit << ")";
  }

  void scrub_clean(const std::string& when) {
    std::string out;
    EXPECT_EQ(run_surgectl(*cluster_, "scrub", &out), 0) << when << ":\n" << out;
    EXPECT_NE(out.find("0 parity windows inconsistent, 0 chains not checked"), std::string::npos)
        << when << ":\n"
        << out;
  }

  // After the victim is back: the file, scrub, and the file again with two
  // other servers gone (read from the returned member's chunks).
  void check_after_return(uint32_t victim, bool start = true) {
    start_and_wait_healthy(victim, start);
    if (HasFatalFailure()) return;
    verify("after the member's return");
    scrub_clean("after the member's return");
    int killed = 0;
    for (int i = 0; i < cluster_->config().ods_count && killed < 2; ++i) {
      if (i == index_of(victim)) continue;
      ASSERT_TRUE(cluster_->kill_ods(i).ok());
      ++killed;
    }
    verify("with two other data servers killed");
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::mutex model_mu_;
  std::string path_ = "/ec/f";  // the file verify() reads, model_ its bytes
  std::string model_;
  Json layout_;
};

TEST_F(EcDegradedWrite, WritesToADownDataPositionLandAndSurviveItsReturn) {
  const uint32_t victim = holder(0, 0);
  kill_and_wait_offline(victim);
  if (HasFatalFailure()) return;
  auto cl = cluster_->connect(kIoTimeoutMs);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  auto f = (*cl)->open("/ec/f", O_RDWR);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  // Group 0 and 2 are slot 0's: the victim holds their data position 0.
  ASSERT_EQ(write(**cl, **f, unit_offset(0, 0, 100), 5000, 1), "");         // inside its unit
  ASSERT_EQ(write(**cl, **f, unit_offset(2, 0, 0), kUnit, 2), "");          // its whole unit
  ASSERT_EQ(write(**cl, **f, unit_offset(2, 0, kUnit - 300), 900, 3), "");  // across to position 1
  ASSERT_EQ(write(**cl, **f, unit_offset(4, 0, 0), 2 * kGroup, 4), "");     // whole groups
  ASSERT_EQ(write(**cl, **f, unit_offset(0, 0, 100), 5000, 5), "");         // over the first again
  ASSERT_EQ(write(**cl, **f, kFileBytes + 1000, 3 * kGroup + 55, 6), "");   // past the end
  ASSERT_TRUE((*cl)->fsync(**f, false).ok());
  ASSERT_TRUE((*cl)->close(*f).ok());
  verify("with data position 0 of slot 0 down");
  if (HasFailure()) return;
  check_after_return(victim);
}

TEST_F(EcDegradedWrite, TwoWritersShareGroupsWhileAPositionIsDown) {
  const uint32_t victim = holder(0, 0);
  kill_and_wait_offline(victim);
  if (HasFatalFailure()) return;
  // Writer 0: ranges of the down position's units (through the stand-in);
  // writer 1: ranges of positions 1..3 of the same groups, at once.
  std::string failed[2];
  auto run = [&](int w) {
    auto cl = cluster_->connect(kIoTimeoutMs);
    if (!cl.ok()) {
      failed[w] = cl.status().ToString();
      return;
    }
    auto f = (*cl)->open("/ec/f", O_RDWR);
    if (!f.ok()) {
      failed[w] = f.status().ToString();
      return;
    }
    std::mt19937_64 rng(17 + w);
    for (int i = 0; i < 40 && failed[w].empty(); ++i) {
      const uint64_t g = 2 * (rng() % (kGroups / 2));  // slot 0's groups
      const uint32_t p = w == 0 ? 0 : 1 + static_cast<uint32_t>(rng() % (kData - 1));
      const uint64_t at = rng() % (kUnit - 1);
      const uint64_t len = 1 + rng() % (kUnit - at);
      failed[w] = write(**cl, **f, unit_offset(g, p, at), len, 100 + w * 1000 + i);
    }
    Status st = (*cl)->fsync(**f, false);
    if (failed[w].empty() && !st.ok()) failed[w] = "fsync: " + st.ToString();
    (void)(*cl)->close(*f);
  };
  std::thread a(run, 0), b(run, 1);
  a.join();
  b.join();
  ASSERT_EQ(failed[0], "");
  ASSERT_EQ(failed[1], "");
  verify("after two writers with data position 0 of slot 0 down");
  if (HasFailure()) return;
  check_after_return(victim);
}

TEST_F(EcDegradedWrite, AMemberStoodInForIsNotTakenBackAsItIs) {
  const uint32_t victim = holder(0, 0);
  kill_and_wait_offline(victim);
  if (HasFatalFailure()) return;
  {
    auto cl = cluster_->connect(kIoTimeoutMs);
    ASSERT_TRUE(cl.ok()) << cl.status().ToString();
    auto f = (*cl)->open("/ec/f", O_RDWR);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    for (uint64_t g = 0; g < kGroups; g += 2) {
      ASSERT_EQ(write(**cl, **f, unit_offset(g, 0, 10), kUnit - 20, 300 + g), "");
    }
    ASSERT_TRUE((*cl)->fsync(**f, false).ok());
    ASSERT_TRUE((*cl)->close(*f).ok());
  }
  // Data positions 1 and 2 of slot 0 go too: 3 of 6 serve, fewer than K.
  const uint32_t others[2] = {holder(0, 1), holder(0, 2)};
  for (uint32_t t : others) {
    ASSERT_TRUE(cluster_->kill_ods(index_of(t)).ok());
    wait_offline(t);
    if (HasFatalFailure()) return;
  }
  // The victim returns first, while fewer than K serve: not as it is.
  ASSERT_TRUE(cluster_->start_ods(index_of(victim)).ok());
  std::this_thread::sleep_for(3s);  // several heartbeats and reconciles
  const std::string state = position_state(0, 0);
  EXPECT_NE(state, "serving") << "target " << victim << " serves data position 0 as it is";
  for (uint32_t t : others) ASSERT_TRUE(cluster_->start_ods(index_of(t)).ok());
  check_after_return(victim, false);
}

TEST_F(EcDegradedWrite, AFileCreatedWhileAPositionIsDownIsWrittenThroughTheStandIn) {
  const uint32_t victim = holder(0, 0);
  kill_and_wait_offline(victim);
  if (HasFatalFailure()) return;
  auto cl = cluster_->connect(kIoTimeoutMs);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  // Every chain holds all six targets, so each new file has the victim in
  // some position of each slot; placement rotates them, and a few files
  // give one where it holds data position 0..3 of slot 0.
  std::string out;
  for (int i = 0; i < 12 && path_ == "/ec/f"; ++i) {
    const std::string path = "/ec/g" + std::to_string(i);
    auto f = (*cl)->open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
    ASSERT_TRUE(f.ok()) << "create of " << path << " with target " << victim
                        << " down: " << f.status().ToString();
    ASSERT_TRUE((*cl)->close(*f).ok());
    ASSERT_EQ(run_surgectl(*cluster_, "--json getstripe " + path, &out), 0) << out;
    const Json positions = Json::parse(out).at("slots")[0].at("positions");
    for (uint32_t p = 0; p < kData; ++p) {
      if (positions[p].at("target").get<uint32_t>() != victim) continue;
      EXPECT_EQ(positions[p].at("state").get<std::string>(), "offline") << path << ": " << out;
      path_ = path;
    }
  }
  ASSERT_NE(path_, "/ec/f") << "no new file had target " << victim
                            << " in a data position of slot 0";
  model_.clear();
  auto f = (*cl)->open(path_, O_RDWR);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  // Whole groups as a writer streams them (1 MiB), then a partial group at
  // the end and a range inside the first group written over.
  for (uint64_t off = 0; off < 6 * kGroup; off += 1 << 20) {
    ASSERT_EQ(write(**cl, **f, off, std::min<uint64_t>(1 << 20, 6 * kGroup - off), 400 + off), "");
  }
  ASSERT_EQ(write(**cl, **f, 6 * kGroup, kGroup / 2 + 99, 401), "");
  ASSERT_EQ(write(**cl, **f, 3000, 2 * kUnit, 402), "");
  ASSERT_TRUE((*cl)->fsync(**f, false).ok());
  ASSERT_TRUE((*cl)->close(*f).ok());
  verify("created and written with target " + std::to_string(victim) + " down");
  if (HasFailure()) return;
  check_after_return(victim);
}

// A file truncated while a data position is down (O_TRUNC, as a program
// rewriting it does) and written again, then past its old end over a
// hole: the stand-in cuts the down position's chunk on its behalf before
// the first write (before, the writes failed: the truncate waits for the
// member, and the stand-in refused writes naming it).
TEST_F(EcDegradedWrite, AFileTruncatedWhileAPositionIsDownIsWrittenAgain) {
  const uint32_t victim = holder(0, 0);
  kill_and_wait_offline(victim);
  if (HasFatalFailure()) return;
  auto cl = cluster_->connect(kIoTimeoutMs);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  auto f = (*cl)->open("/ec/f", O_RDWR | O_TRUNC);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  model_.clear();
  ASSERT_EQ(write(**cl, **f, 0, 3 * kGroup + 1234, 500), "");
  ASSERT_EQ(write(**cl, **f, unit_offset(2, 0, 77), 999, 501), "");
  // Past the old end, over a hole: the old bytes of groups 4..10 must read
  // as zeros, so the down position's chunk must have been cut.
  ASSERT_EQ(write(**cl, **f, unit_offset(kGroups - 1, 3, 5), 100, 502), "");
  ASSERT_TRUE((*cl)->fsync(**f, false).ok());
  ASSERT_TRUE((*cl)->close(*f).ok());
  verify("rewritten after a truncate with target " + std::to_string(victim) + " down");
  if (HasFailure()) return;
  check_after_return(victim);
}

// With fewer than K positions serving no write lands: the data servers
// refuse it, so a member away then misses nothing and the MDS may take it
// back as it is (ChainMember.current_while_away). Before, a data position
// took the write alone, with no parity position left to send it to.
TEST_F(EcDegradedWrite, NoWriteLandsWhileFewerThanKPositionsServe) {
  const uint32_t gone[3] = {holder(0, 1), holder(0, 2), holder(0, 3)};
  for (uint32_t t : gone) {
    kill_and_wait_offline(t);
    if (HasFatalFailure()) return;
  }
  auto cl = cluster_->connect(kIoTimeoutMs);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  auto f = (*cl)->open("/ec/f", O_RDWR);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  // Data position 0 of slot 0, whose member serves, beside 2 parity only.
  const std::string bytes = random_bytes(5000, 600);
  auto w = (*cl)->pwrite(**f, bytes.data(), bytes.size(), unit_offset(0, 0, 100));
  const Status st = w.ok() ? (*cl)->fsync(**f, false) : w.status();
  EXPECT_FALSE(st.ok()) << "a write landed with 3 of 6 positions serving";
  (void)(*cl)->close(*f);
  for (uint32_t t : gone) ASSERT_TRUE(cluster_->start_ods(index_of(t)).ok());
  start_and_wait_healthy(gone[0], false);
  if (HasFatalFailure()) return;
  verify("after the three members returned");
  scrub_clean("after the three members returned");
}

}  // namespace
}  // namespace surge::test
