#include "common/crc32c.h"

#include <isa-l/crc.h>

#include <climits>
#include <vector>

namespace surge {

uint32_t crc32c(const void* data, size_t len, uint32_t prev) {
  // ISA-L's crc32_iscsi works on the raw register (no inversions) and takes
  // an int length, so invert around it and feed it in chunks.
  uint32_t reg = ~prev;
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  while (len > 0) {
    int n = len > static_cast<size_t>(INT_MAX / 2) ? INT_MAX / 2 : static_cast<int>(len);
    reg = crc32_iscsi(p, n, reg);
    p += n;
    len -= static_cast<size_t>(n);
  }
  return ~reg;
}

// The raw register update over n bytes is affine: reg' = A(reg) ^ L(data).
// With the inversions of the standard CRC this gives
//   crc32c(b, prev) == crc32c(b, 0) ^ A(prev),
// so combine() needs only the linear map A, which is the raw update over n
// zero bytes. It is tabulated a byte of the input at a time.
Crc32cShift::Crc32cShift(size_t n) {
  const std::vector<unsigned char> zeros(n);
  uint32_t column[32];
  for (int bit = 0; bit < 32; ++bit) {
    uint32_t reg = uint32_t{1} << bit;
    auto* p = const_cast<unsigned char*>(zeros.data());
    for (size_t left = n; left > 0;) {
      int k = left > static_cast<size_t>(INT_MAX / 2) ? INT_MAX / 2 : static_cast<int>(left);
      reg = crc32_iscsi(p, k, reg);
      left -= static_cast<size_t>(k);
    }
    column[bit] = reg;
  }
  for (int byte = 0; byte < 4; ++byte) {
    for (uint32_t v = 0; v < 256; ++v) {
      uint32_t out = 0;
      for (int bit = 0; bit < 8; ++bit) {
        if ((v >> bit) & 1) out ^= column[byte * 8 + bit];
      }
      table_[byte][v] = out;
    }
  }
}

}  // namespace surge
