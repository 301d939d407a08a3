#include "common/crc32c.h"

#include <isa-l/crc.h>

#include <climits>

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

}  // namespace surge
