// Wire framing: the fixed little-endian frame header, bulk descriptors, and
// every hard limit of the protocol, in one place. net/proto/README.md is the
// prose version of this file; keep the two in step.
//
// A frame on the wire is:
//   FrameHeader (kFrameHeaderSize bytes, little-endian)
//   body        (header.body_length bytes: a protobuf message, or for an
//                error response the Status message text)
//   descriptors (header.descriptor_count * kBulkDescriptorSize bytes)
//   payload     (header.payload_length bytes, stream transports only: the
//                pulled regions after a request, the data of a bulk-data frame)
// Invariant: decode_header() accepts only headers whose every length is
// within the limits below, so a reader never sizes a buffer from an
// unchecked peer value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "net/bulk.h"

namespace surge::net {

inline constexpr uint32_t kFrameMagic = 0x31475253;  // "SRG1" as LE bytes
inline constexpr uint8_t kProtocolVersion = 1;
inline constexpr size_t kFrameHeaderSize = 48;
inline constexpr size_t kBulkDescriptorSize = 24;

// Hard limits. A frame over any of them is a ProtocolError and closes the
// connection.
inline constexpr uint32_t kMaxBodyLength = 16u << 20;           // 16 MiB
inline constexpr uint16_t kMaxDescriptors = 64;                 // per request
inline constexpr uint64_t kMaxRegionLength = 1ull << 30;        // 1 GiB per region
inline constexpr uint64_t kMaxBulkPerRequest = 1ull << 30;      // all regions of one request
inline constexpr uint64_t kMaxPayloadLength = kMaxBulkPerRequest;

enum class FrameType : uint8_t {
  kRequest = 1,    // client -> server: call (service, method, request_id)
  kResponse = 2,   // server -> client: status + body for request_id
  kBulkData = 3,   // server -> client: push bytes into region `region` at `offset`
  kHello = 4,      // handshake 1, client -> server: client nonce
  kChallenge = 5,  // handshake 2, server -> client: server nonce, credits
  kProof = 6,      // handshake 3, client -> server: HMAC proof of the key
  kWelcome = 7,    // handshake 4, server -> client: server's HMAC proof
  kGoAway = 8,     // either way: status + message, then the sender closes
};
const char* frame_type_name(FrameType t);

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint8_t version = kProtocolVersion;
  FrameType type = FrameType::kRequest;
  uint16_t flags = 0;
  uint16_t service = 0;
  uint16_t method = 0;
  uint16_t status = 0;            // surge::Code of a response / go-away
  uint16_t descriptor_count = 0;  // bulk descriptors after the body
  uint32_t body_length = 0;
  uint32_t region = 0;            // bulk-data: region index of the call
  uint64_t request_id = 0;
  uint64_t payload_length = 0;    // bytes after the descriptors
  uint64_t offset = 0;            // bulk-data: byte offset in the region

  // Bytes of body and descriptors that follow the header.
  size_t trailer_length() const {
    return size_t{body_length} + size_t{descriptor_count} * kBulkDescriptorSize;
  }
};

// Writes exactly kFrameHeaderSize bytes to out.
void encode_header(const FrameHeader& h, std::byte* out);
// Parses and validates (magic, version, type, every limit). Errors are
// ProtocolError with a message that says which field and its value.
Result<FrameHeader> decode_header(std::span<const std::byte> in);

// One client memory region as the wire carries it. addr/rkey are meaningful
// to RDMA only; TCP sends zeros and identifies regions by index.
struct BulkDescriptor {
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t rkey = 0;
  BulkAccess access = BulkAccess::kServerPull;
};

void encode_descriptor(const BulkDescriptor& d, std::byte* out);
// Validates access and length limits.
Result<BulkDescriptor> decode_descriptor(std::span<const std::byte> in);
// Decodes `count` descriptors and checks the per-request total.
Result<std::vector<BulkDescriptor>> decode_descriptors(std::span<const std::byte> in,
                                                       size_t count);

// Little-endian helpers (also used by the handshake codec).
inline void put_u16(std::byte* p, uint16_t v) {
  p[0] = std::byte(v);
  p[1] = std::byte(v >> 8);
}
inline void put_u32(std::byte* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = std::byte(v >> (8 * i));
}
inline void put_u64(std::byte* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = std::byte(v >> (8 * i));
}
inline uint16_t get_u16(const std::byte* p) {
  return static_cast<uint16_t>(std::to_integer<uint16_t>(p[0]) |
                               (std::to_integer<uint16_t>(p[1]) << 8));
}
inline uint32_t get_u32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::to_integer<uint32_t>(p[i]) << (8 * i);
  return v;
}
inline uint64_t get_u64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::to_integer<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace surge::net
