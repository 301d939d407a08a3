// Byte helpers shared by the EC code of a data server: a chunk's range
// read with zeros past its end, and the XOR that makes and applies a
// delta.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"
#include "ods/store/chunk_store.h"

namespace surge::ods {

// [at, at + dst.size()) of rec's bytes; zeros past its end.
Status read_range(ChunkStore& chunks, const ChunkRecord& rec, uint64_t at, std::span<std::byte> dst,
                  const std::string& what);

// dst ^= src over n bytes.
void xor_into(std::byte* dst, const std::byte* src, size_t n);

}  // namespace surge::ods
