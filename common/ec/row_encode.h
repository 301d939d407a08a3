// encode_rows: the parity of a run of consecutive stripe-group rows, as a
// client's full-group write computes it while the data is in flight
// (client/lib/ec_group_write.h). Each row's K data ranges are read in place
// through pointers into the caller's buffer (no copy builds the parity
// input); the parity of the whole run lands in M buffers of the caller's,
// row r's at its offset in the run, so each parity position gets one
// contiguous range.
// ec_bench measures this against ISA-L's own encode on the same buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/ec/rs_codec.h"
#include "common/status.h"

namespace surge::ec {

struct RowSources {
  std::vector<const std::byte*> data;  // K pointers, each `length` bytes
  uint64_t offset = 0;                 // in the run
  uint64_t length = 0;
};

// Into parity: M buffers of run_length bytes at least, every byte of
// [0, run_length) written when the rows tile it.
Status encode_rows(const RsCodec& codec, std::span<const RowSources> rows, uint64_t run_length,
                   std::span<std::byte* const> parity);

}  // namespace surge::ec
