// ChunkMap: the one place that maps a byte range of a file to the chunks
// that hold it, for every layout format and scheme (docs/redundancy.md has
// the table this implements). The client's striped IO, the MDS (truncate,
// orphan removal) and surgectl scrub all go through it. Pure functions.
//
// With u = stripe_size, c = stripe_count, K = data units per group (EC:
// ec_data; otherwise 1): byte x is in group g = x / (K u), slot g % c,
// position (x / u) % K, chunk offset (g / c) u + x % u. K = 1 is exactly
// the format 1 arithmetic with a chain (or, format 1, a target) per slot.
// EC parity positions K .. K+M-1 hold their group at the same chunk offset.
#pragma once

#include <cstdint>
#include <vector>

#include "common/file_layout.h"

namespace surge {

// A chunk on a data server. Format 1 files have one legacy object per
// target, keyed by ino (slot and position then only say which slot).
struct ChunkId {
  uint64_t ino = 0;
  uint32_t slot = 0;
  uint32_t position = 0;
  bool operator==(const ChunkId&) const = default;
};

// A contiguous piece of a file range that lies in one chunk.
struct ChunkPiece {
  ChunkId chunk;
  uint32_t chain_id = 0;   // format 2: the slot's chain; format 1: 0
  uint32_t target_id = 0;  // format 1: the slot's target; format 2: 0 (the chain decides)
  uint64_t chunk_offset = 0;
  uint64_t file_offset = 0;
  uint64_t length = 0;
};

// Splits [offset, offset + length) at stripe-unit boundaries, in file order
// (data chunks only; EC parity is the writer's to derive). The layout must
// be valid (validate()).
std::vector<ChunkPiece> map_range(const FileLayout& layout, uint64_t ino, uint64_t offset,
                                  uint64_t length);

// Every chunk of the file, data and parity, slot by slot: what removing it
// or scrubbing it touches. chunk_offset, file_offset and length are 0.
std::vector<ChunkPiece> all_chunks(const FileLayout& layout, uint64_t ino);

// The size chunk (slot, position) has when the file is exactly file_size
// bytes long and fully written: what a truncate to file_size sets it to.
// A parity position has the size of its slot's position 0 (the largest).
uint64_t chunk_size_for_file_size(const FileLayout& layout, uint32_t slot, uint32_t position,
                                  uint64_t file_size);

// The file size implied by data chunk (slot, position) being chunk_size
// bytes long (the end of the last byte it holds), 0 for an empty chunk or
// a parity position.
uint64_t file_end_of_chunk(const FileLayout& layout, uint32_t slot, uint32_t position,
                           uint64_t chunk_size);

}  // namespace surge
