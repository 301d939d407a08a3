// Chains of three over three data servers form a cycle: every server is
// the head of one chain and the middle or tail of the others, so a head
// waiting for its successor waits on a server whose own heads wait on it
// (docs/redundancy.md, "Why forwarding cannot deadlock"). Here each data
// server runs 2 worker threads and 12 libsurge writers write at once, far
// more chained writes than workers: every write completes and every byte
// reads back. Before the forward lanes (ods/chain/forward_lanes.h) every
// worker of every server ended up a head waiting on a forward no server
// had a thread left to serve, until the forward's call timeout.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/client/local_cluster.h"
#include "tests/common/time_scale.h"

namespace surge::test {
namespace {

constexpr size_t kBlock = 1 << 20;
constexpr size_t kFileBytes = 16 * kBlock;  // per writer
constexpr int kWriters = 12;
// A deadlock still shows as a call timing out; under TSan at load 24 a
// healthy forward took longer than 8 s, so the bound grows with the
// instrumentation (tests/common/time_scale.h).
constexpr int kIoTimeoutMs = sanitizer_scaled(8000);

std::string data_of(int writer) { return random_bytes(kFileBytes, 500 + static_cast<uint64_t>(writer)); }

TEST(ChainCycle, ThreeReplicasOnThreeServersWithFewWorkersCompleteEveryWrite) {
  ClusterConfig cfg;
  cfg.client_io_timeout_ms = std::to_string(kIoTimeoutMs);
  cfg.ods_worker_threads = 2;
  auto c = LocalCluster::Start(cfg);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto& cluster = *c;
  {
    auto cl = cluster->connect(kIoTimeoutMs);
    ASSERT_TRUE(cl.ok()) << cl.status().ToString();
    ASSERT_TRUE((*cl)->mkdir("/r", 0777).ok());
  }
  const char* b = std::getenv("SURGE_BUILD_DIR");
  ASSERT_NE(b, nullptr) << "SURGE_BUILD_DIR is not set (run through ctest)";
  std::string out;
  ASSERT_EQ(sh(std::string(b) + "/tools/surgectl --mds " + cluster->mds_address() + " --key-file " +
                   cluster->key_file() + " setstripe --replicas 3 --count 3 --size 1048576 /r 2>&1",
               &out),
            0)
      << out;

  // Each writer: its own client, 1 MiB pwrites, fsync, close.
  std::vector<std::string> errors(kWriters);
  std::vector<std::thread> ts;
  for (int i = 0; i < kWriters; ++i) {
    ts.emplace_back([&, i] {
      auto cl = cluster->connect(kIoTimeoutMs);
      if (!cl.ok()) {
        errors[i] = cl.status().ToString();
        return;
      }
      const std::string path = "/r/w" + std::to_string(i);
      auto f = (*cl)->open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
      if (!f.ok()) {
        errors[i] = path + ": " + f.status().ToString();
        return;
      }
      const std::string data = data_of(i);
      for (size_t off = 0; off < data.size(); off += kBlock) {
        auto w = (*cl)->pwrite(**f, data.data() + off, kBlock, off);
        if (!w.ok()) {
          errors[i] = path + " at " + std::to_string(off) + ": " + w.status().ToString();
          return;
        }
      }
      Status st = (*cl)->fsync(**f, false);
      if (st.ok()) st = (*cl)->close(*f);
      if (!st.ok()) errors[i] = path + ": " + st.ToString();
    });
  }
  for (auto& t : ts) t.join();
  for (int i = 0; i < kWriters; ++i) EXPECT_EQ(errors[i], "") << "writer " << i;

  auto cl = cluster->connect(kIoTimeoutMs);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  for (int i = 0; i < kWriters; ++i) {
    const std::string path = "/r/w" + std::to_string(i);
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
    EXPECT_TRUE(got == data_of(i)) << path << ": " << done
                                   << " bytes read back, not the bytes written";
    (void)(*cl)->close(*f);
  }
}

}  // namespace
}  // namespace surge::test
