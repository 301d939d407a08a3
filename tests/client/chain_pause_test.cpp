// Chains that move with no server lost (issue 18, "nothing acknowledged is
// ever lost"): a data server SIGSTOPped for longer than the MDS's target
// timeout is marked down, its chains move on without it, and when it is
// SIGCONTed it comes back with the work it held when it stopped (requests
// in its sockets, forwards half done) and is resynced while that work
// runs. Here every data server in turn is paused and resumed, several
// times (sometimes the next one paused as the last resumes), while writers
// write and fsync replicated files (replicas 2 and 3); then, once every
// chain is healthy again, every file acknowledged whole reads back as
// written and `surgectl scrub` finds every replica of every chunk
// identical. No writer sees an error: a replica always comes back within
// the io timeout.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/client/chain_state.h"
#include "tests/client/local_cluster.h"

namespace surge::test {
namespace {

using namespace std::chrono_literals;

constexpr size_t kBlock = 1 << 20;
constexpr size_t kFileBytes = 6 * kBlock;
constexpr int kWriters = 12;
// Longer than a pause plus the MDS's 3 s target timeout and a resync: the
// client must ride out every chain change without an error.
constexpr int kIoTimeoutMs = 30000;
constexpr int kCycles = 10;

std::string data_of(int writer, int file) {
  return random_bytes(kFileBytes,
                      9000 + static_cast<uint64_t>(writer) * 1000 + static_cast<uint64_t>(file));
}

// chain_of and ods_of (chain_state.h), a failure added when they find
// nothing.
std::vector<std::pair<uint32_t, std::string>> chain_of(const LocalCluster& cluster,
                                                       const std::string& path) {
  std::string why;
  auto members = chain_of(cluster, path, &why);
  if (members.empty()) ADD_FAILURE() << "no chain for slot 0 of " << path << ": " << why;
  return members;
}

int ods_of(const LocalCluster& cluster, uint32_t id) {
  const int i = ods_of(cluster, 3, id);
  if (i < 0) ADD_FAILURE() << "no data server is target " << id;
  return i;
}

std::string describe(const std::vector<std::pair<uint32_t, std::string>>& members) {
  std::string s;
  for (const auto& [id, st] : members) s += (s.empty() ? "" : ", ") + std::to_string(id) + " " + st;
  return s;
}

// Waits until every chain is healthy (no member offline or syncing); a
// wait for convergence, not a timed assertion: the bound only keeps a
// resync that never ends from hanging the test.
void wait_settled(const LocalCluster& cluster) {
  const std::string settled = "\"degraded\":0,\"resyncing\":0,\"rebuilding\":0,\"unavailable\":0}";
  std::string out;
  const auto give_up = std::chrono::steady_clock::now() + 120s;
  for (;;) {
    ASSERT_EQ(run_surgectl(cluster, "--json status", &out), 0) << out;
    if (out.find(settled) != std::string::npos) return;
    ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "the chains never settled: " << out;
    std::this_thread::sleep_for(200ms);
  }
}

TEST(ChainPause, PausedDataServersLoseNoAcknowledgedByte) {
  ClusterConfig cfg;
  cfg.client_io_timeout_ms = std::to_string(kIoTimeoutMs);
  cfg.ods_worker_threads = 2;
  auto c = LocalCluster::Start(cfg);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto& cluster = *c;
  ASSERT_EQ(make_replicated_dir(*cluster, "/r3", 3, 3, kIoTimeoutMs), "");
  ASSERT_EQ(make_replicated_dir(*cluster, "/r2", 2, 3, kIoTimeoutMs), "");

  // Writers: files one after another (1 MiB pwrites, an fsync half way and
  // at the end, close) until the pauses are over.
  std::atomic<bool> churning{true};
  std::mutex mu;
  std::vector<std::string> errors;
  std::map<std::string, std::string> acked;  // path -> bytes, every call succeeded
  std::vector<std::thread> ts;
  for (int i = 0; i < kWriters; ++i) {
    ts.emplace_back([&, i] {
      auto cl = cluster->connect(kIoTimeoutMs);
      if (!cl.ok()) {
        std::lock_guard lk(mu);
        errors.push_back("connect: " + cl.status().ToString());
        return;
      }
      for (int n = 0; churning.load() || n == 0; ++n) {
        const std::string path =
            std::string(i % 2 ? "/r2" : "/r3") + "/w" + std::to_string(i) + "." + std::to_string(n);
        const std::string data = data_of(i, n);
        auto fail = [&](const std::string& what, const Status& st) {
          std::lock_guard lk(mu);
          errors.push_back(path + " " + what + ": " + st.ToString());
        };
        auto f = (*cl)->open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
        if (!f.ok()) return fail("open", f.status());
        bool ok = true;
        for (size_t off = 0; ok && off < data.size(); off += kBlock) {
          auto w = (*cl)->pwrite(**f, data.data() + off, kBlock, off);
          if (!w.ok()) {
            fail("pwrite at " + std::to_string(off), w.status());
            ok = false;
          } else if (off == data.size() / 2) {
            Status st = (*cl)->fsync(**f, false);
            if (!st.ok()) {
              fail("fsync", st);
              ok = false;
            }
          }
        }
        if (ok) {
          Status st = (*cl)->fsync(**f, false);
          if (!st.ok()) {
            fail("fsync", st);
            ok = false;
          }
        }
        Status st = (*cl)->close(*f);
        if (ok && !st.ok()) {
          fail("close", st);
          ok = false;
        }
        if (ok) {
          std::lock_guard lk(mu);
          acked[path] = data;
        }
      }
    });
  }

  // One data server paused at a time, each past the target timeout (the
  // MDS marks it down and its chains move), then resumed (it returns and
  // is resynced while its held work runs) and the next one paused: after a
  // pause with a little time to settle, or at once (a handover: the one
  // that returns finds the source of its resync gone, in the chains they
  // share).
  // A step that fails ends the schedule but not the test body: the writer
  // threads are still running and must be joined first (a fatal assertion
  // here would leave them joinable, and the abort would hide its message).
  std::string schedule_error;
  auto step = [&](bool ok, const std::string& what) {
    if (!ok && schedule_error.empty()) schedule_error = what;
    return ok;
  };
  auto stop = [&](int i) {
    return step(stop_process(cluster->ods_pid(i)), "SIGSTOP of data server " + std::to_string(i));
  };
  auto resume = [&](int i) {
    return step(kill(cluster->ods_pid(i), SIGCONT) == 0,
                "SIGCONT of data server " + std::to_string(i));
  };
  int paused = 0;
  bool going = stop(paused);
  for (int k = 0; going && k < kCycles; ++k) {
    std::this_thread::sleep_for(3500ms + 500ms * (k % 3));
    const int next = (paused + 1) % 3;
    if (k % 2 == 1) {
      going = stop(next) && resume(paused);
    } else {
      going = resume(paused);
      std::this_thread::sleep_for(1000ms + 700ms * (k % 4 == 0));
      going = going && stop(next);
    }
    paused = next;
  }
  if (going) std::this_thread::sleep_for(4000ms);
  for (int i = 0; i < 3; ++i) (void)kill(cluster->ods_pid(i), SIGCONT);
  churning = false;
  for (auto& t : ts) t.join();
  ASSERT_EQ(schedule_error, "") << "the pause schedule failed";

  wait_settled(*cluster);
  if (HasFatalFailure()) return;
  std::string out;

  // The hand-over schedule can leave a replicas-2 chain with no member
  // that takes writes (the returning member is offline again because its
  // resync source was paused in its turn): a write then fails after its
  // retries, as it must. What may never happen is an acknowledged byte
  // lost, which is what is checked below; errors are shown, not failures.
  for (const auto& e : errors) std::printf("writer error (not acknowledged): %s\n", e.c_str());
  EXPECT_GE(acked.size(), static_cast<size_t>(kWriters));

  auto cl = cluster->connect(kIoTimeoutMs);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  for (const auto& [path, data] : acked) {
    auto f = (*cl)->open(path, O_RDONLY);
    ASSERT_TRUE(f.ok()) << path << ": " << f.status().ToString();
    std::string got(kFileBytes + 1, '\0');
    size_t done = 0;
    while (done < got.size()) {
      auto n = (*cl)->pread(**f, got.data() + done, got.size() - done, done);
      ASSERT_TRUE(n.ok()) << path << " at " << done << ": " << n.status().ToString();
      if (*n == 0) break;
      done += *n;
    }
    got.resize(done);
    size_t first = 0;
    while (first < std::min(got.size(), data.size()) && got[first] == data[first]) ++first;
    EXPECT_TRUE(got == data) << path << ": " << done << " bytes read back, not the " << data.size()
                             << " written; first difference at byte " << first;
    (void)(*cl)->close(*f);
  }

  EXPECT_EQ(run_surgectl(*cluster, "scrub", &out), 0) << out;
  EXPECT_NE(out.find(" 0 replicas differ, 0 chains not compared"), std::string::npos) << out;
  std::printf("%zu files acknowledged and checked, %zu writer errors\n", acked.size(),
              errors.size());
}

// The member a chain was resyncing and its resync source go away together:
// replicas 2, one chain for the file. The tail is paused (the chain goes
// on with the head alone) and the file grows; then the head is paused and
// the tail resumed, so the tail comes back SYNCING from a source that
// cannot send, and the head is marked down. A SYNCING member must not be
// left alone in the write chain then (it lacks what the head took alone):
// it waits OFFLINE, the head comes back serving, the tail resyncs from it,
// and every byte written, before and after, reads back.
TEST(ChainPause, SyncingMemberDoesNotOutliveItsSource) {
  ClusterConfig cfg;
  cfg.client_io_timeout_ms = std::to_string(kIoTimeoutMs);
  auto c = LocalCluster::Start(cfg);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto& cluster = *c;
  ASSERT_EQ(make_replicated_dir(*cluster, "/d", 2, 1, kIoTimeoutMs), "");
  auto cl = cluster->connect(kIoTimeoutMs);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  const std::string data = random_bytes(12 * kBlock, 77);
  auto f = (*cl)->open("/d/f", O_RDWR | O_CREAT | O_EXCL, 0644);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto write_range = [&](size_t from, size_t to) {
    for (size_t off = from; off < to; off += kBlock) {
      auto w = (*cl)->pwrite(**f, data.data() + off, kBlock, off);
      ASSERT_TRUE(w.ok()) << "/d/f at " << off << ": " << w.status().ToString();
    }
    Status st = (*cl)->fsync(**f, false);
    ASSERT_TRUE(st.ok()) << "/d/f: " << st.ToString();
  };
  write_range(0, 4 * kBlock);
  auto members = chain_of(*cluster, "/d/f");
  ASSERT_EQ(members.size(), 2u) << describe(members);
  const int head = ods_of(*cluster, members[0].first);
  const int tail = ods_of(*cluster, members[1].first);
  ASSERT_GE(head, 0);
  ASSERT_GE(tail, 0);
  // Waits (bounded only so a chain that never gets there fails, not hangs)
  // until the chain's members are in the states `want` accepts.
  auto wait_chain = [&](const std::string& what, auto want) {
    const auto give_up = std::chrono::steady_clock::now() + 60s;
    for (;;) {
      members = chain_of(*cluster, "/d/f");
      if (want(members)) return;
      ASSERT_LT(std::chrono::steady_clock::now(), give_up)
          << what << " never happened: " << describe(members);
      std::this_thread::sleep_for(100ms);
    }
  };
  auto state_of = [&](const std::vector<std::pair<uint32_t, std::string>>& m, int ods) {
    const uint32_t id = target_id_of(*cluster, ods);
    for (const auto& [t, st] : m) {
      if (t == id) return st;
    }
    return std::string("absent");
  };

  // The tail away: the head serves alone, and takes 4 MiB more alone.
  ASSERT_TRUE(stop_process(cluster->ods_pid(tail)));
  wait_chain("the paused tail going offline",
             [&](const auto& m) { return state_of(m, tail) == "offline"; });
  if (HasFatalFailure()) return;
  write_range(4 * kBlock, 8 * kBlock);

  // The head away, the tail back: it comes back as the head, its source,
  // is marked down.
  ASSERT_TRUE(stop_process(cluster->ods_pid(head)));
  ASSERT_EQ(kill(cluster->ods_pid(tail), SIGCONT), 0);
  wait_chain("the paused head going offline",
             [&](const auto& m) { return state_of(m, head) == "offline"; });
  if (HasFatalFailure()) return;
  std::printf("head paused, tail resumed: %s\n", describe(members).c_str());
  EXPECT_NE(state_of(members, tail), "serving") << describe(members);

  // The head back: it serves; the file grows again, and all of it reads
  // back, before and after the chains settle.
  ASSERT_EQ(kill(cluster->ods_pid(head), SIGCONT), 0);
  wait_chain("the head serving again",
             [&](const auto& m) { return state_of(m, head) == "serving"; });
  if (HasFatalFailure()) return;
  write_range(8 * kBlock, 12 * kBlock);
  ASSERT_TRUE((*cl)->close(*f).ok());
  auto read_all = [&](const std::string& when) {
    auto r = (*cl)->open("/d/f", O_RDONLY);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    std::string got(data.size() + 1, '\0');
    size_t done = 0;
    while (done < got.size()) {
      auto n = (*cl)->pread(**r, got.data() + done, got.size() - done, done);
      ASSERT_TRUE(n.ok()) << "/d/f at " << done << ": " << n.status().ToString();
      if (*n == 0) break;
      done += *n;
    }
    got.resize(done);
    size_t first = 0;
    while (first < std::min(got.size(), data.size()) && got[first] == data[first]) ++first;
    EXPECT_TRUE(got == data) << when << ": /d/f: " << done << " bytes read back, not the "
                             << data.size() << " written; first difference at byte " << first;
    (void)(*cl)->close(*r);
  };
  read_all("with the head back");
  wait_chain("both members serving", [&](const auto& m) {
    return state_of(m, head) == "serving" && state_of(m, tail) == "serving";
  });
  if (HasFatalFailure()) return;
  read_all("once both serve");
  wait_settled(*cluster);  // the other chains too, before the scrub
  if (HasFatalFailure()) return;
  std::string out;
  EXPECT_EQ(run_surgectl(*cluster, "scrub", &out), 0) << out;
  EXPECT_NE(out.find(" 0 replicas differ, 0 chains not compared"), std::string::npos) << out;
}

}  // namespace
}  // namespace surge::test
