#include "common/stripe_map.h"

#include <gtest/gtest.h>

#include <map>

namespace surge {
namespace {

TEST(StripeMap, DesignFormula) {
  StripeGeometry g{1 << 20, 3};
  uint32_t slot = 99;
  // Byte 0 of stripe 4 is on slot 1, in that object's second stripe.
  EXPECT_EQ(object_offset_of(g, 4ull << 20, &slot), 1ull << 20);
  EXPECT_EQ(slot, 1u);
  EXPECT_EQ(object_offset_of(g, (2ull << 20) + 5, &slot), 5u);
  EXPECT_EQ(slot, 2u);
}

TEST(StripeMap, SplitCoversRangeExactlyAtBoundaries) {
  StripeGeometry g{4096, 3};
  auto pieces = split_range(g, 4000, 10000);
  uint64_t x = 4000, total = 0;
  for (const auto& p : pieces) {
    EXPECT_EQ(p.file_offset, x);
    EXPECT_EQ(p.file_offset / 4096, (p.file_offset + p.length - 1) / 4096);
    x += p.length;
    total += p.length;
  }
  EXPECT_EQ(total, 10000u);
  ASSERT_EQ(pieces.size(), 4u);
  EXPECT_EQ(pieces[0].length, 96u);
  EXPECT_EQ(pieces[3].length, 14000u - 12288u);
}

TEST(StripeMap, EmptyRangeHasNoPieces) { EXPECT_TRUE(split_range({4096, 2}, 77, 0).empty()); }

// Brute force: write every byte of a file of each size, track per-slot object
// ends, and compare with the closed forms.
TEST(StripeMap, ObjectSizesMatchBruteForce) {
  StripeGeometry g{16, 3};
  for (uint64_t fsize = 0; fsize < 200; ++fsize) {
    std::map<uint32_t, uint64_t> end;
    for (uint64_t x = 0; x < fsize; ++x) {
      uint32_t slot;
      uint64_t off = object_offset_of(g, x, &slot);
      end[slot] = std::max(end[slot], off + 1);
    }
    for (uint32_t slot = 0; slot < g.stripe_count; ++slot) {
      EXPECT_EQ(object_size_for_file_size(g, slot, fsize), end[slot])
          << "size " << fsize << " slot " << slot;
    }
    uint64_t implied = 0;
    for (uint32_t slot = 0; slot < g.stripe_count; ++slot) {
      implied = std::max(implied, file_end_of_object(g, slot, end[slot]));
    }
    EXPECT_EQ(implied, fsize);
  }
}

// Brute force: the object range of each slot for a file range is exactly
// the span of the object offsets its bytes map to.
TEST(StripeMap, ObjectRangeOfAFileRangeMatchesBruteForce) {
  StripeGeometry g{16, 3};
  for (uint64_t off = 0; off < 100; off += 7) {
    for (uint64_t len = 0; len < 120; len += 5) {
      std::map<uint32_t, std::pair<uint64_t, uint64_t>> span;
      for (uint64_t x = off; x < off + len; ++x) {
        uint32_t slot;
        uint64_t o = object_offset_of(g, x, &slot);
        auto [it, fresh] = span.try_emplace(slot, o, o + 1);
        if (!fresh) it->second = {std::min(it->second.first, o), std::max(it->second.second, o + 1)};
      }
      for (uint32_t slot = 0; slot < g.stripe_count; ++slot) {
        auto [first, second] = object_range_of(g, slot, off, len);
        auto it = span.find(slot);
        if (it == span.end()) {
          EXPECT_EQ(first, second) << off << "+" << len << " slot " << slot;
        } else {
          EXPECT_EQ(first, it->second.first) << off << "+" << len << " slot " << slot;
          EXPECT_EQ(second, it->second.second) << off << "+" << len << " slot " << slot;
          EXPECT_EQ(second - first, [&] {  // contiguous: as many bytes as map there
            uint64_t n = 0;
            for (uint64_t x = off; x < off + len; ++x) {
              uint32_t s;
              object_offset_of(g, x, &s);
              n += s == slot;
            }
            return n;
          }());
        }
      }
    }
  }
}

}  // namespace
}  // namespace surge
