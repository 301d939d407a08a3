#include "common/stripe_map.h"

#include <algorithm>

namespace surge {

uint64_t object_offset_of(const StripeGeometry& g, uint64_t x, uint32_t* slot) {
  uint64_t s = x / g.stripe_size;
  if (slot != nullptr) *slot = static_cast<uint32_t>(s % g.stripe_count);
  return (s / g.stripe_count) * g.stripe_size + x % g.stripe_size;
}

std::vector<StripePiece> split_range(const StripeGeometry& g, uint64_t offset, uint64_t length) {
  std::vector<StripePiece> out;
  uint64_t x = offset;
  uint64_t end = offset + length;
  while (x < end) {
    uint64_t stripe_end = (x / g.stripe_size + 1) * g.stripe_size;
    uint64_t n = std::min(end, stripe_end) - x;
    StripePiece p{};
    p.object_offset = object_offset_of(g, x, &p.slot);
    p.file_offset = x;
    p.length = n;
    out.push_back(p);
    x += n;
  }
  return out;
}

uint64_t object_size_for_file_size(const StripeGeometry& g, uint32_t slot, uint64_t file_size) {
  if (file_size == 0) return 0;
  // Full rounds of stripes across all slots, then the partial round.
  uint64_t round = g.stripe_size * g.stripe_count;
  uint64_t full_rounds = file_size / round;
  uint64_t rest = file_size % round;
  uint64_t size = full_rounds * g.stripe_size;
  uint64_t slot_start = static_cast<uint64_t>(slot) * g.stripe_size;
  if (rest > slot_start) size += std::min<uint64_t>(rest - slot_start, g.stripe_size);
  return size;
}

std::pair<uint64_t, uint64_t> object_range_of(const StripeGeometry& g, uint32_t slot, uint64_t offset,
                                              uint64_t length) {
  // The slot's bytes before x are exactly where its next byte at or after x
  // lives in its object.
  return {object_size_for_file_size(g, slot, offset), object_size_for_file_size(g, slot, offset + length)};
}

uint64_t file_end_of_object(const StripeGeometry& g, uint32_t slot, uint64_t object_size) {
  if (object_size == 0) return 0;
  uint64_t last = object_size - 1;  // object offset of the last byte
  uint64_t stripe_in_object = last / g.stripe_size;
  uint64_t file_stripe = stripe_in_object * g.stripe_count + slot;
  return file_stripe * g.stripe_size + last % g.stripe_size + 1;
}

}  // namespace surge
