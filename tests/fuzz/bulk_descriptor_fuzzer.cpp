// Fuzzes the bulk descriptor codec (net/frame.h): the regions a request
// claims, which a data server then pulls from or pushes into. Accepted
// descriptors must be within the per-region and per-request limits, carry
// a known access kind, and encode back to the same bytes (zero padding).
#include <cstdlib>
#include <cstring>

#include "net/frame.h"
#include "tests/fuzz/fuzz_support.h"

using namespace surge;
using namespace surge::net;

namespace {

#define FUZZ_CHECK(cond)                                                         \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::fprintf(stderr, "bulk_descriptor_fuzzer: check failed: %s\n", #cond); \
      std::abort();                                                              \
    }                                                                            \
  } while (0)

void write_seeds(const std::string& dir) {
  auto seed = [&](const char* name, const std::vector<BulkDescriptor>& ds) {
    std::string out(1, static_cast<char>(ds.size()));
    for (const auto& d : ds) {
      std::byte b[kBulkDescriptorSize];
      encode_descriptor(d, b);
      out.append(reinterpret_cast<const char*>(b), sizeof b);
    }
    fuzz::write_seed(dir, name, out);
  };
  seed("one_pull", {{0, 1 << 20, 0, BulkAccess::kServerPull}});
  seed("one_push_rdma", {{0x7f0000001000, 65536, 0x1234, BulkAccess::kServerPush}});
  seed("pull_and_push", {{0, 4096, 0, BulkAccess::kServerPull}, {0, 8192, 0, BulkAccess::kServerPush}});
  seed("at_the_limit", {{0, kMaxRegionLength, 0, BulkAccess::kServerPull}});
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::maybe_write_seeds(write_seeds);
  return 0;
}

// Input: u8 descriptor count (as the header's, up to 255 so counts over
// the limit are tried), then the descriptor bytes.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t count = data[0];
  const size_t n = size - 1;
  std::unique_ptr<std::byte[]> buf(new std::byte[n]);
  if (n > 0) std::memcpy(buf.get(), data + 1, n);
  auto ds = decode_descriptors({buf.get(), n}, count);
  if (!ds.ok()) {
    FUZZ_CHECK(ds.status().code() == Code::kProtocolError);
    return 0;
  }
  FUZZ_CHECK(ds->size() == count && count <= kMaxDescriptors);
  uint64_t total = 0;
  for (size_t i = 0; i < ds->size(); ++i) {
    const BulkDescriptor& d = (*ds)[i];
    FUZZ_CHECK(d.access == BulkAccess::kServerPull || d.access == BulkAccess::kServerPush);
    FUZZ_CHECK(d.length <= kMaxRegionLength);
    total += d.length;
    std::byte again[kBulkDescriptorSize];
    encode_descriptor(d, again);
    const std::byte* orig = buf.get() + i * kBulkDescriptorSize;
    FUZZ_CHECK(std::memcmp(again, orig, 21) == 0);  // the padding is not checked on decode
    auto one = decode_descriptor({again, sizeof again});
    FUZZ_CHECK(one.ok() && one->length == d.length && one->addr == d.addr && one->rkey == d.rkey);
  }
  FUZZ_CHECK(total <= kMaxBulkPerRequest);
  return 0;
}
