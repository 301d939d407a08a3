// Restarts in the middle of chain work (docs/redundancy.md, "Return and
// resync", "An MDS restart"), with real daemons on 127.0.0.1 and files in
// a directory of replicas 2 written through libsurge (and one writer
// through a FUSE mount):
//
// * the MDS SIGKILLed together with a data server while the writers run,
//   and restarted a second later: every write returns success;
// * the victim data server SIGKILLed again while it resyncs after its
//   return (seen SYNCING in `surgectl --json chains`): the reads carry on
//   from the survivors, and on its next return it resyncs from the start;
// * the MDS SIGKILLed while a lost data server's chains are being rebuilt
//   (a chain seen REBUILDING) and restarted: the rebuild resumes from the
//   chain records.
//
// After each, every byte reads back, every chain is healthy and `surgectl
// scrub` finds the replicas of every chunk identical.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/client/chain_state.h"
#include "tests/client/local_cluster.h"
#include "tests/common/time_scale.h"

namespace surge::test {
namespace {

using namespace std::chrono_literals;

constexpr size_t kBlock = 1 << 20;
constexpr int kIoTimeoutMs = 8000;

class ChainRestart : public ::testing::Test {
 protected:
  void start(int ods, int slots, const std::string& mds_toml = "") {
    ClusterConfig cfg;
    cfg.ods_count = ods;
    cfg.client_io_timeout_ms = "8000";
    cfg.mds_toml = mds_toml;
    auto c = LocalCluster::Start(cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    ASSERT_EQ(make_replicated_dir(*cluster_, "/r", 2, slots, kIoTimeoutMs), "");
  }

  // Writes data to path through its own libsurge client in 1 MiB pwrites
  // (counted in written_), then fsync and close; "" or the first error.
  std::string lib_write(const std::string& path, const std::string& data) {
    auto cl = cluster_->connect(kIoTimeoutMs);
    if (!cl.ok()) return cl.status().ToString();
    auto f = (*cl)->open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
    if (!f.ok()) return path + ": " + f.status().ToString();
    for (size_t off = 0; off < data.size(); off += kBlock) {
      const size_t n = std::min(kBlock, data.size() - off);
      auto w = (*cl)->pwrite(**f, data.data() + off, n, off);
      if (!w.ok()) return path + " at " + std::to_string(off) + ": " + w.status().ToString();
      written_ += n;
    }
    Status st = (*cl)->fsync(**f, false);
    if (!st.ok()) return path + " fsync: " + st.ToString();
    st = (*cl)->close(*f);
    if (!st.ok()) return path + " close: " + st.ToString();
    add_file(path, data);
    return "";
  }

  // The same through the mount with write(2) and fsync(2).
  std::string mount_write(const std::string& mnt, const std::string& path, const std::string& data) {
    const std::string p = mnt + path;
    int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return p + ": open: " + std::strerror(errno);
    std::string err;
    for (size_t off = 0; off < data.size() && err.empty(); off += kBlock) {
      const size_t n = std::min(kBlock, data.size() - off);
      if (::write(fd, data.data() + off, n) != static_cast<ssize_t>(n)) {
        err = p + " at " + std::to_string(off) + ": write: " + std::strerror(errno);
      }
      written_ += n;
    }
    if (err.empty() && ::fsync(fd) != 0) err = p + ": fsync: " + std::strerror(errno);
    if (::close(fd) != 0 && err.empty()) err = p + ": close: " + std::strerror(errno);
    if (err.empty()) add_file(path, data);
    return err;
  }

  void add_file(const std::string& path, const std::string& data) {
    std::lock_guard<std::mutex> l(files_mu_);
    files_.emplace_back(path, data);
  }

  // Every file written so far, through a fresh client: the bytes written.
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
        ASSERT_TRUE(n.ok()) << when << ": " << path << " at " << done << ": " << n.status().ToString();
        if (*n == 0) break;
        done += *n;
      }
      got.resize(done);
      EXPECT_TRUE(got == want) << when << ": " << path << ": the bytes read back differ ("
                               << got.size() << " of " << want.size() << " bytes)";
      (void)(*cl)->close(*f);
    }
  }

  std::vector<ChainState> chains() {
    std::string out;
    if (run_surgectl(*cluster_, "--json chains", &out) != 0) return {};
    return parse_chains(out);
  }

  // Every data server up and every chain healthy, then a scrub that
  // finds every chunk's replicas identical. A wait for convergence, not a
  // timed assertion: the bound only keeps a heal that never ends from
  // hanging the test.
  void healthy_and_identical(int ods, const std::string& when, int scrub_rc = 0) {
    Status st = cluster_->wait_targets_up(ods, 60000);
    ASSERT_TRUE(st.ok()) << st.ToString();
    const std::string settled = "\"degraded\":0,\"resyncing\":0,\"rebuilding\":0,\"unavailable\":0}";
    const auto give_up = std::chrono::steady_clock::now() + 180s;
    std::string out;
    for (;;) {
      ASSERT_EQ(run_surgectl(*cluster_, "--json status", &out), 0) << out;
      if (out.find(settled) != std::string::npos) break;
      ASSERT_LT(std::chrono::steady_clock::now(), give_up) << when << ": never healthy: " << out;
      std::this_thread::sleep_for(200ms);
    }
    EXPECT_EQ(run_surgectl(*cluster_, "scrub", &out), scrub_rc) << out;
    EXPECT_NE(out.find(" 0 replicas differ, 0 chains not compared"), std::string::npos) << out;
    EXPECT_EQ(out.find(" 0 chunks compared"), std::string::npos) << out;
    const size_t summary = out.rfind("scrub: ");
    std::printf("%s, %s", when.c_str(), out.substr(summary).c_str());
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::atomic<size_t> written_{0};
  std::mutex files_mu_;  // writers add to files_ from their threads
  std::vector<std::pair<std::string, std::string>> files_;
};

TEST_F(ChainRestart, MdsKilledWithADataServerDuringWritesLosesNoWrite) {
  start(3, 3);
  if (HasFatalFailure()) return;
  auto m = cluster_->mount("mnt");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  constexpr int kLib = 3;
  constexpr size_t kBytes = 32 * kBlock;
  std::vector<std::string> errors(kLib + 1);
  std::vector<std::thread> ts;
  for (int i = 0; i <= kLib; ++i) {
    ts.emplace_back([&, i] {
      const std::string path = "/r/w" + std::to_string(i);
      const std::string data = random_bytes(kBytes, 100 + static_cast<uint64_t>(i));
      errors[i] = i < kLib ? lib_write(path, data) : mount_write(*m, path, data);
    });
  }
  const size_t total = (kLib + 1) * kBytes;
  while (written_.load() < total / 3) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(cluster_->kill_ods(1).ok());
  ASSERT_TRUE(cluster_->kill_mds().ok());
  const size_t at_kill = written_.load();
  std::printf("killed data server 1 and the MDS with %zu of %zu MiB written\n", at_kill >> 20,
              total >> 20);
  std::this_thread::sleep_for(1s);
  Status st = cluster_->start_mds();
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (auto& t : ts) t.join();
  ASSERT_LT(at_kill, total) << "every writer had finished before the kill";
  for (int i = 0; i <= kLib; ++i) EXPECT_EQ(errors[i], "") << "writer " << i;
  verify_all("with data server 1 still down");
  if (HasFatalFailure()) return;
  st = cluster_->start_ods(1);
  ASSERT_TRUE(st.ok()) << st.ToString();
  healthy_and_identical(3, "after data server 1 resynced");
  verify_all("after the resync");
}

TEST_F(ChainRestart, VictimKilledAgainDuringItsOwnResyncResyncsOnItsNextReturn) {
  start(3, 3);
  if (HasFatalFailure()) return;
  const uint32_t victim = target_id_of(*cluster_, 0);
  ASSERT_NE(victim, 0u);
  ASSERT_EQ(lib_write("/r/before", random_bytes(8 * kBlock + 17, 1)), "");
  ASSERT_TRUE(cluster_->kill_ods(0).ok());
  // Enough written while it is away that its resync takes a while (twice
  // as much in sanitized builds, as in the rebuild case below).
  const int away = 6 * (kTimeScale > 1 ? 2 : 1);
  for (int i = 0; i < away; ++i) {
    ASSERT_EQ(lib_write("/r/away" + std::to_string(i), random_bytes(16 * kBlock + 5, 10 + i)), "");
  }
  Status st = cluster_->start_ods(0);
  ASSERT_TRUE(st.ok()) << st.ToString();
  // Killed again the moment a chain shows it SYNCING.
  bool seen = false;
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  std::string last;  // what surgectl said last, for the failure message
  while (!seen && std::chrono::steady_clock::now() < give_up) {
    if (run_surgectl(*cluster_, "--json chains", &last) != 0) continue;
    for (const auto& c : parse_chains(last)) {
      for (const auto& mb : c.members) seen = seen || (mb.target == victim && mb.state == "syncing");
    }
  }
  ASSERT_TRUE(seen) << "target " << victim
                    << " was never seen syncing; surgectl --json chains said last: " << last;
  ASSERT_TRUE(cluster_->kill_ods(0).ok());
  std::printf("killed target %u again during its resync\n", victim);
  verify_all("with the victim killed during its resync");
  if (HasFatalFailure()) return;
  ASSERT_EQ(lib_write("/r/after", random_bytes(4 * kBlock + 3, 99)), "");
  st = cluster_->start_ods(0);
  ASSERT_TRUE(st.ok()) << st.ToString();
  healthy_and_identical(3, "after its second return");
  verify_all("after its second return");
  // Its copies are whole: the others' deaths leave it serving everything.
  ASSERT_TRUE(cluster_->kill_ods(1).ok());
  verify_all("from the victim and data server 2 alone");
}

TEST_F(ChainRestart, MdsRestartInTheMiddleOfARebuildResumesIt) {
  start(4, 4, "[chains]\nreplace_after_ms = 4000\n");
  if (HasFatalFailure()) return;
  // Enough data that the rebuild lasts longer than a few polls of surgectl
  // (a process start each): under TSan at 8 files it was over between two
  // polls in 2 of 3 runs, so sanitized builds write twice as much.
  const int files = 8 * (kTimeScale > 1 ? 2 : 1);
  for (int i = 0; i < files; ++i) {
    ASSERT_EQ(lib_write("/r/f" + std::to_string(i), random_bytes(16 * kBlock + 7, 200 + i)), "");
  }
  const uint32_t lost = target_id_of(*cluster_, 0);
  ASSERT_NE(lost, 0u);
  ASSERT_TRUE(cluster_->kill_ods(0).ok());
  bool seen = false;
  auto give_up = std::chrono::steady_clock::now() + 120s;
  std::string last;  // what surgectl said last, for the failure message
  while (!seen && std::chrono::steady_clock::now() < give_up) {
    const int rc = run_surgectl(*cluster_, "--json chains", &last);
    if (rc != 0) continue;
    for (const auto& c : parse_chains(last)) seen = seen || c.health == "rebuilding";
  }
  ASSERT_TRUE(seen) << "no chain was ever seen rebuilding; surgectl --json chains said last: " << last;
  ASSERT_TRUE(cluster_->kill_mds().ok());
  std::printf("killed the MDS during the rebuild\n");
  std::this_thread::sleep_for(1s);
  Status st = cluster_->start_mds();
  ASSERT_TRUE(st.ok()) << st.ToString();
  // Every chain back to 2 serving members without the lost target.
  give_up = std::chrono::steady_clock::now() + 180s;
  for (;;) {
    const auto now = chains();
    bool done = !now.empty();
    for (const auto& c : now) done = done && c.serving() == 2 && !c.has(lost) && c.members.size() == 2;
    if (done) break;
    std::string out;
    ASSERT_LT(std::chrono::steady_clock::now(), give_up)
        << "the chains were never rebuilt without target " << lost << ": "
        << (run_surgectl(*cluster_, "chains", &out), out);
    std::this_thread::sleep_for(200ms);
  }
  verify_all("after the rebuild");
  if (HasFatalFailure()) return;
  healthy_and_identical(3, "after the rebuild", 2);  // the lost target: not scrubbed
}

}  // namespace
}  // namespace surge::test
