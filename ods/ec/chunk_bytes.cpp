// Byte helpers of the EC code. See chunk_bytes.h.
#include "ods/ec/chunk_bytes.h"

#include <cstring>

namespace surge::ods {

Status read_range(ChunkStore& chunks, const ChunkRecord& rec, uint64_t at, std::span<std::byte> dst,
                  const std::string& what) {
  size_t done = 0;
  while (done < dst.size()) {
    auto got = chunks.objects().read(rec.object_id, at + done, dst.subspan(done));
    if (!got.ok()) return got.status().WithContext(what);
    if (*got == 0) break;
    done += *got;
  }
  if (done < dst.size()) std::memset(dst.data() + done, 0, dst.size() - done);
  return Status::OK();
}

void xor_into(std::byte* dst, const std::byte* src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t a, b;
    std::memcpy(&a, dst + i, 8);
    std::memcpy(&b, src + i, 8);
    a ^= b;
    std::memcpy(dst + i, &a, 8);
  }
  for (; i < n; ++i) dst[i] ^= src[i];
}

}  // namespace surge::ods
