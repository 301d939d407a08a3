// RsCodec: Reed-Solomon K+M over ISA-L, the erasure code of EC layouts
// (docs/redundancy.md, "Erasure coding"). Pure computation on caller
// buffers: encode reads the K data chunks through the caller's pointers and
// writes the M parity chunks in place (no copy builds the parity input);
// reconstruct rebuilds any chunks, data or parity, from any K present ones.
//
// Invariants: 1 <= K, 1 <= M, K + M <= kMaxChunks. The generator is the
// systematic Cauchy matrix (gf_gen_cauchy1_matrix): every K of its K + M
// rows are independent, so every pattern of up to M erasures is decodable.
// Chunk i < K is data position i, chunk K + j is parity j; all buffers of
// one call are `len` bytes (a group's short chunks are zero-padded by the
// caller to the group's chunk length).
//
// An RsCodec is immutable after Create and safe to share between threads.
#pragma once

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace surge::ec {

// Most chunks (K + M) in one group: the width of a ChunkSet.
inline constexpr uint32_t kMaxChunks = 64;
// A set of chunk indices of one group (bit i: chunk i).
using ChunkSet = std::bitset<kMaxChunks>;

class RsCodec {
 public:
  // InvalidArgument naming K and M when they break the invariants.
  static Result<RsCodec> Create(uint32_t k, uint32_t m);

  uint32_t k() const { return k_; }
  uint32_t m() const { return m_; }
  // "4+2", for messages.
  std::string name() const;

  // parity[j] = sum_i coef(j, i) * data[i], over len bytes.
  // data: K pointers, parity: M pointers (distinct from the data).
  Status Encode(std::span<const uint8_t* const> data, std::span<uint8_t* const> parity,
                size_t len) const;

  // A read-modify-write of data chunk `index`: delta = old ^ new over
  // len bytes (at the same offset as the parity ranges), and every parity
  // range becomes parity ^ coef(j, index) * delta, which is what a full
  // Encode of the new data would give. Costs one data range, not K.
  Status UpdateParity(uint32_t index, const uint8_t* delta, std::span<uint8_t* const> parity,
                      size_t len) const;
  // The same for one parity chunk (row j of the M): what a parity server
  // applies when it holds only its own chunk. parity: that chunk's range.
  Status UpdateOneParity(uint32_t index, uint32_t j, const uint8_t* delta, uint8_t* parity,
                         size_t len) const;

  // chunks: K + M pointers. Chunks in `present` are read, chunks in `want`
  // are written (rebuilt); the others are not touched and may be null.
  // Uses the first K present chunks. Unavailable (naming K+M, the present
  // and the wanted chunks) when fewer than K are present.
  Status Reconstruct(std::span<uint8_t* const> chunks, ChunkSet present, ChunkSet want,
                     size_t len) const;

 private:
  RsCodec(uint32_t k, uint32_t m);
  Status CheckLength(size_t len, const char* op) const;

  uint32_t k_ = 0;
  uint32_t m_ = 0;
  std::vector<uint8_t> matrix_;       // (K + M) x K, rows 0..K-1 the identity
  std::vector<uint8_t> parity_tbls_;  // ec_init_tables of the M parity rows
};

// "0,3,5": the chunks of a set, for messages.
std::string describe(ChunkSet set, uint32_t chunks);

}  // namespace surge::ec
