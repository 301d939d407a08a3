// Striping arithmetic, shared by the client (splitting IO) and the MDS
// (truncating objects). Byte x of a file lives in stripe s = x / stripe_size,
// on layout slot s % stripe_count, at object offset
// (s / stripe_count) * stripe_size + x % stripe_size. Pure functions only.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace surge {

struct StripeGeometry {
  uint64_t stripe_size = 1 << 20;
  uint32_t stripe_count = 1;
};

// A contiguous piece of a file range that lies in one stripe.
struct StripePiece {
  uint32_t slot;           // index into the layout's target list
  uint64_t object_offset;  // where the piece starts in that target's object
  uint64_t file_offset;    // where it starts in the file
  uint64_t length;
};

// Splits [offset, offset + length) at stripe boundaries, in file order.
std::vector<StripePiece> split_range(const StripeGeometry& g, uint64_t offset, uint64_t length);

// Object offset of file byte x (and its slot through *slot).
uint64_t object_offset_of(const StripeGeometry& g, uint64_t x, uint32_t* slot);

// The size slot's object has when the file is exactly file_size bytes long
// and fully written: what a truncate to file_size sets each object to.
uint64_t object_size_for_file_size(const StripeGeometry& g, uint32_t slot, uint64_t file_size);

// The range [first, second) of slot's object that holds the slot's bytes
// of the file range [offset, offset + length): a slot's stripes lie end to
// end in its object, so it is one range (empty when first == second).
std::pair<uint64_t, uint64_t> object_range_of(const StripeGeometry& g, uint32_t slot, uint64_t offset,
                                              uint64_t length);

// The file size implied by slot's object being object_size bytes long
// (the end of the last byte it holds), 0 for an empty object.
uint64_t file_end_of_object(const StripeGeometry& g, uint32_t slot, uint64_t object_size);

}  // namespace surge
