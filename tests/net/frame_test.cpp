// Frame codec: round trips, and a table of malformed headers each of which
// must be refused with ProtocolError (the fuzz-style header table). Also the
// address parser, the auth proofs and the message codec of the test schema.
#include <gtest/gtest.h>

#include <functional>

#include "net/auth.h"
#include "net/frame.h"
#include "net/proto/test_methods.h"
#include "net/rpc_server.h"
#include "net/transport.h"

namespace surge::net {
namespace {

FrameHeader sample() {
  FrameHeader h;
  h.type = FrameType::kResponse;
  h.flags = 0xa55a;
  h.service = 3;
  h.method = 0x1234;
  h.status = static_cast<uint16_t>(Code::kNoSpace);
  h.descriptor_count = 0;
  h.body_length = 77;
  h.region = 0;
  h.request_id = 0x0102030405060708ull;
  h.payload_length = 0;
  h.offset = 0;
  return h;
}

TEST(FrameHeader, RoundTripKeepsEveryField) {
  FrameHeader h = sample();
  std::byte buf[kFrameHeaderSize];
  encode_header(h, buf);
  auto d = decode_header(buf);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->type, h.type);
  EXPECT_EQ(d->flags, h.flags);
  EXPECT_EQ(d->service, h.service);
  EXPECT_EQ(d->method, h.method);
  EXPECT_EQ(d->status, h.status);
  EXPECT_EQ(d->body_length, h.body_length);
  EXPECT_EQ(d->request_id, h.request_id);
}

TEST(FrameHeader, BulkDataRoundTrip) {
  FrameHeader h;
  h.type = FrameType::kBulkData;
  h.request_id = 9;
  h.region = 3;
  h.offset = 123456789;
  h.payload_length = 4096;
  std::byte buf[kFrameHeaderSize];
  encode_header(h, buf);
  auto d = decode_header(buf);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->region, 3u);
  EXPECT_EQ(d->offset, 123456789u);
  EXPECT_EQ(d->payload_length, 4096u);
}

TEST(FrameHeader, IsLittleEndianOnTheWire) {
  FrameHeader h;
  h.request_id = 0x0102030405060708ull;
  std::byte buf[kFrameHeaderSize];
  encode_header(h, buf);
  EXPECT_EQ(std::to_integer<int>(buf[0]), 'S');
  EXPECT_EQ(std::to_integer<int>(buf[1]), 'R');
  EXPECT_EQ(std::to_integer<int>(buf[2]), 'G');
  EXPECT_EQ(std::to_integer<int>(buf[3]), '1');
  EXPECT_EQ(std::to_integer<int>(buf[24]), 0x08);
  EXPECT_EQ(std::to_integer<int>(buf[31]), 0x01);
}

struct BadHeaderCase {
  const char* name;
  std::function<void(std::byte*)> corrupt;
  const char* message_part;
};

class BadHeader : public ::testing::TestWithParam<BadHeaderCase> {};

TEST_P(BadHeader, IsAProtocolError) {
  FrameHeader h;
  h.type = FrameType::kRequest;
  std::byte buf[kFrameHeaderSize];
  encode_header(h, buf);
  GetParam().corrupt(buf);
  auto d = decode_header(buf);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kProtocolError);
  EXPECT_NE(d.status().message().find(GetParam().message_part), std::string::npos)
      << d.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadHeader,
    ::testing::Values(
        BadHeaderCase{"magic", [](std::byte* b) { b[0] = std::byte{'X'}; }, "magic"},
        BadHeaderCase{"version0", [](std::byte* b) { b[4] = std::byte{0}; }, "version"},
        BadHeaderCase{"version2", [](std::byte* b) { b[4] = std::byte{2}; }, "version"},
        BadHeaderCase{"type0", [](std::byte* b) { b[5] = std::byte{0}; }, "frame type"},
        BadHeaderCase{"type200", [](std::byte* b) { b[5] = std::byte{200}; }, "frame type"},
        BadHeaderCase{"body",
                      [](std::byte* b) { put_u32(b + 16, kMaxBodyLength + 1); }, "body length"},
        BadHeaderCase{"body_max", [](std::byte* b) { put_u32(b + 16, 0xffffffffu); },
                      "body length"},
        BadHeaderCase{"descriptors",
                      [](std::byte* b) { put_u16(b + 14, kMaxDescriptors + 1); }, "descriptor"},
        BadHeaderCase{"payload",
                      [](std::byte* b) { put_u64(b + 32, kMaxPayloadLength + 1); }, "payload"},
        BadHeaderCase{"descriptors_on_response",
                      [](std::byte* b) {
                        b[5] = std::byte{2};
                        put_u16(b + 14, 1);
                      },
                      "descriptors on a response"},
        BadHeaderCase{"bulk_past_region",
                      [](std::byte* b) {
                        b[5] = std::byte{3};
                        put_u64(b + 40, kMaxRegionLength);
                        put_u64(b + 32, 1);
                      },
                      "past the region"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(FrameHeader, TruncatedHeaderIsAProtocolError) {
  std::byte buf[kFrameHeaderSize] = {};
  encode_header(FrameHeader{}, buf);
  for (size_t n = 0; n < kFrameHeaderSize; n += 7) {
    auto d = decode_header({buf, n});
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), Code::kProtocolError);
  }
}

TEST(FrameHeader, EveryRequestSizedFieldAtItsLimitIsAccepted) {
  FrameHeader h;
  h.body_length = kMaxBodyLength;
  h.descriptor_count = kMaxDescriptors;
  h.payload_length = kMaxPayloadLength;
  std::byte buf[kFrameHeaderSize];
  encode_header(h, buf);
  EXPECT_TRUE(decode_header(buf).ok());
}

TEST(BulkDescriptor, RoundTrip) {
  BulkDescriptor d{0xdeadbeef00ull, 1234567, 0x42, BulkAccess::kServerPush};
  std::byte buf[kBulkDescriptorSize];
  encode_descriptor(d, buf);
  auto r = decode_descriptor(buf);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->addr, d.addr);
  EXPECT_EQ(r->length, d.length);
  EXPECT_EQ(r->rkey, d.rkey);
  EXPECT_EQ(r->access, d.access);
}

TEST(BulkDescriptor, BadAccessIsRefused) {
  BulkDescriptor d;
  std::byte buf[kBulkDescriptorSize];
  encode_descriptor(d, buf);
  buf[20] = std::byte{7};
  EXPECT_EQ(decode_descriptor(buf).status().code(), Code::kProtocolError);
}

TEST(BulkDescriptor, RegionOverLimitIsRefused) {
  BulkDescriptor d;
  d.length = kMaxRegionLength + 1;
  std::byte buf[kBulkDescriptorSize];
  encode_descriptor(d, buf);
  EXPECT_EQ(decode_descriptor(buf).status().code(), Code::kProtocolError);
}

TEST(BulkDescriptor, TotalOverLimitIsRefused) {
  std::vector<std::byte> buf(3 * kBulkDescriptorSize);
  for (int i = 0; i < 3; ++i) {
    BulkDescriptor d;
    d.length = kMaxBulkPerRequest / 2;
    encode_descriptor(d, buf.data() + i * kBulkDescriptorSize);
  }
  EXPECT_TRUE(decode_descriptors({buf.data(), 2 * kBulkDescriptorSize}, 2).ok());
  EXPECT_EQ(decode_descriptors(buf, 3).status().code(), Code::kProtocolError);
}

TEST(BulkDescriptor, TruncatedListIsRefused) {
  std::vector<std::byte> buf(kBulkDescriptorSize);
  EXPECT_EQ(decode_descriptors(buf, 2).status().code(), Code::kProtocolError);
}

TEST(Endpoint, ParsesSchemes) {
  auto a = parse_endpoint("tcp://127.0.0.1:4000");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kind, TransportKind::kTcp);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 4000);
  auto b = parse_endpoint("rdma://10.99.0.1:7");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->kind, TransportKind::kRdma);
  auto c = parse_endpoint("localhost:0");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, TransportKind::kTcp);
  EXPECT_EQ(c->to_string(), "tcp://localhost:0");
  auto d = parse_endpoint("[::1]:99");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->host, "::1");
  EXPECT_EQ(d->to_string(), "tcp://[::1]:99");
}

TEST(Endpoint, RefusesBadAddresses) {
  for (const char* bad : {"", "host", "udp://h:1", "h:", ":5", "h:70000", "h:12x", "[::1:5"}) {
    EXPECT_EQ(parse_endpoint(bad).status().code(), Code::kInvalidArgument) << bad;
  }
}

TEST(Auth, ProofsDependOnKeyAndBothNonces) {
  Nonce a = make_nonce();
  Nonce b = make_nonce();
  EXPECT_NE(a, b);
  Proof p = client_proof("k1", a, b);
  EXPECT_TRUE(proofs_equal(p, client_proof("k1", a, b)));
  EXPECT_FALSE(proofs_equal(p, client_proof("k2", a, b)));
  EXPECT_FALSE(proofs_equal(p, client_proof("k1", b, a)));
  // Client and server proofs differ: one cannot be replayed as the other.
  EXPECT_FALSE(proofs_equal(client_proof("k1", a, b), server_proof("k1", b, a)));
}

TEST(MessageCodec, TestSchemaRoundTrips) {
  proto::test::EchoRequest req;
  req.set_payload(std::string("a\0b", 3));
  req.set_sleep_ms(7);
  req.set_fail_code(2);
  req.set_fail_message("object 9");
  std::string bytes;
  ASSERT_TRUE(detail::serialize_message(req, bytes));
  proto::test::EchoRequest back;
  ASSERT_TRUE(detail::parse_message(back, bytes));
  EXPECT_EQ(back.payload(), req.payload());
  EXPECT_EQ(back.sleep_ms(), 7u);
  EXPECT_EQ(back.fail_message(), "object 9");

  proto::test::BulkRequest b;
  b.set_offset(1);
  b.set_length(2);
  b.set_seed(3);
  b.set_skip_checksum(true);
  b.set_sleep_ms(4);
  ASSERT_TRUE(detail::serialize_message(b, bytes));
  proto::test::BulkRequest b2;
  ASSERT_TRUE(detail::parse_message(b2, bytes));
  EXPECT_EQ(b2.offset(), 1u);
  EXPECT_EQ(b2.length(), 2u);
  EXPECT_EQ(b2.seed(), 3u);
  EXPECT_TRUE(b2.skip_checksum());
  EXPECT_EQ(b2.sleep_ms(), 4u);
}

TEST(MessageCodec, GarbageDoesNotParse) {
  proto::test::EchoRequest req;
  EXPECT_FALSE(detail::parse_message(req, std::string("\xff\xff\xff\xff\xff", 5)));
}

}  // namespace
}  // namespace surge::net
