// plan_group_writes: map_range's pieces, gathered by stripe group.
#include "common/ec/group_plan.h"

#include <algorithm>

namespace surge::ec {

std::vector<GroupWrite> plan_group_writes(const FileLayout& l, uint64_t offset, uint64_t length) {
  std::vector<GroupWrite> out;
  if (!l.erasure() || length == 0) return out;
  const uint64_t u = l.stripe_size;
  const uint64_t k = l.ec_data;
  const uint64_t group_bytes = k * u;
  for (const ChunkPiece& p : map_range(l, /*ino=*/0, offset, length)) {
    const uint64_t g = p.file_offset / group_bytes;
    if (out.empty() || out.back().group != g) {
      GroupWrite w;
      w.group = g;
      w.slot = p.chunk.slot;
      w.chunk_offset = (g / l.stripe_count) * u;
      w.file_offset = g * group_bytes;
      out.push_back(std::move(w));
    }
    GroupWrite& w = out.back();
    // A range is contiguous, so a group's pieces come one per position.
    w.units.push_back(UnitRange{p.chunk.position, p.chunk_offset, p.file_offset, p.length});
  }
  for (GroupWrite& w : out) {
    uint64_t lo = UINT64_MAX, hi = 0, written = 0;
    for (const UnitRange& r : w.units) {
      lo = std::min(lo, r.chunk_offset);
      hi = std::max(hi, r.chunk_offset + r.length);
      written += r.length;
    }
    w.full = written == group_bytes;
    w.parity_chunk_offset = lo;
    w.parity_length = hi - lo;
  }
  return out;
}

}  // namespace surge::ec
