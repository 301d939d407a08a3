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

PayloadChecksums checksum_payload(std::span<const iovec> data, uint64_t offset) {
  static const Crc32cShift block_shift(kBlockSize);
  PayloadChecksums out;
  const uint64_t len = segments_length(data);
  if (len == 0) return out;
  const uint64_t end = offset + len;
  out.first_block = offset / kBlockSize;
  const uint64_t last_block = (end - 1) / kBlockSize;
  out.full_block.assign(last_block - out.first_block + 1, 0);
  for (uint64_t b = out.first_block; b <= last_block; ++b) {
    const uint64_t bs = b * kBlockSize, be = bs + kBlockSize;
    const uint64_t ns = std::max(bs, offset), ne = std::min(be, end);
    if (ns == bs && ne == be) {
      const uint32_t crc = crc32c_segments(data, ns - offset, kBlockSize);
      out.full_block[b - out.first_block] = crc;
      out.payload = block_shift.combine(out.payload, crc);
    } else {
      out.payload = crc32c_segments(data, ns - offset, ne - ns, out.payload);
    }
  }
  return out;
}

uint64_t segments_length(std::span<const iovec> segs) {
  uint64_t n = 0;
  for (const iovec& s : segs) n += s.iov_len;
  return n;
}

}  // namespace surge::ods
