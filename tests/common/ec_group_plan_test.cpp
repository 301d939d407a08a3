// plan_group_writes (common/ec/group_plan.h): whole and partial groups at
// every boundary, the chunk ranges of each touched position, and, over
// random ranges, pieces that cover the range exactly once with `full`
// set exactly for the groups inside it.
#include "common/ec/group_plan.h"

#include <gtest/gtest.h>

#include <random>

namespace surge::ec {
namespace {

FileLayout erasure(uint64_t unit, std::vector<uint32_t> chains, uint32_t k, uint32_t m) {
  FileLayout l;
  l.format = FileLayout::kFormatChains;
  l.scheme = Redundancy::kErasure;
  l.stripe_size = unit;
  l.stripe_count = static_cast<uint32_t>(chains.size());
  l.ec_data = k;
  l.ec_parity = m;
  l.chains = std::move(chains);
  return l;
}

// A partial group that writes one unit: its position and chunk range, and
// the parity range, which is that same chunk range.
void expect_one_unit(const GroupWrite& w, uint32_t position, uint64_t chunk_offset,
                     uint64_t length) {
  EXPECT_FALSE(w.full) << "group " << w.group;
  ASSERT_EQ(w.units.size(), 1u) << "group " << w.group;
  EXPECT_EQ(w.units[0].position, position) << "group " << w.group;
  EXPECT_EQ(w.units[0].chunk_offset, chunk_offset) << "group " << w.group;
  EXPECT_EQ(w.units[0].length, length) << "group " << w.group;
  EXPECT_EQ(w.parity_chunk_offset, chunk_offset) << "group " << w.group;
  EXPECT_EQ(w.parity_length, length) << "group " << w.group;
}

TEST(GroupPlan, AWholeGroupIsFullWithEveryUnit) {
  auto w = plan_group_writes(erasure(16, {6, 7}, 4, 2), 64, 64);  // group 1
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].group, 1u);
  EXPECT_EQ(w[0].slot, 1u);
  EXPECT_EQ(w[0].chunk_offset, 0u);
  EXPECT_EQ(w[0].file_offset, 64u);
  EXPECT_TRUE(w[0].full);
  ASSERT_EQ(w[0].units.size(), 4u);
  for (uint32_t p = 0; p < 4; ++p) {
    EXPECT_EQ(w[0].units[p].position, p);
    EXPECT_EQ(w[0].units[p].chunk_offset, 0u);
    EXPECT_EQ(w[0].units[p].file_offset, 64u + 16 * p);
    EXPECT_EQ(w[0].units[p].length, 16u);
  }
  EXPECT_EQ(w[0].parity_chunk_offset, 0u);
  EXPECT_EQ(w[0].parity_length, 16u);
}

TEST(GroupPlan, ARangeOverThreeGroupsIsPartialFullPartial) {
  // 4+2, unit 16, two slots: group bytes 64. [60, 140) takes the last 4
  // bytes of group 0 (its position 3), all of group 1, and the first 12 of
  // group 2 (slot 0 again, the second unit of its chunks).
  auto w = plan_group_writes(erasure(16, {6, 7}, 4, 2), 60, 80);
  ASSERT_EQ(w.size(), 3u);
  ASSERT_NO_FATAL_FAILURE(expect_one_unit(w[0], 3, 12, 4));
  EXPECT_TRUE(w[1].full);
  EXPECT_EQ(w[1].slot, 1u);
  EXPECT_EQ(w[2].group, 2u);
  EXPECT_EQ(w[2].slot, 0u);
  EXPECT_EQ(w[2].chunk_offset, 16u);
  ASSERT_NO_FATAL_FAILURE(expect_one_unit(w[2], 0, 16, 12));
}

// IOR hard: a 47,008-byte write across a unit boundary of 4+2 with 1 MiB
// units touches two positions; the parity it changes spans the union.
TEST(GroupPlan, AWriteAcrossAUnitBoundaryTouchesTwoPositions) {
  const uint64_t mib = 1 << 20;
  auto w = plan_group_writes(erasure(mib, {1, 2, 3}, 4, 2), mib - 100, 47008);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_FALSE(w[0].full);
  ASSERT_EQ(w[0].units.size(), 2u);
  EXPECT_EQ(w[0].units[0].position, 0u);
  EXPECT_EQ(w[0].units[0].chunk_offset, mib - 100);
  EXPECT_EQ(w[0].units[0].length, 100u);
  EXPECT_EQ(w[0].units[1].position, 1u);
  EXPECT_EQ(w[0].units[1].chunk_offset, 0u);
  EXPECT_EQ(w[0].units[1].length, 46908u);
  EXPECT_EQ(w[0].parity_chunk_offset, 0u);
  EXPECT_EQ(w[0].parity_length, mib);
}

TEST(GroupPlan, NothingForEmptyRangesOrLayoutsThatAreNotEc) {
  EXPECT_TRUE(plan_group_writes(erasure(16, {6}, 2, 1), 10, 0).empty());
  FileLayout replicated = erasure(16, {6}, 2, 1);
  replicated.scheme = Redundancy::kReplicas;
  EXPECT_TRUE(plan_group_writes(replicated, 0, 100).empty());
}

TEST(GroupPlan, RandomRangesAreCoveredOnceAndFullExactlyInside) {
  std::mt19937_64 rng(7);
  for (const FileLayout& l : {erasure(8, {1, 2, 3}, 3, 2), erasure(16, {4}, 2, 1),
                              erasure(4, {5, 6}, 4, 2)}) {
    const uint64_t gb = l.stripe_size * l.ec_data;
    for (int i = 0; i < 2000; ++i) {
      const uint64_t off = rng() % (gb * 7), len = 1 + rng() % (gb * 4);
      uint64_t next = off;
      for (const GroupWrite& w : plan_group_writes(l, off, len)) {
        EXPECT_EQ(w.slot, w.group % l.stripe_count);
        EXPECT_EQ(w.full, w.file_offset >= off && w.file_offset + gb <= off + len)
            << "group " << w.group << " of [" << off << ", +" << len << ")";
        for (const UnitRange& r : w.units) {
          ASSERT_EQ(r.file_offset, next) << "[" << off << ", +" << len << ")";
          EXPECT_EQ(r.file_offset / gb, w.group);
          EXPECT_EQ((r.file_offset % gb) / l.stripe_size, r.position);
          EXPECT_EQ(r.chunk_offset, w.chunk_offset + r.file_offset % l.stripe_size);
          EXPECT_GE(r.chunk_offset, w.parity_chunk_offset);
          EXPECT_LE(r.chunk_offset + r.length, w.parity_chunk_offset + w.parity_length);
          next += r.length;
        }
      }
      EXPECT_EQ(next, off + len);
    }
  }
}

}  // namespace
}  // namespace surge::ec
