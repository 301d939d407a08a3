// Frame header and descriptor codec; see net/frame.h for the layout.
#include "net/frame.h"

#include <cstdio>
#include <string>

namespace surge::net {

const char* frame_type_name(FrameType t) {
  switch (t) {
    case FrameType::kRequest: return "request";
    case FrameType::kResponse: return "response";
    case FrameType::kBulkData: return "bulk-data";
    case FrameType::kHello: return "hello";
    case FrameType::kChallenge: return "challenge";
    case FrameType::kProof: return "proof";
    case FrameType::kWelcome: return "welcome";
    case FrameType::kGoAway: return "go-away";
  }
  return "unknown";
}

// Byte offsets of the header fields (the table in net/proto/README.md).
namespace {
constexpr size_t kOffMagic = 0;
constexpr size_t kOffVersion = 4;
constexpr size_t kOffType = 5;
constexpr size_t kOffFlags = 6;
constexpr size_t kOffService = 8;
constexpr size_t kOffMethod = 10;
constexpr size_t kOffStatus = 12;
constexpr size_t kOffDescCount = 14;
constexpr size_t kOffBodyLen = 16;
constexpr size_t kOffRegion = 20;
constexpr size_t kOffRequestId = 24;
constexpr size_t kOffPayloadLen = 32;
constexpr size_t kOffOffset = 40;
static_assert(kOffOffset + 8 == kFrameHeaderSize);
}  // namespace

void encode_header(const FrameHeader& h, std::byte* out) {
  put_u32(out + kOffMagic, h.magic);
  out[kOffVersion] = std::byte(h.version);
  out[kOffType] = std::byte(static_cast<uint8_t>(h.type));
  put_u16(out + kOffFlags, h.flags);
  put_u16(out + kOffService, h.service);
  put_u16(out + kOffMethod, h.method);
  put_u16(out + kOffStatus, h.status);
  put_u16(out + kOffDescCount, h.descriptor_count);
  put_u32(out + kOffBodyLen, h.body_length);
  put_u32(out + kOffRegion, h.region);
  put_u64(out + kOffRequestId, h.request_id);
  put_u64(out + kOffPayloadLen, h.payload_length);
  put_u64(out + kOffOffset, h.offset);
}

Result<FrameHeader> decode_header(std::span<const std::byte> in) {
  if (in.size() < kFrameHeaderSize) {
    return Status::ProtocolError("truncated frame header: " + std::to_string(in.size()) +
                                 " of " + std::to_string(kFrameHeaderSize) + " bytes");
  }
  const std::byte* p = in.data();
  FrameHeader h;
  h.magic = get_u32(p + kOffMagic);
  if (h.magic != kFrameMagic) {
    return Status::ProtocolError("bad frame magic 0x" + [&] {
      char buf[16];
      snprintf(buf, sizeof buf, "%08x", h.magic);
      return std::string(buf);
    }());
  }
  h.version = std::to_integer<uint8_t>(p[kOffVersion]);
  if (h.version != kProtocolVersion) {
    return Status::ProtocolError("unsupported protocol version " + std::to_string(h.version) +
                                 " (this build speaks " + std::to_string(kProtocolVersion) + ")");
  }
  uint8_t type = std::to_integer<uint8_t>(p[kOffType]);
  if (type < static_cast<uint8_t>(FrameType::kRequest) ||
      type > static_cast<uint8_t>(FrameType::kGoAway)) {
    return Status::ProtocolError("unknown frame type " + std::to_string(type));
  }
  h.type = static_cast<FrameType>(type);
  h.flags = get_u16(p + kOffFlags);
  h.service = get_u16(p + kOffService);
  h.method = get_u16(p + kOffMethod);
  h.status = get_u16(p + kOffStatus);
  h.descriptor_count = get_u16(p + kOffDescCount);
  h.body_length = get_u32(p + kOffBodyLen);
  h.region = get_u32(p + kOffRegion);
  h.request_id = get_u64(p + kOffRequestId);
  h.payload_length = get_u64(p + kOffPayloadLen);
  h.offset = get_u64(p + kOffOffset);
  if (h.body_length > kMaxBodyLength) {
    return Status::ProtocolError("frame body length " + std::to_string(h.body_length) +
                                 " over the limit " + std::to_string(kMaxBodyLength));
  }
  if (h.descriptor_count > kMaxDescriptors) {
    return Status::ProtocolError("bulk descriptor count " + std::to_string(h.descriptor_count) +
                                 " over the limit " + std::to_string(kMaxDescriptors));
  }
  if (h.descriptor_count != 0 && h.type != FrameType::kRequest) {
    return Status::ProtocolError(std::string("bulk descriptors on a ") + frame_type_name(h.type) +
                                 " frame");
  }
  if (h.payload_length > kMaxPayloadLength) {
    return Status::ProtocolError("frame payload length " + std::to_string(h.payload_length) +
                                 " over the limit " + std::to_string(kMaxPayloadLength));
  }
  if (h.type == FrameType::kBulkData &&
      (h.offset > kMaxRegionLength || h.payload_length > kMaxRegionLength - h.offset)) {
    return Status::ProtocolError("bulk-data frame [" + std::to_string(h.offset) + ", +" +
                                 std::to_string(h.payload_length) + ") past the region limit");
  }
  return h;
}

void encode_descriptor(const BulkDescriptor& d, std::byte* out) {
  put_u64(out, d.addr);
  put_u64(out + 8, d.length);
  put_u32(out + 16, d.rkey);
  out[20] = std::byte(static_cast<uint8_t>(d.access));
  out[21] = out[22] = out[23] = std::byte{0};
}

Result<BulkDescriptor> decode_descriptor(std::span<const std::byte> in) {
  if (in.size() < kBulkDescriptorSize) return Status::ProtocolError("truncated bulk descriptor");
  BulkDescriptor d;
  d.addr = get_u64(in.data());
  d.length = get_u64(in.data() + 8);
  d.rkey = get_u32(in.data() + 16);
  uint8_t access = std::to_integer<uint8_t>(in[20]);
  if (access != static_cast<uint8_t>(BulkAccess::kServerPull) &&
      access != static_cast<uint8_t>(BulkAccess::kServerPush)) {
    return Status::ProtocolError("bulk descriptor with unknown access " + std::to_string(access));
  }
  d.access = static_cast<BulkAccess>(access);
  if (d.length > kMaxRegionLength) {
    return Status::ProtocolError("bulk region length " + std::to_string(d.length) +
                                 " over the limit " + std::to_string(kMaxRegionLength));
  }
  return d;
}

Result<std::vector<BulkDescriptor>> decode_descriptors(std::span<const std::byte> in,
                                                       size_t count) {
  if (count > kMaxDescriptors) {
    return Status::ProtocolError("bulk descriptor count " + std::to_string(count) +
                                 " over the limit");
  }
  if (in.size() < count * kBulkDescriptorSize) {
    return Status::ProtocolError("truncated bulk descriptors");
  }
  std::vector<BulkDescriptor> out;
  out.reserve(count);
  uint64_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    SURGE_ASSIGN_OR_RETURN(BulkDescriptor d,
                           decode_descriptor(in.subspan(i * kBulkDescriptorSize)));
    total += d.length;
    if (total > kMaxBulkPerRequest) {
      return Status::ProtocolError("bulk regions of one request total over the limit " +
                                   std::to_string(kMaxBulkPerRequest));
    }
    out.push_back(d);
  }
  return out;
}

}  // namespace surge::net
