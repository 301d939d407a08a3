// RsCodec (common/ec/rs_codec.h): byte-exact encode against a scalar
// reference of the same Cauchy code, rebuild of every erasure pattern of up
// to M chunks, the partial-update path, and the refusals.
#include "common/ec/rs_codec.h"

#include <gtest/gtest.h>
#include <isa-l/erasure_code.h>

#include <random>
#include <vector>

namespace surge::ec {
namespace {

struct Group {
  uint32_t k, m;
  size_t len;
  std::vector<std::vector<uint8_t>> chunks;  // K data then M parity
  std::vector<uint8_t*> ptrs() {
    std::vector<uint8_t*> p;
    for (auto& c : chunks) p.push_back(c.data());
    return p;
  }
};

Group random_group(uint32_t k, uint32_t m, size_t len, uint32_t seed) {
  Group g{k, m, len, {}};
  std::mt19937 rng(seed);
  for (uint32_t i = 0; i < k + m; ++i) {
    std::vector<uint8_t> c(len);
    if (i < k) for (auto& b : c) b = static_cast<uint8_t>(rng());
    g.chunks.push_back(std::move(c));
  }
  return g;
}

Status encode(const RsCodec& codec, Group& g) {
  std::vector<const uint8_t*> data;
  std::vector<uint8_t*> parity;
  for (uint32_t i = 0; i < g.k; ++i) data.push_back(g.chunks[i].data());
  for (uint32_t j = 0; j < g.m; ++j) parity.push_back(g.chunks[g.k + j].data());
  return codec.Encode(data, parity, g.len);
}

// Parity j, byte b: sum over i of 1/((K + j) ^ i) * data[i][b] in GF(2^8),
// the systematic Cauchy code written out one byte at a time.
std::vector<uint8_t> reference_parity(const Group& g, uint32_t j) {
  std::vector<uint8_t> out(g.len, 0);
  for (uint32_t i = 0; i < g.k; ++i) {
    const uint8_t coef = gf_inv(static_cast<uint8_t>((g.k + j) ^ i));
    for (size_t b = 0; b < g.len; ++b) out[b] ^= gf_mul(coef, g.chunks[i][b]);
  }
  return out;
}

RsCodec make(uint32_t k, uint32_t m) {
  auto codec = RsCodec::Create(k, m);
  EXPECT_TRUE(codec.ok()) << codec.status().ToString();
  return std::move(codec).value();
}

class EncodeTest : public ::testing::TestWithParam<std::tuple<uint32_t, uint32_t, size_t>> {};

TEST_P(EncodeTest, ParityMatchesTheScalarReference) {
  auto [k, m, len] = GetParam();
  RsCodec codec = make(k, m);
  Group g = random_group(k, m, len, k * 100 + m + static_cast<uint32_t>(len));
  ASSERT_TRUE(encode(codec, g).ok());
  for (uint32_t j = 0; j < m; ++j) {
    EXPECT_EQ(g.chunks[k + j], reference_parity(g, j)) << codec.name() << " parity " << j;
  }
}

// Lengths below, at and past the SIMD widths (16, 32, 64), and a 1 MiB chunk.
INSTANTIATE_TEST_SUITE_P(Schemes, EncodeTest,
                         ::testing::Combine(::testing::Values(2u, 4u, 8u),
                                            ::testing::Values(1u, 2u, 3u),
                                            ::testing::Values(size_t{1}, size_t{31}, size_t{33},
                                                              size_t{4103}, size_t{1} << 20)));

// Every set of up to M lost chunks, data and parity, rebuilt from the
// first K survivors, byte for byte.
void rebuild_every_pattern(uint32_t k, uint32_t m, size_t len) {
  RsCodec codec = make(k, m);
  Group g = random_group(k, m, len, k * 7 + m);
  ASSERT_TRUE(encode(codec, g).ok());
  const auto original = g.chunks;
  const uint32_t n = k + m;
  int patterns = 0;
  for (uint64_t lost = 1; lost < (uint64_t{1} << n); ++lost) {
    ChunkSet want(lost);
    if (want.count() > m) continue;
    ChunkSet present = ~want;
    for (uint32_t i = n; i < kMaxChunks; ++i) present.reset(i);
    for (uint32_t i = 0; i < n; ++i) {
      if (want.test(i)) std::fill(g.chunks[i].begin(), g.chunks[i].end(), 0xA5);
    }
    auto ptrs = g.ptrs();
    ASSERT_TRUE(codec.Reconstruct(ptrs, present, want, len).ok())
        << codec.name() << " lost {" << describe(want, n) << "}";
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_EQ(g.chunks[i], original[i])
          << codec.name() << " lost {" << describe(want, n) << "}, chunk " << i;
    }
    ++patterns;
  }
  EXPECT_GT(patterns, 0);
}

TEST(RsCodecRebuild, EveryPatternOfTwoPlusOne) { rebuild_every_pattern(2, 1, 1000); }
TEST(RsCodecRebuild, EveryPatternOfFourPlusTwo) { rebuild_every_pattern(4, 2, 1000); }
TEST(RsCodecRebuild, EveryPatternOfEightPlusThree) { rebuild_every_pattern(8, 3, 333); }
TEST(RsCodecRebuild, EveryPatternOfThreePlusThree) { rebuild_every_pattern(3, 3, 77); }

// A degraded read wants one data chunk while another chunk it does not
// need is unreachable too: only the wanted chunk is written.
TEST(RsCodecRebuild, RebuildsOnlyTheWantedChunk) {
  RsCodec codec = make(4, 2);
  Group g = random_group(4, 2, 4096, 3);
  ASSERT_TRUE(encode(codec, g).ok());
  const auto original = g.chunks;
  std::fill(g.chunks[1].begin(), g.chunks[1].end(), 0);
  auto ptrs = g.ptrs();
  ptrs[5] = nullptr;  // unreachable, not wanted
  ChunkSet present, want;
  present.set(0).set(2).set(3).set(4);
  want.set(1);
  ASSERT_TRUE(codec.Reconstruct(ptrs, present, want, 4096).ok());
  EXPECT_EQ(g.chunks[1], original[1]);
}

TEST(RsCodecRebuild, TooManyMissingIsRefusedNamingTheChunks) {
  RsCodec codec = make(4, 2);
  Group g = random_group(4, 2, 64, 5);
  ASSERT_TRUE(encode(codec, g).ok());
  auto ptrs = g.ptrs();
  ChunkSet present, want;
  present.set(0).set(4).set(5);  // 3 of 6: chunks 1, 2, 3 lost, M = 2
  want.set(1).set(2).set(3);
  Status st = codec.Reconstruct(ptrs, present, want, 64);
  EXPECT_EQ(st.code(), Code::kUnavailable);
  EXPECT_NE(st.message().find("4+2"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("{1,2,3}"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("{0,4,5}"), std::string::npos) << st.message();
}

TEST(RsCodecRebuild, PresentAndWantedMustBeDisjoint) {
  RsCodec codec = make(2, 1);
  Group g = random_group(2, 1, 16, 1);
  auto ptrs = g.ptrs();
  ChunkSet present, want;
  present.set(0).set(1);
  want.set(1);
  EXPECT_EQ(codec.Reconstruct(ptrs, present, want, 16).code(), Code::kInvalidArgument);
  ChunkSet beyond;
  beyond.set(3);  // 2+1 has chunks 0..2
  EXPECT_EQ(codec.Reconstruct(ptrs, present, beyond, 16).code(), Code::kInvalidArgument);
}

TEST(RsCodecRebuild, AWantedChunkNeedsABuffer) {
  RsCodec codec = make(2, 1);
  Group g = random_group(2, 1, 16, 1);
  auto ptrs = g.ptrs();
  ptrs[2] = nullptr;
  ChunkSet present, want;
  present.set(0).set(1);
  want.set(2);
  Status st = codec.Reconstruct(ptrs, present, want, 16);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("chunk 2"), std::string::npos) << st.message();
}

// Read-modify-write of one data range: parity ^= coef * (old ^ new) gives
// the parity of a full encode of the new data.
TEST(RsCodecUpdate, PartialUpdateEqualsAFullEncode) {
  RsCodec codec = make(4, 2);
  Group g = random_group(4, 2, 8192, 11);
  ASSERT_TRUE(encode(codec, g).ok());
  const size_t off = 1000, len = 3000;
  std::mt19937 rng(99);
  std::vector<uint8_t> delta(len);
  for (size_t b = 0; b < len; ++b) {
    const uint8_t fresh = static_cast<uint8_t>(rng());
    delta[b] = g.chunks[2][off + b] ^ fresh;
    g.chunks[2][off + b] = fresh;
  }
  std::vector<uint8_t*> parity{g.chunks[4].data() + off, g.chunks[5].data() + off};
  ASSERT_TRUE(codec.UpdateParity(2, delta.data(), parity, len).ok());
  for (uint32_t j = 0; j < 2; ++j) EXPECT_EQ(g.chunks[4 + j], reference_parity(g, j)) << j;
}

// A parity server holds one parity chunk: updating each row alone gives
// the same parity as the update of all M, whichever data chunk changed.
TEST(RsCodecUpdate, OneParityRowAtATimeEqualsAFullEncode) {
  RsCodec codec = make(3, 3);
  Group g = random_group(3, 3, 4096, 5);
  ASSERT_TRUE(encode(codec, g).ok());
  std::mt19937 rng(7);
  for (uint32_t index = 0; index < 3; ++index) {
    const size_t off = 100 * (index + 1), len = 2000;
    std::vector<uint8_t> delta(len);
    for (size_t b = 0; b < len; ++b) {
      const uint8_t fresh = static_cast<uint8_t>(rng());
      delta[b] = g.chunks[index][off + b] ^ fresh;
      g.chunks[index][off + b] = fresh;
    }
    for (uint32_t j = 0; j < 3; ++j) {
      ASSERT_TRUE(
          codec.UpdateOneParity(index, j, delta.data(), g.chunks[3 + j].data() + off, len).ok());
    }
  }
  for (uint32_t j = 0; j < 3; ++j) EXPECT_EQ(g.chunks[3 + j], reference_parity(g, j)) << j;
  std::vector<uint8_t> d(8), p(8);
  EXPECT_EQ(codec.UpdateOneParity(0, 3, d.data(), p.data(), 8).code(), Code::kInvalidArgument);
  EXPECT_EQ(codec.UpdateOneParity(3, 0, d.data(), p.data(), 8).code(), Code::kInvalidArgument);
}

TEST(RsCodecUpdate, OnlyDataChunksCanBeUpdated) {
  RsCodec codec = make(2, 1);
  std::vector<uint8_t> delta(16), p(16);
  std::vector<uint8_t*> parity{p.data()};
  EXPECT_EQ(codec.UpdateParity(2, delta.data(), parity, 16).code(), Code::kInvalidArgument);
}

TEST(RsCodecCreate, RefusesSchemesOutsideTheLimits) {
  for (auto [k, m] : {std::pair{0u, 1u}, {1u, 0u}, {60u, 5u}}) {
    auto codec = RsCodec::Create(k, m);
    ASSERT_FALSE(codec.ok()) << k << "+" << m;
    EXPECT_EQ(codec.status().code(), Code::kInvalidArgument);
    EXPECT_NE(codec.status().message().find(std::to_string(k) + "+" + std::to_string(m)),
              std::string::npos)
        << codec.status().message();
  }
  EXPECT_TRUE(RsCodec::Create(60, 4).ok());
}

TEST(RsCodecEncode, RefusesTheWrongNumberOfChunks) {
  RsCodec codec = make(4, 2);
  Group g = random_group(4, 2, 16, 1);
  std::vector<const uint8_t*> data{g.chunks[0].data(), g.chunks[1].data(), g.chunks[2].data()};
  std::vector<uint8_t*> parity{g.chunks[4].data(), g.chunks[5].data()};
  Status st = codec.Encode(data, parity, 16);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("4+2"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace surge::ec
