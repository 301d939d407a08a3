#include "common/chunk_map.h"

#include <algorithm>

namespace surge {

namespace {

ChunkPiece piece_of(const FileLayout& l, uint64_t ino, uint32_t slot, uint32_t position) {
  ChunkPiece p;
  p.chunk = ChunkId{ino, slot, position};
  if (l.chained()) {
    p.chain_id = l.chains[slot];
  } else {
    p.target_id = l.targets[slot];
  }
  return p;
}

}  // namespace

std::vector<ChunkPiece> map_range(const FileLayout& l, uint64_t ino, uint64_t offset,
                                  uint64_t length) {
  std::vector<ChunkPiece> out;
  const uint64_t u = l.stripe_size;
  const uint64_t k = l.data_units();
  const uint64_t c = l.stripe_count;
  const uint64_t end = offset + length;
  for (uint64_t x = offset; x < end;) {
    const uint64_t unit = x / u;
    const uint64_t group = unit / k;
    const auto slot = static_cast<uint32_t>(group % c);
    const auto position = static_cast<uint32_t>(unit % k);
    const uint64_t n = std::min(end, (unit + 1) * u) - x;
    ChunkPiece p = piece_of(l, ino, slot, position);
    p.chunk_offset = (group / c) * u + x % u;
    p.file_offset = x;
    p.length = n;
    out.push_back(p);
    x += n;
  }
  return out;
}

std::vector<ChunkPiece> all_chunks(const FileLayout& l, uint64_t ino) {
  std::vector<ChunkPiece> out;
  for (uint32_t slot = 0; slot < l.stripe_count; ++slot) {
    for (uint32_t pos = 0; pos < l.positions(); ++pos) out.push_back(piece_of(l, ino, slot, pos));
  }
  return out;
}

uint64_t chunk_size_for_file_size(const FileLayout& l, uint32_t slot, uint32_t position,
                                  uint64_t file_size) {
  const uint64_t u = l.stripe_size;
  const uint64_t k = l.data_units();
  const uint64_t group_bytes = k * u;
  const uint64_t round = group_bytes * l.stripe_count;  // one group in every slot
  // A parity chunk is as long as the longest data chunk of its slot: position 0.
  const uint64_t pos = position < k ? position : 0;
  uint64_t size = (file_size / round) * u;
  const uint64_t rest = file_size % round;
  const uint64_t slot_start = static_cast<uint64_t>(slot) * group_bytes;
  if (rest > slot_start) {
    const uint64_t in_group = std::min(rest - slot_start, group_bytes);
    const uint64_t pos_start = pos * u;
    if (in_group > pos_start) size += std::min(in_group - pos_start, u);
  }
  return size;
}

uint64_t file_end_of_chunk(const FileLayout& l, uint32_t slot, uint32_t position,
                           uint64_t chunk_size) {
  const uint64_t k = l.data_units();
  if (chunk_size == 0 || position >= k) return 0;
  const uint64_t u = l.stripe_size;
  const uint64_t last = chunk_size - 1;  // chunk offset of the last byte
  const uint64_t group = (last / u) * l.stripe_count + slot;
  return (group * k + position) * u + last % u + 1;
}

}  // namespace surge
