// Drain of a data server under load (docs/redundancy.md, "Replacement,
// rebuild, drain, rebalance"), with real daemons: 1 MDS and 4 data servers
// on 127.0.0.1, files of replicas 2 over 4 slots. While two libsurge
// clients write new files and another reads the files written before,
// `surgectl drain ID --wait` marks a target draining; in each of its chains
// the MDS adds another target, which is synced and then takes its place.
// No IO fails, the wait ends with the target in no chain, every byte reads
// back, scrub finds the replicas identical, and with the drained target
// then killed every byte still reads back (it held nothing needed).
#include <fcntl.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
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
constexpr size_t kFileBytes = 6 * kBlock + 777;
constexpr int kIoTimeoutMs = 8000;

class ChainDrain : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterConfig cfg;
    cfg.ods_count = 4;
    cfg.client_io_timeout_ms = "8000";
    auto c = LocalCluster::Start(cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    ASSERT_EQ(make_replicated_dir(*cluster_, "/r", 2, 4, kIoTimeoutMs), "");
  }

  // Writes path with data in 1 MiB pwrites, fsync, close; "" or the error.
  std::string write_one(Client& cl, const std::string& path, const std::string& data) {
    auto f = cl.open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
    if (!f.ok()) return path + ": " + f.status().ToString();
    for (size_t off = 0; off < data.size(); off += kBlock) {
      const size_t n = std::min(kBlock, data.size() - off);
      auto w = cl.pwrite(**f, data.data() + off, n, off);
      if (!w.ok()) return path + " at " + std::to_string(off) + ": " + w.status().ToString();
    }
    Status st = cl.fsync(**f, false);
    if (!st.ok()) return path + " fsync: " + st.ToString();
    st = cl.close(*f);
    return st.ok() ? "" : path + " close: " + st.ToString();
  }

  // Reads path whole; "" when the bytes are want.
  std::string check_one(Client& cl, const std::string& path, const std::string& want) {
    auto f = cl.open(path, O_RDONLY);
    if (!f.ok()) return path + ": " + f.status().ToString();
    std::string got(want.size() + 1, '\0');
    size_t done = 0;
    std::string err;
    while (done < got.size()) {
      auto n = cl.pread(**f, got.data() + done, got.size() - done, done);
      if (!n.ok()) {
        err = path + " at " + std::to_string(done) + ": " + n.status().ToString();
        break;
      }
      if (*n == 0) break;
      done += *n;
    }
    (void)cl.close(*f);
    if (!err.empty()) return err;
    got.resize(done);
    if (got != want) {
      return path + ": the bytes read back differ (" + std::to_string(got.size()) + " of " +
             std::to_string(want.size()) + " bytes)";
    }
    return "";
  }

  void add_file(const std::string& path, std::string data) {
    std::lock_guard lk(mu_);
    files_.emplace_back(path, std::move(data));
  }

  void verify_all(const std::string& when) {
    auto cl = cluster_->connect(kIoTimeoutMs);
    ASSERT_TRUE(cl.ok()) << cl.status().ToString();
    for (const auto& [path, data] : files_) EXPECT_EQ(check_one(**cl, path, data), "") << when;
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::mutex mu_;
  std::vector<std::pair<std::string, std::string>> files_;
};

TEST_F(ChainDrain, DrainUnderReadsAndWritesMovesEveryChainOffTheTarget) {
  {
    auto cl = cluster_->connect(kIoTimeoutMs);
    ASSERT_TRUE(cl.ok()) << cl.status().ToString();
    for (int i = 0; i < 4; ++i) {
      const std::string path = "/r/pre" + std::to_string(i);
      std::string data = random_bytes(kFileBytes, 100 + static_cast<uint64_t>(i));
      ASSERT_EQ(write_one(**cl, path, data), "");
      add_file(path, std::move(data));
    }
  }
  const std::vector<std::pair<std::string, std::string>> pre = files_;
  const uint32_t victim = target_id_of(*cluster_, 2);
  ASSERT_NE(victim, 0u) << "no target id for data server 2";
  std::string out;
  ASSERT_EQ(run_surgectl(*cluster_, "--json chains", &out), 0) << out;
  ASSERT_GT(memberships(parse_chains(out))[victim], 1);

  std::atomic<bool> stop{false};
  std::atomic<int> written{0}, reads{0};
  std::vector<std::string> errors(3);
  std::vector<std::thread> io;
  for (int w = 0; w < 2; ++w) {
    io.emplace_back([&, w] {
      auto cl = cluster_->connect(kIoTimeoutMs);
      if (!cl.ok()) {
        errors[w] = cl.status().ToString();
        return;
      }
      for (int k = 0; !stop.load() && errors[w].empty(); ++k) {
        const std::string path = "/r/w" + std::to_string(w) + "-" + std::to_string(k);
        std::string data = random_bytes(kFileBytes, 1000 + 100 * static_cast<uint64_t>(w) + k);
        errors[w] = write_one(**cl, path, data);
        if (errors[w].empty()) {
          add_file(path, std::move(data));
          ++written;
        }
      }
    });
  }
  io.emplace_back([&] {
    auto cl = cluster_->connect(kIoTimeoutMs);
    if (!cl.ok()) {
      errors[2] = cl.status().ToString();
      return;
    }
    while (!stop.load() && errors[2].empty()) {
      for (const auto& [path, data] : pre) {
        errors[2] = check_one(**cl, path, data);
        if (!errors[2].empty()) break;
        ++reads;
      }
    }
  });
  while (written.load() < 2) std::this_thread::sleep_for(10ms);  // IO under way first
  const int rc = run_surgectl(*cluster_, "drain " + std::to_string(victim) + " --wait", &out);
  const int written_during = written.load();
  stop = true;
  for (auto& t : io) t.join();
  ASSERT_EQ(rc, 0) << out;
  std::printf("%s", out.c_str());
  EXPECT_NE(out.find("holds no chunk of any chain: drained"), std::string::npos) << out;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(errors[i], "") << "IO thread " << i;
  std::printf("%d files written and %d files read while draining\n", written_during,
              reads.load());

  ASSERT_EQ(run_surgectl(*cluster_, "--json chains", &out), 0) << out;
  const auto chains = parse_chains(out);
  for (const auto& c : chains) {
    EXPECT_FALSE(c.has(victim)) << "chain " << c.id << " still lists target " << victim;
    EXPECT_EQ(c.serving(), 2) << "chain " << c.id;
  }
  ASSERT_EQ(run_surgectl(*cluster_, "--json targets", &out), 0) << out;
  EXPECT_NE(out.find("\"id\":" + std::to_string(victim) + ","), std::string::npos) << out;
  EXPECT_NE(out.find("\"chains\":0,\"drained\":true"), std::string::npos) << out;

  verify_all("after the drain");
  EXPECT_EQ(run_surgectl(*cluster_, "scrub", &out), 0) << out;
  EXPECT_NE(out.find(" 0 replicas differ, 0 chains not compared"), std::string::npos) << out;
  // The drained target held nothing the files need.
  ASSERT_TRUE(cluster_->kill_ods(2).ok());
  verify_all("with the drained target killed");
}

}  // namespace
}  // namespace surge::test
