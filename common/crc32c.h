// CRC32C (Castagnoli), the checksum of every byte Surge stores or moves.
// Computed by ISA-L, which picks the hardware instruction at run time, so the
// build stays baseline x86-64.
#pragma once

#include <cstddef>
#include <cstdint>

namespace surge {

// Standard CRC32C (init and final inversion). Chains:
//   crc32c(b, nb, crc32c(a, na)) == crc32c(a||b, na + nb).
uint32_t crc32c(const void* data, size_t len, uint32_t prev = 0);

// Joins CRCs computed apart, for a fixed length n of the second part:
//   combine(crc32c(a), crc32c(b)) == crc32c(a||b)   when b is n bytes long.
// So one pass over the data can give each block's own CRC and the CRC of
// the whole (the data server checks a payload and checksums its blocks in
// one pass). Building it costs 32 CRCs of n zero bytes; combine() is four
// table lookups.
class Crc32cShift {
 public:
  explicit Crc32cShift(size_t n);
  uint32_t combine(uint32_t crc_a, uint32_t crc_b) const {
    return crc_b ^ table_[0][crc_a & 0xff] ^ table_[1][(crc_a >> 8) & 0xff] ^
           table_[2][(crc_a >> 16) & 0xff] ^ table_[3][crc_a >> 24];
  }

 private:
  uint32_t table_[4][256];
};

}  // namespace surge
