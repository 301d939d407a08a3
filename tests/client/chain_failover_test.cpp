// Replicated chains under a SIGKILLed data server (docs/redundancy.md,
// "What the client does"; client/lib/data_path.h), with real daemons: 1 MDS
// and 3 data servers on 127.0.0.1, files in a directory given
// `surgectl setstripe --replicas N --count 3`, written by several libsurge
// clients and through a FUSE mount at once.
//
// With 3 data servers the chains of width 2 (strides 1 and 2) are [0,1],
// [1,2], [2,0], [0,2], [1,0], [2,1] (docs/redundancy.md, "Forming
// chains"): killing one target kills the head of two chains and the tail
// of two, under every writer at once. Every write returns success, every
// byte reads back (a reader of a file written before reads right all
// along), and new files keep being created while the target is down.
// Then the victim is restarted and resynced until every chain is healthy,
// and `surgectl scrub` finds the replicas of every chunk identical.
// replicas 3: two targets SIGKILLed one after another, and (one slot per
// file, so one chain) its head, its middle or its tail, each a test.
// replicas 1 (one-member chains): the write fails with EIO naming the
// chunk, the target and its address.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/client/local_cluster.h"
#include "tests/client/metrics_page.h"
#include "tests/common/time_scale.h"

namespace surge::test {
namespace {

using namespace std::chrono_literals;

constexpr size_t kBlock = 1 << 20;
// Per writer. In the Soft-RoCE VM (SURGE_TEST_TRANSPORT=rdma, emulated
// CPUs, several times slower) a third of that: the kills still land in the
// middle of every writer (write_while_killing checks), and the six cases
// stay within the VM test's time (docs/testing.md, "RDMA in the VM").
bool over_rdma() {
  const char* t = std::getenv("SURGE_TEST_TRANSPORT");
  return t != nullptr && std::string(t) == "rdma";
}
const size_t kFileBytes = (over_rdma() ? 16 : 48) * kBlock;
// Bounds on waits for convergence (not timed assertions): longer in the VM.
const int kSlow = over_rdma() ? 4 : 1;

class ChainFailover : public ::testing::Test {
 protected:
  // A cluster, a directory /r of `replicas` copies over `count` slots, a
  // mount.
  void start(int replicas, int count = 3) {
    ClusterConfig cfg;
    cfg.client_io_timeout_ms = std::to_string(kIoTimeoutMs);
    cfg.metrics = true;  // which transport the data servers used (restart_and_scrub)
    auto c = LocalCluster::Start(cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    auto cl = cluster_->connect(kIoTimeoutMs);
    ASSERT_TRUE(cl.ok()) << cl.status().ToString();
    ASSERT_TRUE((*cl)->mkdir("/r", 0777).ok());
    std::string out;
    ASSERT_EQ(surgectl("setstripe --replicas " + std::to_string(replicas) +
                           " --count " + std::to_string(count) + " --size 1048576 /r",
                       &out),
              0)
        << out;
    auto m = cluster_->mount("mnt");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    mnt_ = *m;
  }

  int surgectl(const std::string& args, std::string* out) {
    const char* b = std::getenv("SURGE_BUILD_DIR");
    if (b == nullptr) {
      *out = "SURGE_BUILD_DIR is not set (run through ctest)";
      return -1;
    }
    out->clear();
    return sh(std::string(b) + "/tools/surgectl --mds " + cluster_->mds_address() +
                  " --key-file " + cluster_->key_file() + " " + args + " 2>&1",
              out);
  }

  static std::string data_of(int writer) {
    return random_bytes(kFileBytes, 1000 + static_cast<uint64_t>(writer));
  }

  // Writes data_of(i) to /r/w<i> through its own libsurge client in 1 MiB
  // pwrites, then fsync and close; the first error ("" when none).
  std::string lib_writer(int i) {
    auto cl = cluster_->connect(kIoTimeoutMs);
    if (!cl.ok()) return cl.status().ToString();
    const std::string path = "/r/w" + std::to_string(i);
    auto f = (*cl)->open(path, O_RDWR | O_CREAT | (precreated_ && i == 0 ? 0 : O_EXCL), 0644);
    if (!f.ok()) return path + ": " + f.status().ToString();
    const std::string data = data_of(i);
    for (size_t off = 0; off < data.size(); off += kBlock) {
      auto w = (*cl)->pwrite(**f, data.data() + off, kBlock, off);
      if (!w.ok()) return path + " at " + std::to_string(off) + ": " + w.status().ToString();
      written_ += kBlock;
    }
    Status st = (*cl)->fsync(**f, false);
    if (!st.ok()) return path + " fsync: " + st.ToString();
    st = (*cl)->close(*f);
    return st.ok() ? "" : path + " close: " + st.ToString();
  }

  // The same through the mount, with write(2) and fsync(2).
  std::string mount_writer(int i) {
    const std::string path = mnt_ + "/r/w" + std::to_string(i);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return path + ": open: " + std::strerror(errno);
    const std::string data = data_of(i);
    std::string err;
    for (size_t off = 0; off < data.size() && err.empty(); off += kBlock) {
      if (::write(fd, data.data() + off, kBlock) != static_cast<ssize_t>(kBlock)) {
        err = path + " at " + std::to_string(off) + ": write: " + std::strerror(errno);
      }
      written_ += kBlock;
    }
    if (err.empty() && ::fsync(fd) != 0) err = path + ": fsync: " + std::strerror(errno);
    if (::close(fd) != 0 && err.empty()) err = path + ": close: " + std::strerror(errno);
    return err;
  }

  // Reads /r/pre (written before) again and again through its own client
  // until told to stop; the first error or wrong byte ("" when none).
  std::string reader(const std::string& want, const std::atomic<bool>& stop) {
    auto cl = cluster_->connect(kIoTimeoutMs);
    if (!cl.ok()) return cl.status().ToString();
    std::string got(kBlock, '\0');
    for (int pass = 0; !stop.load() || pass == 0; ++pass) {
      auto f = (*cl)->open("/r/pre", O_RDONLY);
      if (!f.ok()) return "open /r/pre: " + f.status().ToString();
      for (size_t off = 0; off < want.size(); off += kBlock) {
        auto n = (*cl)->pread(**f, got.data(), kBlock, off);
        if (!n.ok()) return "/r/pre at " + std::to_string(off) + ": " + n.status().ToString();
        if (*n != kBlock || std::memcmp(got.data(), want.data() + off, kBlock) != 0) {
          return "/r/pre at " + std::to_string(off) + ": the bytes read differ (pass " +
                 std::to_string(pass) + ")";
        }
      }
      (void)(*cl)->close(*f);
    }
    return "";
  }

  // Every writer at once, and a reader of a file written before; `victim`
  // is SIGKILLed once a third of the bytes are written, and small files
  // are created while it is down.
  void write_while_killing(int victim, int lib_writers) {
    write_while_killing(std::vector<int>{victim}, lib_writers);
  }
  // The same with several victims, one after another: the k-th of n once
  // k / (n + 1) of the bytes are written.
  void write_while_killing(const std::vector<int>& victims, int lib_writers) {
    lib_writers_ = lib_writers;
    const int kWriters = lib_writers + 1;  // plus one through the mount
    const std::string pre = random_bytes(12 * kBlock, 3000);
    {
      auto cl = cluster_->connect(kIoTimeoutMs);
      ASSERT_TRUE(cl.ok()) << cl.status().ToString();
      auto f = (*cl)->open("/r/pre", O_RDWR | O_CREAT | O_EXCL, 0644);
      ASSERT_TRUE(f.ok()) << f.status().ToString();
      auto w = (*cl)->pwrite(**f, pre.data(), pre.size(), 0);
      ASSERT_TRUE(w.ok()) << w.status().ToString();
      Status closed = (*cl)->close(*f);
      ASSERT_TRUE(closed.ok()) << closed.ToString();
    }
    std::atomic<bool> stop_reading{false};
    std::string read_error;
    std::thread read_thread([&] { read_error = reader(pre, stop_reading); });
    std::vector<std::string> errors(kWriters);
    std::vector<std::thread> ts;
    std::atomic<int> finished{0};
    for (int i = 0; i < lib_writers; ++i) {
      ts.emplace_back([this, i, &errors, &finished] {
        errors[i] = lib_writer(i);
        ++finished;
      });
    }
    ts.emplace_back([this, lib_writers, &errors, &finished] {
      errors[lib_writers] = mount_writer(lib_writers);
      ++finished;
    });
    const size_t total = static_cast<size_t>(kWriters) * kFileBytes;
    Status killed;
    size_t at_kill = 0;
    for (size_t k = 0; k < victims.size(); ++k) {
      const size_t when = total * (k + 1) / (victims.size() + 1);
      while (written_.load() < when && finished.load() < kWriters) {
        std::this_thread::sleep_for(5ms);
      }
      Status st = cluster_->kill_ods(victims[k]);
      if (killed.ok()) killed = st;
      at_kill = written_.load();
      std::printf("killed data server %d with %zu of %zu MiB written\n", victims[k],
                  at_kill >> 20, total >> 20);
    }
    for (auto& t : ts) t.join();
    stop_reading = true;
    read_thread.join();
    EXPECT_EQ(read_error, "") << "the reader of a file written before the kill";
    ASSERT_TRUE(killed.ok()) << killed.ToString();
    // Otherwise this tested nothing: make the files larger.
    ASSERT_LT(at_kill, total) << "every writer had finished before the (last) kill";
    for (int i = 0; i < kWriters; ++i) EXPECT_EQ(errors[i], "") << "writer " << i;
    // The victim is still down: new files are placed on chains without it.
    auto cl = cluster_->connect(kIoTimeoutMs);
    ASSERT_TRUE(cl.ok()) << cl.status().ToString();
    for (int i = 0; i < 8; ++i) {
      const std::string path = "/r/new" + std::to_string(i);
      const std::string data = random_bytes(3 * kBlock + 5, 2000 + static_cast<uint64_t>(i));
      auto f = (*cl)->open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
      ASSERT_TRUE(f.ok()) << path << ": " << f.status().ToString();
      auto w = (*cl)->pwrite(**f, data.data(), data.size(), 0);
      ASSERT_TRUE(w.ok()) << path << ": " << w.status().ToString();
      ASSERT_TRUE((*cl)->close(*f).ok()) << path;
      new_files_.emplace_back(path, data);
    }
  }

  // Reads every file back through a fresh client (the victim still down):
  // the bytes are those written.
  void verify_all() {
    auto cl = cluster_->connect(kIoTimeoutMs);
    ASSERT_TRUE(cl.ok()) << cl.status().ToString();
    auto check = [&](const std::string& path, const std::string& want) {
      auto f = (*cl)->open(path, O_RDONLY);
      ASSERT_TRUE(f.ok()) << path << ": " << f.status().ToString();
      std::string got(want.size() + 1, '\0');
      size_t done = 0;
      while (done < got.size()) {
        auto n = (*cl)->pread(**f, got.data() + done, got.size() - done, done);
        ASSERT_TRUE(n.ok()) << path << " at " << done << ": " << n.status().ToString();
        if (*n == 0) break;
        done += *n;
      }
      got.resize(done);
      EXPECT_EQ(got.size(), want.size()) << path;
      EXPECT_TRUE(got == want) << path << ": the bytes read back differ from those written";
      (void)(*cl)->close(*f);
    };
    for (int i = 0; i <= lib_writers_; ++i) check("/r/w" + std::to_string(i), data_of(i));
    for (const auto& [path, data] : new_files_) check(path, data);
  }

  // The victim comes back: the MDS makes it SYNCING in its chains, the
  // resync sources bring it up to date and it serves again, so every chain
  // is healthy; then `surgectl scrub` finds every chunk identical on every
  // member (version, size, CRC32C of the bytes): resync left nothing
  // behind.
  void restart_and_scrub(int victim) { restart_and_scrub(std::vector<int>{victim}); }
  void restart_and_scrub(const std::vector<int>& victims) {
    Status st;
    for (int v : victims) {
      st = cluster_->start_ods(v);
      ASSERT_TRUE(st.ok()) << st.ToString();
    }
    const int victim = victims.front();
    st = cluster_->wait_targets_up(3, 30000 * kSlow);
    ASSERT_TRUE(st.ok()) << st.ToString();
    const std::string settled =
        "\"degraded\":0,\"resyncing\":0,\"rebuilding\":0,\"unavailable\":0}";
    std::string out;
    // A wait for convergence, not a timed assertion: the bound only keeps a
    // resync that never ends from hanging the test.
    const auto give_up = std::chrono::steady_clock::now() + 120s * kSlow;
    for (;;) {
      ASSERT_EQ(surgectl("--json status", &out), 0) << out;
      if (out.find(settled) != std::string::npos) break;
      ASSERT_LT(std::chrono::steady_clock::now(), give_up)
          << "the chains never became healthy after data server " << victim
          << " came back: " << out;
      std::this_thread::sleep_for(200ms);
    }
    EXPECT_EQ(surgectl("scrub", &out), 0) << out;
    EXPECT_NE(out.find("0 corrupt blocks, 0 not scrubbed"), std::string::npos) << out;
    EXPECT_NE(out.find(" 0 replicas differ, 0 chains not compared"), std::string::npos) << out;
    EXPECT_EQ(out.find(" 0 chunks compared"), std::string::npos) << out;
    const size_t summary = out.rfind("scrub: ");
    std::printf("after the resync, %s", out.substr(summary).c_str());
    // Chain forwarding and the resync went over the cluster's transport:
    // no data server made a call of its own over the other one.
    const std::string t = cluster_transport(*cluster_);
    const std::string other = t == "rdma" ? "tcp" : "rdma";
    for (int i = 0; i < 3; ++i) {
      const std::string page = ods_metrics_page(*cluster_, i);
      EXPECT_NE(page, "") << "data server " << i << " serves no metrics page";
      EXPECT_GT(series_value(page, "surge_net_calls_total{transport=\"" + t + "\",side=\"client\"}"), 0)
          << "data server " << i << ":\n" << page;
      EXPECT_EQ(series_value(page, "surge_net_calls_total{transport=\"" + other + "\",side=\"client\"}"), 0)
          << "data server " << i << " made calls over " << other << " in a " << t << " cluster:\n"
          << page;
    }
  }

  // Longer in a sanitized build (several times slower under load, where a
  // retry round after the kill can outlast 8 s): a timeout still means a
  // stall, not the instrumentation.
  static constexpr int kIoTimeoutMs = sanitizer_scaled(8000);
  std::unique_ptr<LocalCluster> cluster_;
  std::string mnt_;
  int lib_writers_ = 0;
  bool precreated_ = false;  // /r/w0 exists before its writer opens it
  std::atomic<size_t> written_{0};
  std::vector<std::pair<std::string, std::string>> new_files_;
};

TEST_F(ChainFailover, TwoReplicasSurviveAKilledTargetMidWrite) {
  start(2);
  if (HasFatalFailure()) return;
  write_while_killing(0, 3);
  if (HasFatalFailure()) return;
  verify_all();
  if (HasFatalFailure()) return;
  restart_and_scrub(0);
}

// replicas 3 over 3 targets: two of them SIGKILLed one after another while
// every writer runs; the chains carry on with one member, then both come
// back and are resynced.
TEST_F(ChainFailover, ThreeReplicasSurviveTwoTargetsKilledOneAfterAnother) {
  start(3);
  if (HasFatalFailure()) return;
  write_while_killing(std::vector<int>{0, 1}, 3);
  if (HasFatalFailure()) return;
  verify_all();
  if (HasFatalFailure()) return;
  restart_and_scrub(std::vector<int>{0, 1});
}

// replicas 3, one slot per file, so a file has one chain: the data server
// at one place of the chain of /r/w0 (head, middle or tail) is SIGKILLed
// under its writer (and the others, on any chain).
class ChainMemberKill : public ChainFailover, public ::testing::WithParamInterface<int> {
 protected:
  // The ODS index of member `pos` of the chain of /r/w0 (created here).
  int member_of_first_file(int pos) {
    auto cl = cluster_->connect(kIoTimeoutMs);
    EXPECT_TRUE(cl.ok()) << cl.status().ToString();
    if (!cl.ok()) return -1;
    auto f = (*cl)->open("/r/w0", O_RDWR | O_CREAT | O_EXCL, 0644);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    if (!f.ok()) return -1;
    (void)(*cl)->close(*f);
    std::string out;
    EXPECT_EQ(surgectl("getstripe /r/w0", &out), 0) << out;
    // "  slot 0: chain C version V healthy: T1 serving, T2 serving, T3 serving"
    const size_t slot = out.find("slot 0: chain ");
    const size_t colon = slot == std::string::npos ? slot : out.find(": ", slot + 7);
    EXPECT_NE(colon, std::string::npos) << out;
    if (colon == std::string::npos) return -1;
    std::vector<uint32_t> members;
    for (size_t at = colon + 2; at < out.size() && out[at] != '\n';) {
      members.push_back(static_cast<uint32_t>(std::strtoul(out.c_str() + at, nullptr, 10)));
      const size_t next = out.find(", ", at);
      if (next == std::string::npos || next > out.find('\n', at)) break;
      at = next + 2;
    }
    EXPECT_EQ(members.size(), 3u) << out;
    if (members.size() != 3) return -1;
    auto cs = (*cl)->cluster_status();
    EXPECT_TRUE(cs.ok()) << cs.status().ToString();
    if (!cs.ok()) return -1;
    for (const auto& t : cs->targets) {
      if (t.id != members[static_cast<size_t>(pos)]) continue;
      for (int i = 0; i < 3; ++i) {
        if (t.address == cluster_->ods_address(i)) return i;
      }
    }
    ADD_FAILURE() << "no data server has target " << members[static_cast<size_t>(pos)] << ": " << out;
    return -1;
  }
};

TEST_P(ChainMemberKill, EveryWriteAndByteSurvivesTheKilledMember) {
  start(3, 1);
  if (HasFatalFailure()) return;
  const int victim = member_of_first_file(GetParam());
  ASSERT_GE(victim, 0);
  std::printf("member %d of the chain of /r/w0 is data server %d\n", GetParam(), victim);
  precreated_ = true;
  write_while_killing(victim, 3);
  if (HasFatalFailure()) return;
  verify_all();
  if (HasFatalFailure()) return;
  restart_and_scrub(victim);
}

INSTANTIATE_TEST_SUITE_P(HeadMiddleTail, ChainMemberKill, ::testing::Values(0, 1, 2),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return std::string(p.param == 0 ? "Head" : p.param == 1 ? "Middle" : "Tail");
                         });

TEST_F(ChainFailover, OneReplicaGivesEioNamingTheChunkTargetAndAddress) {
  start(1);
  if (HasFatalFailure()) return;
  auto cl = cluster_->connect(2000);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  auto f = (*cl)->open("/r/one", O_RDWR | O_CREAT, 0644);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const std::string data = random_bytes(3 * kBlock, 7);  // a chunk on every target
  ASSERT_TRUE((*cl)->pwrite(**f, data.data(), data.size(), 0).ok());
  Status synced = (*cl)->fsync(**f, false);
  ASSERT_TRUE(synced.ok()) << synced.ToString();
  ASSERT_TRUE(cluster_->kill_ods(2).ok());
  auto w = (*cl)->pwrite(**f, data.data(), data.size(), 0);
  Status st = w.ok() ? (*cl)->fsync(**f, false) : w.status();
  ASSERT_FALSE(st.ok()) << "a write to a chunk whose only copy is on a dead server succeeded";
  EXPECT_EQ(st.to_errno(), EIO) << st.ToString();
  EXPECT_NE(st.message().find("chunk " + std::to_string((*f)->ino()) + "/"), std::string::npos)
      << st.ToString();
  EXPECT_NE(st.message().find("data server target "), std::string::npos) << st.ToString();
  // The address the dead server listened on (tcp:// or, in the Soft-RoCE
  // VM, rdma://).
  EXPECT_NE(st.message().find(" at " + cluster_->ods_address(2)), std::string::npos)
      << st.ToString();
  (void)(*cl)->close(*f);
}

}  // namespace
}  // namespace surge::test
