// IoAdmission: all units at once, bounded waits, first come first served
// among connections within their share, and a connection over its share
// waiting while the others are served.
#include "ods/service/io_admission.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace surge::ods {
namespace {

using namespace std::chrono_literals;

TEST(IoAdmission, ALaterSmallRequestDoesNotOvertakeAnEarlierBigOne) {
  IoAdmission adm(3);
  auto a = adm.acquire(1, 2, 1s);
  ASSERT_TRUE(a.ok());
  // B holds its grant until C has looked: then C, granted second, must see
  // B's two units in use next to its own (were C first, it would see one).
  std::atomic<bool> c_looked{false};
  std::thread big([&] {
    auto g = adm.acquire(2, 2, 10s);
    ASSERT_TRUE(g.ok());
    while (!c_looked.load()) std::this_thread::sleep_for(1ms);
  });
  while (adm.waiting() < 1) std::this_thread::sleep_for(1ms);
  size_t in_use_when_c_got_in = 0;
  std::thread small([&] {
    auto g = adm.acquire(3, 1, 10s);  // one unit is free, but B came first
    EXPECT_TRUE(g.ok());
    in_use_when_c_got_in = adm.in_use();
    c_looked.store(true);
  });
  while (adm.waiting() < 2) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(adm.in_use(), 2u);
  a->release();
  big.join();
  small.join();
  EXPECT_EQ(in_use_when_c_got_in, 3u) << "C was let in before B";
  EXPECT_EQ(adm.in_use(), 0u);
}

TEST(IoAdmission, WaitsAreBoundedAndOversizedRequestsRefused) {
  IoAdmission adm(2);
  auto a = adm.acquire(1, 2, 1s);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(adm.acquire(2, 1, 20ms).status().code(), Code::kTimedOut);
  EXPECT_EQ(adm.waiting(), 0u) << "a timed-out waiter leaves the queue";
  EXPECT_EQ(adm.held_by(2), 0u);
  EXPECT_EQ(adm.acquire(2, 3, 20ms).status().code(), Code::kInvalidArgument);
}

TEST(IoAdmission, NeverGrantsMoreThanTheCapacity) {
  IoAdmission adm(4);
  std::atomic<int> held{0}, peak{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        size_t units = 1 + static_cast<size_t>((t + i) % 3);
        auto g = adm.acquire(static_cast<uint64_t>(t % 3), units, 10s);
        ASSERT_TRUE(g.ok());
        int now = held.fetch_add(static_cast<int>(units)) + static_cast<int>(units);
        int p = peak.load();
        while (now > p && !peak.compare_exchange_weak(p, now)) {
        }
        held.fetch_sub(static_cast<int>(units));
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_LE(peak.load(), 4);
}

TEST(IoAdmission, AConnectionOverItsShareWaitsWhileAnotherIsServed) {
  IoAdmission adm(4);
  // Connection 1 holds everything and asks for more (X); connection 2 asks
  // after it (Y). With two connections busy the share is 2: X is over it,
  // so the first unit given back goes to Y, though X came first.
  std::vector<IoAdmission::Grant> mine;
  for (int i = 0; i < 4; ++i) {
    auto g = adm.acquire(1, 1, 1s);
    ASSERT_TRUE(g.ok());
    mine.push_back(std::move(*g));
  }
  std::atomic<bool> x_in{false}, y_in{false};
  IoAdmission::Grant x_grant, y_grant;
  std::thread x([&] {
    auto g = adm.acquire(1, 1, 10s);
    ASSERT_TRUE(g.ok());
    x_grant = std::move(*g);
    x_in = true;
  });
  while (adm.waiting() < 1) std::this_thread::sleep_for(1ms);
  std::thread y([&] {
    auto g = adm.acquire(2, 1, 10s);
    ASSERT_TRUE(g.ok());
    y_grant = std::move(*g);
    y_in = true;
  });
  while (adm.waiting() < 2) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(adm.share(), 2u);
  mine.pop_back();  // one unit back
  y.join();
  EXPECT_TRUE(y_in.load());
  EXPECT_FALSE(x_in.load()) << "the connection over its share went first";
  EXPECT_EQ(adm.held_by(2), 1u);
  EXPECT_EQ(adm.waiting(), 1u);
  // Nobody within a share waits now: X goes with the next unit.
  mine.pop_back();
  x.join();
  EXPECT_TRUE(x_in.load());
  EXPECT_EQ(adm.held_by(1), 3u);
}

TEST(IoAdmission, TheShareFollowsTheBusyConnectionsAndNeverDropsBelowOneLargestRequest) {
  IoAdmission adm(32, 8);
  EXPECT_EQ(adm.share(), 32u);
  std::vector<IoAdmission::Grant> held;
  for (uint64_t c = 1; c <= 2; ++c) {
    auto g = adm.acquire(c, 1, 1s);
    ASSERT_TRUE(g.ok());
    held.push_back(std::move(*g));
  }
  EXPECT_EQ(adm.share(), 16u);
  for (uint64_t c = 3; c <= 6; ++c) {
    auto g = adm.acquire(c, 1, 1s);
    ASSERT_TRUE(g.ok());
    held.push_back(std::move(*g));
  }
  EXPECT_EQ(adm.share(), 8u) << "32 / 6 is below one largest request (8)";
  held.clear();
  EXPECT_EQ(adm.share(), 32u) << "connections that hold nothing no longer count";
  EXPECT_EQ(adm.held_by(1), 0u);
}

TEST(IoAdmission, ALargestRequestOfAFreshConnectionGetsInPastAGreedyOne) {
  // Connection 1 has taken 6 of 8 units one at a time and wants more,
  // queued first; connection 2 then asks for a largest request (4). Each
  // unit connection 1 gives back goes to connection 2 until it has its 4.
  IoAdmission adm(8, 4);
  std::vector<IoAdmission::Grant> greedy;
  for (int i = 0; i < 6; ++i) {
    auto g = adm.acquire(1, 1, 1s);
    ASSERT_TRUE(g.ok());
    greedy.push_back(std::move(*g));
  }
  std::vector<std::thread> more;
  std::atomic<int> greedy_got{0};
  IoAdmission::Grant more_grants[3];
  for (int i = 0; i < 3; ++i) {
    more.emplace_back([&, i] {
      auto g = adm.acquire(1, 1, 10s);
      ASSERT_TRUE(g.ok());
      more_grants[i] = std::move(*g);
      greedy_got++;
    });
  }
  // Two of the three fit in the 2 free units at once (one connection busy:
  // its share is everything); the third waits.
  while (adm.waiting() < 1 || greedy_got.load() < 2) std::this_thread::sleep_for(1ms);
  std::atomic<bool> fresh_in{false};
  std::thread fresh([&] {
    auto g = adm.acquire(2, 4, 10s);
    ASSERT_TRUE(g.ok());
    fresh_in = true;
  });
  while (adm.waiting() < 2) std::this_thread::sleep_for(1ms);
  for (int i = 0; i < 4; ++i) greedy.pop_back();
  fresh.join();
  EXPECT_TRUE(fresh_in.load());
  greedy.clear();
  for (auto& t : more) t.join();
  EXPECT_EQ(greedy_got.load(), 3);
  for (auto& g : more_grants) g.release();
  EXPECT_EQ(adm.in_use(), 0u);
}

}  // namespace
}  // namespace surge::ods
