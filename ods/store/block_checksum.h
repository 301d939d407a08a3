// Per-block CRC32C of object data, and how it is kept on disk.
//
// Why 4 KiB blocks: it is the page size and the O_DIRECT alignment, so a
// block is written to the page cache (and later to disk) as one unit; an
// unaligned write only reads back the head and tail 4 KiB to update their
// CRCs, and a small read verifies 4 KiB, not 64. The cost is one 4-byte CRC
// per 4 KiB (0.1% of the data) and 256 CRCs per 1 MiB IO, which the
// hardware CRC32C instruction computes at several GB/s (ISA-L), far above
// the network. 64 KiB would cut the sidecar 16x but make every small or
// unaligned IO read and checksum 16x more than it touches.
//
// Invariant: a block's CRC always covers the full block size, bytes past
// the end of the object counted as zeros. So holes and the tail need no
// special case, and the sidecar stores crc ^ crc(zero block): a block that
// was never written (a hole in the sidecar, which reads as 0) verifies as a
// zero block without ever being written.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace surge::ods {

inline constexpr uint64_t kBlockSize = 4096;
inline constexpr uint64_t kCrcEntrySize = 4;

// CRC32C of kBlockSize zero bytes.
uint32_t zero_block_crc();

// What the sidecar holds for a block whose CRC is crc, and back.
inline uint32_t encode_block_crc(uint32_t crc) { return crc ^ zero_block_crc(); }
inline uint32_t decode_block_crc(uint32_t stored) { return stored ^ zero_block_crc(); }

// CRC32C of `len` zero bytes appended to a running crc (len <= kBlockSize).
uint32_t crc32c_zeros(uint64_t len, uint32_t prev);

// CRC32C of bytes [pos, pos + len) of the concatenation of segs, chained
// onto prev. The range must lie inside the segments.
uint32_t crc32c_segments(std::span<const iovec> segs, uint64_t pos, uint64_t len,
                         uint32_t prev = 0);

// One pass over a write's payload: the CRC32C of the whole payload, and the
// CRC of each block the payload covers entirely. The data server checks the
// first against what the client sent and hands the second to the store, so
// each byte is checksummed once. full_block[b - first_block] is the CRC of
// block b; entries of partly covered blocks stay 0 (their CRC needs the
// bytes already stored).
struct PayloadChecksums {
  uint32_t payload = 0;
  uint64_t first_block = 0;
  std::vector<uint32_t> full_block;
};
PayloadChecksums checksum_payload(std::span<const iovec> data, uint64_t offset);

// Total bytes of segs.
uint64_t segments_length(std::span<const iovec> segs);

}  // namespace surge::ods
