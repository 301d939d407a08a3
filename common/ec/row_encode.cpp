// encode_rows: see row_encode.h.
#include "common/ec/row_encode.h"

namespace surge::ec {

Status encode_rows(const RsCodec& codec, std::span<const RowSources> rows, uint64_t run_length,
                   std::span<std::byte* const> parity) {
  const uint32_t k = codec.k(), m = codec.m();
  if (parity.size() != m) {
    return Status::InvalidArgument("encode of a " + codec.name() + " run into " +
                                   std::to_string(parity.size()) + " parity buffers");
  }
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
      out[j] = reinterpret_cast<uint8_t*>(parity[j] + row.offset);
    }
    SURGE_RETURN_IF_ERROR(codec.Encode(in, out, row.length));
  }
  return Status::OK();
}

}  // namespace surge::ec
