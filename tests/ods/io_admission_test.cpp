// IoAdmission: first come first served, all units at once, bounded waits.
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
  auto a = adm.acquire(2, 1s);
  ASSERT_TRUE(a.ok());
  // B holds its grant until C has looked: then C, granted second, must see
  // B's two units in use next to its own (were C first, it would see one).
  std::atomic<bool> c_looked{false};
  std::thread big([&] {
    auto g = adm.acquire(2, 10s);
    ASSERT_TRUE(g.ok());
    while (!c_looked.load()) std::this_thread::sleep_for(1ms);
  });
  while (adm.waiting() < 1) std::this_thread::sleep_for(1ms);
  size_t in_use_when_c_got_in = 0;
  std::thread small([&] {
    auto g = adm.acquire(1, 10s);  // one unit is free, but B came first
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
  auto a = adm.acquire(2, 1s);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(adm.acquire(1, 20ms).status().code(), Code::kTimedOut);
  EXPECT_EQ(adm.waiting(), 0u) << "a timed-out waiter leaves the queue";
  EXPECT_EQ(adm.acquire(3, 20ms).status().code(), Code::kInvalidArgument);
}

TEST(IoAdmission, NeverGrantsMoreThanTheCapacity) {
  IoAdmission adm(4);
  std::atomic<int> held{0}, peak{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        size_t units = 1 + static_cast<size_t>((t + i) % 3);
        auto g = adm.acquire(units, 10s);
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

}  // namespace
}  // namespace surge::ods
