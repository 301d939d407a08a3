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

// Total bytes of segs.
uint64_t segments_length(std::span<const iovec> segs);

}  // namespace surge::ods
