// The striped data path (client/lib/stripe_io.h) against three real
// surge-ods processes (started without an MDS; the cluster map is built
// here): every boundary, holes and short objects read as zeros, CRC32C both
// ways, pieces larger than the per-request limit, bounded bytes in flight,
// and a dead or stopped data server failing with EIO in bounded time.
#include "client/lib/stripe_io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "net/cluster_key.h"
#include "tests/client/local_cluster.h"
#include "tests/common/time_scale.h"

namespace surge::client {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

using test::free_port;
using test::port_open;

class StripeIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/surge-stripe-io-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    key_file_ = dir_ + "/cluster.key";
    ASSERT_TRUE(net::generate_cluster_key(key_file_).ok());
    auto key = net::load_cluster_key(key_file_);
    ASSERT_TRUE(key.ok());
    key_ = *key;
    for (int i = 0; i < 3; ++i) {
      ports_.push_back(free_port());
      pids_.push_back(-1);
      start(i);
    }
    for (int i = 0; i < 3; ++i) {
      auto* t = map_.add_targets();
      t->set_target_id(static_cast<uint32_t>(10 + i));
      t->set_address("tcp://127.0.0.1:" + std::to_string(ports_[static_cast<size_t>(i)]));
      t->set_state(proto::mds::TARGET_UP);
    }
    map_.set_version(1);
    cache_ = std::make_unique<ClusterMapCache>(
        [this]() -> Result<proto::mds::ClusterMap> { return map_; }, "tcp");
    net::ChannelOptions co;
    co.cluster_key = key_;
    // 1 s (longer in sanitized builds): the stopped-server case waits it out.
    co.connect_timeout = test::sanitizer_scaled(1000ms);
    co.call_timeout = test::sanitizer_scaled(1000ms);
    channels_ = std::make_unique<net::ChannelPool>(co);
    io_ = std::make_unique<StripeIo>(cache_.get(), channels_.get(),
                                     StripeIo::Options{test::sanitizer_scaled(1000ms),
                                                       test::sanitizer_scaled(1000ms), 4u << 20});
    layout_.stripe_size = 64 * 1024;
    layout_.stripe_count = 3;
    layout_.targets = {10, 11, 12};
  }

  void TearDown() override {
    io_.reset();
    channels_.reset();
    for (pid_t& p : pids_) {
      if (p > 0) {
        kill(p, SIGCONT);
        kill(p, SIGKILL);
        waitpid(p, nullptr, 0);
      }
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void start(int i) {
    std::string data = dir_ + "/ods" + std::to_string(i);
    fs::create_directories(data);
    std::string port = std::to_string(ports_[static_cast<size_t>(i)]);
    std::string bin = std::string(std::getenv("SURGE_BUILD_DIR")) + "/ods/surge-ods";
    std::string log = dir_ + "/ods" + std::to_string(i) + ".log";
    pid_t parent = getpid();
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      execl(bin.c_str(), bin.c_str(), "--data-dir", data.c_str(), "--listen",
            ("tcp://127.0.0.1:" + port).c_str(), "--mds", "", "--cluster-key-file",
            key_file_.c_str(), "--pool-1m-buffers", "16", static_cast<char*>(nullptr));
      _exit(127);
    }
    pids_[static_cast<size_t>(i)] = pid;
    for (int t = 0; t < 500; ++t) {
      if (port_open(ports_[static_cast<size_t>(i)])) return;
      int st;
      ASSERT_NE(waitpid(pid, &st, WNOHANG), pid) << "surge-ods exited; see " << log;
      std::this_thread::sleep_for(10ms);
    }
    FAIL() << "surge-ods " << i << " did not listen";
  }

  std::string dir_, key_file_, key_;
  std::vector<int> ports_;
  std::vector<pid_t> pids_;
  proto::mds::ClusterMap map_;
  std::unique_ptr<ClusterMapCache> cache_;
  std::unique_ptr<net::ChannelPool> channels_;
  std::unique_ptr<StripeIo> io_;
  FileLayout layout_;  // format 1: objects keyed by ino on targets 10, 11, 12
};

TEST_F(StripeIoTest, RoundTripsAtEveryBoundary) {
  const uint64_t S = layout_.stripe_size, R = 3 * S;
  uint64_t object = 100;
  for (uint64_t off : {uint64_t{0}, uint64_t{7}, S - 1, S, R, R + S - 3}) {
    for (uint64_t len :
         {uint64_t{1}, S - 1, S, S + 1, R - 1, R, R + 1, 3 * R + 5, uint64_t{(5u << 20) + 3}}) {
      ++object;
      std::string data = test::random_bytes(len, object);
      ASSERT_TRUE(io_->write(object, layout_, data.data(), len, off).ok()) << off << "+" << len;
      std::string back(len, 'Z');
      Status st = io_->read(object, layout_, back.data(), len, off);
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_TRUE(back == data) << "object " << object << " off " << off << " len " << len;
    }
  }
}

TEST_F(StripeIoTest, HolesAndMissingObjectsReadAsZeros) {
  const uint64_t S = layout_.stripe_size;
  // Only stripe 4 (slot 1) is written: slots 0 and 2 have no object at all.
  std::string data = test::random_bytes(100, 1);
  ASSERT_TRUE(io_->write(7, layout_, data.data(), data.size(), 4 * S + 10).ok());
  std::string back(5 * S, 'Z');
  ASSERT_TRUE(io_->read(7, layout_, back.data(), back.size(), 0).ok());
  std::string expect(5 * S, '\0');
  memcpy(&expect[4 * S + 10], data.data(), data.size());
  EXPECT_TRUE(back == expect);
}

TEST_F(StripeIoTest, DeadDataServerFailsFastWithEio) {
  std::string data = test::random_bytes(6 * layout_.stripe_size, 2);
  ASSERT_TRUE(io_->write(9, layout_, data.data(), data.size(), 0).ok());
  kill(pids_[1], SIGKILL);
  waitpid(pids_[1], nullptr, 0);
  pids_[1] = -1;
  auto t0 = std::chrono::steady_clock::now();
  Status w = io_->write(9, layout_, data.data(), data.size(), 0);
  Status r = io_->read(9, layout_, data.data(), data.size(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, test::sanitizer_scaled(10s));
  EXPECT_EQ(w.to_errno(), EIO) << w.ToString();
  EXPECT_EQ(r.to_errno(), EIO) << r.ToString();
  EXPECT_NE(w.message().find("target 11"), std::string::npos) << w.ToString();
  // It comes back on the same address: the next IO finds it.
  start(1);
  Status again = io_->write(9, layout_, data.data(), data.size(), 0);
  EXPECT_TRUE(again.ok()) << again.ToString();
}

TEST_F(StripeIoTest, StoppedDataServerTimesOutWithEio) {
  std::string data = test::random_bytes(3 * layout_.stripe_size, 3);
  ASSERT_TRUE(io_->write(11, layout_, data.data(), data.size(), 0).ok());
  ASSERT_TRUE(test::stop_process(pids_[2]));
  auto t0 = std::chrono::steady_clock::now();
  Status r = io_->read(11, layout_, data.data(), data.size(), 0);
  auto took = std::chrono::steady_clock::now() - t0;
  kill(pids_[2], SIGCONT);
  EXPECT_EQ(r.to_errno(), EIO) << r.ToString();
  EXPECT_LT(took, test::sanitizer_scaled(10s))
      << "io timeout is " << test::sanitizer_scaled(1s).count() << " s";
}

TEST_F(StripeIoTest, ManyConcurrentIosShareTheChannels) {
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&, t] {
      std::string data = test::random_bytes(1 << 20, 50 + t);
      for (int i = 0; i < 5; ++i) {
        uint64_t off = static_cast<uint64_t>(i) * (1 << 20) + 17;
        if (!io_->write(200 + t, layout_, data.data(), data.size(), off).ok()) bad++;
        std::string back(data.size(), '\0');
        if (!io_->read(200 + t, layout_, back.data(), back.size(), off).ok() || back != data) bad++;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace surge::client
