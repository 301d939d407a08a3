// encode_rows: see row_encode.h.
#include "common/ec/row_encode.h"

namespace surge::ec {

Result<std::vector<std::unique_ptr<std::byte[]>>> encode_rows(const RsCodec& codec,
                                                              std::span<const RowSources> rows,
                                                              uint64_t run_length) {
  const uint32_t k = codec.k(), m = codec.m();
  std::vector<std::unique_ptr<std::byte[]>> parity(m);
  // Encode writes every byte of each row's range, and the rows tile the run.
  for (auto& p : parity) p.reset(new std::byte[run_length]);
  std::vector<const uint8_t*> in(k);
  std::vector<uint8_t*> out(m);
  for (const RowSources& row : rows) {
    if (row.data.size() != k || row.offset > run_length || row.length > run_length - row.offset) {
      return Status::InvalidArgument(
          "encode of a " + codec.name() + " row of " + std::to_string(row.data.size()) +
          " data ranges at [" + std::to_string(row.offset) + ", +" + std::to_string(row.length) +
          ") of a run of " + std::to_string(run_length) + " bytes");
    }
    for (uint32_t i = 0; i < k; ++i) in[i] = reinterpret_cast<const uint8_t*>(row.data[i]);
    for (uint32_t j = 0; j < m; ++j) {
      out[j] = reinterpret_cast<uint8_t*>(parity[j].get() + row.offset);
    }
    SURGE_RETURN_IF_ERROR(codec.Encode(in, out, row.length));
  }
  return parity;
}

}  // namespace surge::ec
