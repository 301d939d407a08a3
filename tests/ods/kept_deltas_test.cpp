// KeptDeltas: what a data position keeps of its parity deltas, and the
// counts its limits are checked against.
#include "ods/ec/kept_deltas.h"

#include <gtest/gtest.h>

namespace surge::ods {
namespace {

const ChunkKey kA{7, 0, 1};
const ChunkKey kB{8, 0, 1};

KeptDelta delta(uint64_t v, uint64_t length, bool held,
                std::chrono::steady_clock::time_point since = {}) {
  KeptDelta d;
  d.version = v;
  d.length = length;
  d.delta.reset(new std::byte[length]);
  for (uint64_t i = 0; i < length; ++i) d.delta[i] = std::byte(v);
  d.held = held;
  d.since = since;
  d.ref.set_ino(v);
  return d;
}

TEST(KeptDeltas, TakeReturnsTheVersionAndDropsOlderOnes) {
  KeptDeltas k(16);
  ASSERT_TRUE(k.put(kA, delta(3, 10, false)));
  ASSERT_TRUE(k.put(kA, delta(4, 20, true)));
  ASSERT_TRUE(k.put(kA, delta(5, 30, true)));
  KeptDelta got = k.take(kA, 4);
  ASSERT_NE(got.delta, nullptr);
  EXPECT_EQ(got.version, 4u);
  EXPECT_EQ(got.delta[0], std::byte(4));
  EXPECT_EQ(k.take(kA, 3).delta, nullptr);  // dropped with 4
  EXPECT_EQ(k.held_bytes(), 30u);           // only 5 is left
  EXPECT_EQ(k.take(kA, 5).version, 5u);
  EXPECT_EQ(k.held_bytes(), 0u);
}

TEST(KeptDeltas, HeldBytesFollowPutsReplacementsAndErases) {
  KeptDeltas k(16);
  ASSERT_TRUE(k.put(kA, delta(1, 100, true)));
  ASSERT_TRUE(k.put(kB, delta(1, 50, true)));
  EXPECT_EQ(k.held_bytes(), 150u);
  ASSERT_TRUE(k.put(kA, delta(1, 70, true)));  // the same version again
  EXPECT_EQ(k.held_bytes(), 120u);
  ASSERT_TRUE(k.put(kA, delta(1, 70, false)));  // sent and failed: kept, not held
  EXPECT_EQ(k.held_bytes(), 50u);
  k.erase(kB);
  EXPECT_EQ(k.held_bytes(), 0u);
}

TEST(KeptDeltas, FailedDeltasStopAtTheLimitAndHeldOnesDoNot) {
  KeptDeltas k(2);
  EXPECT_TRUE(k.put(kA, delta(1, 1, false)));
  EXPECT_TRUE(k.put(kB, delta(1, 1, false)));
  EXPECT_FALSE(k.put(kA, delta(2, 1, false)));
  EXPECT_TRUE(k.put(kA, delta(1, 1, false)));  // replacing a kept one adds none
  EXPECT_TRUE(k.put(kA, delta(3, 1, true)));
  EXPECT_EQ(k.take(kB, 1).version, 1u);  // room again
  EXPECT_TRUE(k.put(kA, delta(2, 1, false)));
}

TEST(KeptDeltas, AllHeldNeedsEveryVersionHeld) {
  KeptDeltas k(16);
  ASSERT_TRUE(k.put(kA, delta(2, 1, true)));
  ASSERT_TRUE(k.put(kA, delta(3, 1, true)));
  EXPECT_TRUE(k.all_held(kA, 2, 3));
  EXPECT_FALSE(k.all_held(kA, 1, 3));  // 1 is not kept
  ASSERT_TRUE(k.put(kA, delta(4, 1, false)));
  EXPECT_FALSE(k.all_held(kA, 2, 4));  // 4 failed: it is not held
  EXPECT_FALSE(k.all_held(kB, 1, 1));
}

TEST(KeptDeltas, DueNamesEachChunkWithAnOldHoldOnce) {
  KeptDeltas k(16);
  const auto now = std::chrono::steady_clock::now();
  ASSERT_TRUE(k.put(kA, delta(1, 1, true, now - std::chrono::seconds(10))));
  ASSERT_TRUE(k.put(kA, delta(2, 1, true, now - std::chrono::seconds(10))));
  ASSERT_TRUE(k.put(kB, delta(5, 1, true, now)));
  auto due = k.due(now, std::chrono::seconds(3), std::chrono::seconds(1));
  ASSERT_EQ(due.size(), 1u);
  EXPECT_TRUE(due[0].first == kA);
  EXPECT_EQ(due[0].second.ino(), 1u);
}

// A failed delta over the limit leaves a marker (no bytes, not counted):
// the sweeper still finds the chunk, and take() says the delta is lost.
TEST(KeptDeltas, AFailedDeltaOverTheLimitLeavesAMarkerTheSweeperFinds) {
  KeptDeltas k(1);
  const auto now = std::chrono::steady_clock::now();
  ASSERT_TRUE(k.put(kA, delta(1, 1, false, now)));
  EXPECT_FALSE(k.put(kB, delta(4, 1, false, now - std::chrono::seconds(2))));
  auto due = k.due(now, std::chrono::seconds(3), std::chrono::seconds(1));
  ASSERT_EQ(due.size(), 1u);
  EXPECT_TRUE(due[0].first == kB);
  EXPECT_EQ(due[0].second.ino(), 4u);  // the ref it failed under
  KeptDelta got = k.take(kB, 4);
  EXPECT_EQ(got.version, 4u);
  EXPECT_EQ(got.delta, nullptr);
  EXPECT_FALSE(k.put(kB, delta(5, 1, false)));  // kA still fills the one place
}

// A scan's marker never replaces a delta kept or held for the chunk.
TEST(KeptDeltas, AMarkIsKeptOnlyWhenNothingIsKeptForTheChunk) {
  KeptDeltas k(16);
  ASSERT_TRUE(k.put(kA, delta(5, 10, true)));  // held for a commit
  EXPECT_FALSE(k.mark_if_none(kA, delta(5, 1, false)));
  EXPECT_NE(k.take(kA, 5).delta, nullptr);
  EXPECT_TRUE(k.mark_if_none(kB, delta(3, 1, false)));
  KeptDelta got = k.take(kB, 3);
  EXPECT_EQ(got.version, 3u);
  EXPECT_EQ(got.delta, nullptr);
}

// A failed delta is due after the shorter wait: nobody may write the chunk
// again to send it.
TEST(KeptDeltas, DueNamesAFailedDeltaAfterItsOwnWait) {
  KeptDeltas k(16);
  const auto now = std::chrono::steady_clock::now();
  ASSERT_TRUE(k.put(kA, delta(1, 1, false, now - std::chrono::seconds(2))));
  ASSERT_TRUE(k.put(kB, delta(5, 1, false, now)));
  auto due = k.due(now, std::chrono::seconds(3), std::chrono::seconds(1));
  ASSERT_EQ(due.size(), 1u);
  EXPECT_TRUE(due[0].first == kA);
}

}  // namespace
}  // namespace surge::ods
