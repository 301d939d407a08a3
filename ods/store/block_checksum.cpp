// Block CRC helpers; see block_checksum.h for the on-disk convention.
#include "ods/store/block_checksum.h"

#include <algorithm>
#include <array>

#include "common/crc32c.h"

namespace surge::ods {
namespace {

const std::array<std::byte, kBlockSize>& zeros() {
  static const std::array<std::byte, kBlockSize> z{};
  return z;
}

}  // namespace

uint32_t zero_block_crc() {
  static const uint32_t crc = surge::crc32c(zeros().data(), kBlockSize);
  return crc;
}

uint32_t crc32c_zeros(uint64_t len, uint32_t prev) {
  while (len > 0) {
    uint64_t n = std::min<uint64_t>(len, kBlockSize);
    prev = surge::crc32c(zeros().data(), n, prev);
    len -= n;
  }
  return prev;
}

uint32_t crc32c_segments(std::span<const iovec> segs, uint64_t pos, uint64_t len,
                         uint32_t prev) {
  for (const iovec& s : segs) {
    if (len == 0) break;
    if (pos >= s.iov_len) {
      pos -= s.iov_len;
      continue;
    }
    uint64_t n = std::min<uint64_t>(s.iov_len - pos, len);
    prev = surge::crc32c(static_cast<const std::byte*>(s.iov_base) + pos, n, prev);
    len -= n;
    pos = 0;
  }
  return prev;
}

uint64_t segments_length(std::span<const iovec> segs) {
  uint64_t n = 0;
  for (const iovec& s : segs) n += s.iov_len;
  return n;
}

}  // namespace surge::ods
