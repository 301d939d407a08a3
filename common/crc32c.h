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

}  // namespace surge
