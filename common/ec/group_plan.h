// GroupPlan: what a write of a byte range does to each stripe group of an
// EC file (docs/redundancy.md, "EC writes: the design"): which groups it
// covers whole (the client encodes them: K + M chunk ranges, no read) and
// which in part (each touched data position sends a parity delta), with
// the chunk ranges of each. Built on map_range, so the arithmetic is
// ChunkMap's; pure functions.
//
// Group g of an EC K+M layout with unit u and c slots: slot g % c, file
// bytes [g K u, (g + 1) K u), unit p of it at chunk offset (g / c) u of
// data chunk p; its parity at the same chunk offset of chunks K .. K+M-1.
#pragma once

#include <cstdint>
#include <vector>

#include "common/chunk_map.h"
#include "common/file_layout.h"

namespace surge::ec {

// The part of one data position a write touches, in one group.
struct UnitRange {
  uint32_t position = 0;
  uint64_t chunk_offset = 0;  // where the touched bytes start in the chunk
  uint64_t file_offset = 0;
  uint64_t length = 0;
};

struct GroupWrite {
  uint64_t group = 0;
  uint32_t slot = 0;
  uint64_t chunk_offset = 0;  // the group's first byte in each of its chunks
  uint64_t file_offset = 0;   // the group's first file byte
  bool full = false;          // every byte of the group's K units is written
  std::vector<UnitRange> units;  // touched data positions, ascending
  // The chunk range of parity a partial write changes: from the lowest
  // touched in-unit offset to the highest end (a full group: the unit).
  uint64_t parity_chunk_offset = 0;
  uint64_t parity_length = 0;
};

// The groups [offset, offset + length) touches, in file order. The layout
// must be a valid EC layout (FileLayout::erasure()); empty otherwise or
// for length 0.
std::vector<GroupWrite> plan_group_writes(const FileLayout& layout, uint64_t offset,
                                          uint64_t length);

}  // namespace surge::ec
