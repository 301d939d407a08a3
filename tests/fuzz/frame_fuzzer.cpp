// Fuzzes the frame header codec (net/frame.h), the first thing a peer's
// bytes meet on every transport: decode_header must refuse or accept
// without reading past its input, and whatever it accepts must be within
// every limit and survive an encode/decode round trip unchanged.
#include <cstdlib>
#include <cstring>

#include "net/frame.h"
#include "tests/fuzz/fuzz_support.h"

using namespace surge;
using namespace surge::net;

namespace {

void write_seeds(const std::string& dir) {
  auto seed = [&](const char* name, const FrameHeader& h) {
    std::byte b[kFrameHeaderSize];
    encode_header(h, b);
    fuzz::write_seed(dir, name, {reinterpret_cast<const char*>(b), sizeof b});
  };
  FrameHeader h;
  h.type = FrameType::kHello;
  h.body_length = 32;  // a nonce
  seed("hello", h);
  h = {};
  h.type = FrameType::kRequest;
  h.service = 3;
  h.method = 1;
  h.body_length = 40;
  h.descriptor_count = 1;
  h.payload_length = 4096;
  h.request_id = 7;
  seed("request_with_pull", h);
  h = {};
  h.type = FrameType::kBulkData;
  h.region = 0;
  h.offset = 65536;
  h.payload_length = 65536;
  seed("bulk_data", h);
  h = {};
  h.type = FrameType::kGoAway;
  h.status = 16;
  h.body_length = 12;
  seed("go_away", h);
}

#define FUZZ_CHECK(cond)                                                  \
  do {                                                                    \
    if (!(cond)) {                                                        \
      std::fprintf(stderr, "frame_fuzzer: check failed: %s\n", #cond);    \
      std::abort();                                                       \
    }                                                                     \
  } while (0)

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::maybe_write_seeds(write_seeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The exact input, in its own allocation: ASan sees any read past it.
  std::unique_ptr<std::byte[]> buf(new std::byte[size]);
  if (size > 0) std::memcpy(buf.get(), data, size);
  Result<FrameHeader> h = decode_header({buf.get(), size});
  if (!h.ok()) {
    FUZZ_CHECK(h.status().code() == Code::kProtocolError);
    return 0;
  }
  FUZZ_CHECK(size >= kFrameHeaderSize);
  FUZZ_CHECK(h->body_length <= kMaxBodyLength);
  FUZZ_CHECK(h->descriptor_count <= kMaxDescriptors);
  FUZZ_CHECK(h->descriptor_count == 0 || h->type == FrameType::kRequest);
  FUZZ_CHECK(h->payload_length <= kMaxPayloadLength);
  FUZZ_CHECK(h->trailer_length() <= kMaxBodyLength + kMaxDescriptors * kBulkDescriptorSize);
  if (h->type == FrameType::kBulkData) FUZZ_CHECK(h->offset + h->payload_length <= kMaxRegionLength);
  std::byte again[kFrameHeaderSize];
  encode_header(*h, again);
  FUZZ_CHECK(std::memcmp(again, buf.get(), kFrameHeaderSize) == 0);
  Result<FrameHeader> h2 = decode_header({again, sizeof again});
  FUZZ_CHECK(h2.ok());
  FUZZ_CHECK(h2->request_id == h->request_id && h2->offset == h->offset &&
             h2->payload_length == h->payload_length && h2->region == h->region);
  // What follows the header: the descriptors a request says it carries.
  std::span<const std::byte> after(buf.get() + kFrameHeaderSize, size - kFrameHeaderSize);
  if (h->descriptor_count > 0 && after.size() >= h->body_length) {
    (void)decode_descriptors(after.subspan(h->body_length), h->descriptor_count);
  }
  (void)frame_type_name(h->type);
  return 0;
}
