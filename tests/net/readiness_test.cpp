// ReadinessService (net/tcp/readiness.h): a socket is watched one-shot and
// only while armed; the callback runs on the I/O thread; removal and
// shutdown drop what is pending. On real sockets (a socketpair) and a real
// io_context thread.
#include "net/tcp/readiness.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

namespace surge::net::tcp {
namespace {

using namespace std::chrono_literals;

class ReadinessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds_), 0);
    io_ = std::make_unique<boost::asio::io_context>();
    guard_ = std::make_unique<Guard>(io_->get_executor());
    thread_ = std::thread([this] {
      io_thread_ = std::this_thread::get_id();
      io_->run();
    });
  }
  void TearDown() override {
    guard_.reset();
    io_->stop();
    if (thread_.joinable()) thread_.join();
    io_.reset();
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  // Waits up to 2 s for n to reach want.
  static bool reaches(const std::atomic<int>& n, int want) {
    for (int i = 0; i < 2000 && n.load() < want; ++i) std::this_thread::sleep_for(1ms);
    return n.load() >= want;
  }
  void send_byte() { ASSERT_EQ(::write(fds_[1], "x", 1), 1); }

  using Guard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;
  int fds_[2] = {-1, -1};
  std::unique_ptr<boost::asio::io_context> io_;
  std::unique_ptr<Guard> guard_;
  std::thread thread_;
  std::atomic<std::thread::id> io_thread_{};
};

TEST_F(ReadinessTest, FiresOnceOnTheIoThreadWhenArmedAndReadable) {
  auto& r = ReadinessService::of(*io_);
  const uint64_t key = r.add(fds_[0]);
  std::atomic<int> fired{0};
  std::atomic<bool> on_io_thread{false};
  r.arm(key, [&] {
    on_io_thread = std::this_thread::get_id() == io_thread_.load();
    ++fired;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(fired.load(), 0) << "nothing to read yet";
  send_byte();
  ASSERT_TRUE(reaches(fired, 1));
  EXPECT_TRUE(on_io_thread.load());
  std::this_thread::sleep_for(20ms);
  const uint64_t seen = r.events_seen();
  send_byte();  // not armed: no call, and no wake-up of the I/O thread
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(fired.load(), 1) << "one-shot: a second arrival without arming is not reported";
  EXPECT_EQ(r.events_seen(), seen) << "a socket nobody armed woke the I/O thread";
  r.remove(key);
}

TEST_F(ReadinessTest, ArmingReportsBytesAlreadyQueued) {
  auto& r = ReadinessService::of(*io_);
  const uint64_t key = r.add(fds_[0]);
  send_byte();  // arrives before anyone watches
  std::atomic<int> fired{0};
  r.arm(key, [&] { ++fired; });
  ASSERT_TRUE(reaches(fired, 1));
  r.arm(key, [&] { ++fired; });  // still unread: reported again
  ASSERT_TRUE(reaches(fired, 2));
  r.remove(key);
}

TEST_F(ReadinessTest, HangUpFiresTheWait) {
  auto& r = ReadinessService::of(*io_);
  const uint64_t key = r.add(fds_[0]);
  std::atomic<int> fired{0};
  r.arm(key, [&] { ++fired; });
  ::shutdown(fds_[1], SHUT_RDWR);
  ASSERT_TRUE(reaches(fired, 1));
  r.remove(key);
}

TEST_F(ReadinessTest, RemovedSocketsAreNotReportedAndTheirCallbacksAreDropped) {
  auto& r = ReadinessService::of(*io_);
  const uint64_t key = r.add(fds_[0]);
  std::atomic<int> fired{0};
  auto owned = std::make_shared<int>(7);
  std::weak_ptr<int> watch = owned;
  r.arm(key, [&fired, owned] { ++fired; });
  owned.reset();
  EXPECT_FALSE(watch.expired()) << "an armed callback keeps what it owns alive";
  r.remove(key);
  EXPECT_TRUE(watch.expired()) << "remove() dropped the pending callback";
  send_byte();
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(fired.load(), 0);
}

TEST_F(ReadinessTest, ManySocketsEachFireOnce) {
  auto& r = ReadinessService::of(*io_);
  constexpr int kSockets = 100;  // more than one epoll_wait batch (64)
  int pairs[kSockets][2];
  std::atomic<int> fired{0};
  std::vector<uint64_t> keys;
  for (auto& p : pairs) {
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p), 0);
    keys.push_back(r.add(p[0]));
    r.arm(keys.back(), [&] { ++fired; });
  }
  for (auto& p : pairs) ASSERT_EQ(::write(p[1], "x", 1), 1);
  ASSERT_TRUE(reaches(fired, kSockets));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(fired.load(), kSockets);
  for (size_t i = 0; i < keys.size(); ++i) {
    r.remove(keys[i]);
    ::close(pairs[i][0]);
    ::close(pairs[i][1]);
  }
}

}  // namespace
}  // namespace surge::net::tcp
