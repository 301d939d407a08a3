// How a write's payload is cut into checksummed pieces
// (WriteRequest.piece_bytes / piece_crc32c): at object offsets that are
// multiples of piece_bytes. Client and data server both use these.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "common/crc32c.h"
#include "net/proto/ods.pb.h"

namespace surge::proto::ods {

// What clients send: small enough that the data server stores a 1 MiB
// write in four steps while the rest is still arriving, large enough that
// the per-piece work (one pwrite, one sidecar update) stays small.
inline constexpr uint32_t kWritePieceBytes = 256 * 1024;
inline constexpr uint64_t kMinPieceBytes = 4096;
inline constexpr uint64_t kMaxPieceBytes = 1 << 20;

inline bool valid_piece_bytes(uint64_t b) {
  return b >= kMinPieceBytes && b <= kMaxPieceBytes && (b & (b - 1)) == 0;
}

// Length of the piece that starts at object offset `at` with `left` bytes
// of the payload still to come.
inline uint64_t piece_length(uint64_t at, uint64_t left, uint64_t piece_bytes) {
  return std::min(left, piece_bytes - at % piece_bytes);
}

inline uint64_t piece_count(uint64_t offset, uint64_t len, uint64_t piece_bytes) {
  if (len == 0) return 0;
  return (offset + len - 1) / piece_bytes - offset / piece_bytes + 1;
}

// Sets piece_bytes and piece_crc32c of req for the payload `data` of `len`
// bytes written at req.offset().
inline void set_piece_crcs(WriteRequest& req, const std::byte* data, uint64_t len,
                           uint32_t piece_bytes = kWritePieceBytes) {
  req.set_piece_bytes(piece_bytes);
  req.clear_piece_crc32c();
  for (uint64_t done = 0; done < len;) {
    const uint64_t n = piece_length(req.offset() + done, len - done, piece_bytes);
    req.add_piece_crc32c(surge::crc32c(data + done, n));
    done += n;
  }
}

}  // namespace surge::proto::ods
