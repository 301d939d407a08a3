#include "common/chunk_map.h"

#include <gtest/gtest.h>

#include <map>
#include <tuple>

namespace surge {
namespace {

FileLayout targets_layout(uint64_t unit, std::vector<uint32_t> targets) {
  FileLayout l;
  l.stripe_size = unit;
  l.stripe_count = static_cast<uint32_t>(targets.size());
  l.targets = std::move(targets);
  return l;
}

FileLayout replicated(uint64_t unit, std::vector<uint32_t> chains, uint32_t replicas) {
  FileLayout l;
  l.format = FileLayout::kFormatChains;
  l.scheme = Redundancy::kReplicas;
  l.replicas = replicas;
  l.stripe_size = unit;
  l.stripe_count = static_cast<uint32_t>(chains.size());
  l.chains = std::move(chains);
  return l;
}

FileLayout erasure(uint64_t unit, std::vector<uint32_t> chains, uint32_t k, uint32_t m) {
  FileLayout l = replicated(unit, std::move(chains), 0);
  l.scheme = Redundancy::kErasure;
  l.ec_data = k;
  l.ec_parity = m;
  return l;
}

// The docs/redundancy.md table, byte by byte.
struct Where {
  uint32_t slot, position;
  uint64_t offset;
};
Where where(const FileLayout& l, uint64_t x) {
  const uint64_t u = l.stripe_size, c = l.stripe_count;
  if (!l.erasure()) return {static_cast<uint32_t>((x / u) % c), 0, (x / u / c) * u + x % u};
  const uint64_t k = l.ec_data, g = x / (k * u);
  return {static_cast<uint32_t>(g % c), static_cast<uint32_t>((x / u) % k), (g / c) * u + x % u};
}

TEST(ChunkMap, FormatOneIsTheOldStripeFormulaOnTargets) {
  FileLayout l = targets_layout(1 << 20, {7, 8, 9});
  auto p = map_range(l, 42, (4ull << 20) + 5, 10);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].chunk, (ChunkId{42, 1, 0}));
  EXPECT_EQ(p[0].target_id, 8u);
  EXPECT_EQ(p[0].chain_id, 0u);
  EXPECT_EQ(p[0].chunk_offset, (1ull << 20) + 5);
}

TEST(ChunkMap, ReplicatedSlotsNameTheirChains) {
  FileLayout l = replicated(4096, {11, 12}, 2);
  auto p = map_range(l, 5, 4000, 200);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].chain_id, 11u);
  EXPECT_EQ(p[0].target_id, 0u);
  EXPECT_EQ(p[0].length, 96u);
  EXPECT_EQ(p[1].chunk, (ChunkId{5, 1, 0}));
  EXPECT_EQ(p[1].chain_id, 12u);
  EXPECT_EQ(p[1].chunk_offset, 0u);
  EXPECT_EQ(p[1].length, 104u);
}

TEST(ChunkMap, ErasureGroupsFillKPositionsOfOneChain) {
  FileLayout l = erasure(16, {3, 4}, 4, 2);
  // Group 0 (bytes 0..63) is slot 0, positions 0..3; group 1 is slot 1;
  // group 2 is slot 0 again, one unit further into each chunk.
  auto p = map_range(l, 9, 0, 160);
  ASSERT_EQ(p.size(), 10u);
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(p[i].chunk, (ChunkId{9, 0, i}));
    EXPECT_EQ(p[i].chain_id, 3u);
    EXPECT_EQ(p[i].chunk_offset, 0u);
    EXPECT_EQ(p[4 + i].chunk, (ChunkId{9, 1, i}));
  }
  EXPECT_EQ(p[8].chunk, (ChunkId{9, 0, 0}));
  EXPECT_EQ(p[8].chunk_offset, 16u);
}

// Every scheme, ranges at every boundary: the pieces cover the range in
// order, each lies in one stripe unit, and each byte is where the table says.
TEST(ChunkMap, PiecesMatchTheTableByteByByte) {
  const FileLayout layouts[] = {targets_layout(8, {1, 2, 3}), replicated(8, {4, 5}, 3),
                                erasure(8, {6, 7, 8}, 3, 2), erasure(8, {9}, 2, 1)};
  for (const FileLayout& l : layouts) {
    for (uint64_t off = 0; off < 70; off += 3) {
      for (uint64_t len : {0, 1, 7, 8, 9, 23, 64, 97}) {
        uint64_t x = off;
        for (const ChunkPiece& p : map_range(l, 1, off, len)) {
          ASSERT_EQ(p.file_offset, x) << describe(l);
          ASSERT_GT(p.length, 0u);
          ASSERT_EQ(p.file_offset / 8, (p.file_offset + p.length - 1) / 8) << describe(l);
          for (uint64_t i = 0; i < p.length; ++i) {
            Where w = where(l, x + i);
            ASSERT_EQ(p.chunk.slot, w.slot) << describe(l) << " byte " << x + i;
            ASSERT_EQ(p.chunk.position, w.position) << describe(l) << " byte " << x + i;
            ASSERT_EQ(p.chunk_offset + i, w.offset) << describe(l) << " byte " << x + i;
            ASSERT_EQ(p.chain_id, l.chained() ? l.chains[w.slot] : 0u);
          }
          x += p.length;
        }
        ASSERT_EQ(x, off + len);
      }
    }
  }
}

// Brute force: write every byte of a file of each size, track each chunk's
// end, and compare with the closed forms (parity as long as position 0).
TEST(ChunkMap, ChunkSizesAndFileEndsMatchBruteForce) {
  const FileLayout layouts[] = {targets_layout(16, {1, 2, 3}), replicated(16, {4}, 1),
                                erasure(16, {6, 7}, 3, 2), erasure(4, {6, 7, 8}, 2, 2)};
  for (const FileLayout& l : layouts) {
    for (uint64_t fsize = 0; fsize < 300; ++fsize) {
      std::map<std::pair<uint32_t, uint32_t>, uint64_t> end;
      for (uint64_t x = 0; x < fsize; ++x) {
        Where w = where(l, x);
        auto& e = end[{w.slot, w.position}];
        e = std::max(e, w.offset + 1);
      }
      uint64_t implied = 0;
      for (uint32_t s = 0; s < l.stripe_count; ++s) {
        for (uint32_t pos = 0; pos < l.positions(); ++pos) {
          const bool parity = pos >= l.data_units();
          const uint64_t want = end[{s, parity ? 0 : pos}];
          ASSERT_EQ(chunk_size_for_file_size(l, s, pos, fsize), want)
              << describe(l) << " size " << fsize << " slot " << s << " position " << pos;
          implied = std::max(implied, file_end_of_chunk(l, s, pos, want));
        }
      }
      ASSERT_EQ(implied, fsize) << describe(l);
    }
  }
}

TEST(ChunkMap, AllChunksListsEveryPositionOfEverySlot) {
  auto ec = all_chunks(erasure(16, {6, 7}, 4, 2), 3);
  ASSERT_EQ(ec.size(), 12u);
  EXPECT_EQ(ec[11].chunk, (ChunkId{3, 1, 5}));
  EXPECT_EQ(ec[11].chain_id, 7u);
  auto v1 = all_chunks(targets_layout(16, {2, 5}), 3);
  ASSERT_EQ(v1.size(), 2u);
  EXPECT_EQ(v1[1].target_id, 5u);
}

TEST(FileLayout, ValidateNamesTheInodeAndTheFault) {
  EXPECT_TRUE(validate(targets_layout(16, {1, 2}), 4).ok());
  EXPECT_TRUE(validate(erasure(16, {1, 2}, 4, 2), 4).ok());
  Status twice = validate(targets_layout(16, {1, 1}), 4);
  EXPECT_EQ(twice.code(), Code::kInvalidArgument);
  EXPECT_NE(twice.message().find("inode 4"), std::string::npos) << twice.message();
  FileLayout short_chains = replicated(16, {1}, 2);
  short_chains.stripe_count = 2;
  EXPECT_EQ(validate(short_chains, 4).code(), Code::kInvalidArgument);
  EXPECT_EQ(validate(replicated(16, {1}, 0), 4).code(), Code::kInvalidArgument);
  EXPECT_EQ(validate(erasure(16, {1}, 4, 0), 4).code(), Code::kInvalidArgument);
  EXPECT_EQ(validate(replicated(16, {0}, 1), 4).code(), Code::kInvalidArgument);
  FileLayout no_scheme = replicated(16, {1}, 1);
  no_scheme.scheme = Redundancy::kNone;
  EXPECT_EQ(validate(no_scheme, 4).code(), Code::kInvalidArgument);
}

TEST(FileLayout, DescribeSaysSchemeAndOwners) {
  EXPECT_EQ(describe(targets_layout(1 << 20, {1, 2})), "1 MiB x 2, targets 1,2");
  EXPECT_EQ(describe(replicated(65536, {4, 5}, 2)), "64 KiB x 2, replicas 2, chains 4,5");
  EXPECT_EQ(describe(erasure(65536, {4}, 4, 2)), "64 KiB x 1, ec 4+2, chains 4");
}

}  // namespace
}  // namespace surge
