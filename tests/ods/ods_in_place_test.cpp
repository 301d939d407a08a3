// Writes whose payload a raw client holds back.
//
// The TCP transport runs brief ODS handlers (read, write, stat, statfs) in
// place on its I/O thread when that thread has nothing else in service and
// the request's payload has arrived (net/tcp/tcp_server.cpp). These tests
// check the other half of that promise: a write whose payload stalls is
// served by a worker, so the thread's other connections go on being
// served, and the stalled write still completes once its bytes arrive.
// The daemon runs with one I/O thread, so every connection shares it.
//
// A write stored piece by piece while its payload arrives, that then fails
// (a bad piece), must not take back more than its own extension: another
// writer's acknowledged bytes before its offset stay.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>

#include "net/auth.h"
#include "net/frame.h"
#include "net/proto/ods_write_pieces.h"
#include "tests/ods/ods_fixture.h"

namespace surge::ods::testing {
namespace {

using std::chrono::milliseconds;

// Just enough of a TCP client to send a request and hold back its payload.
class RawOdsConn {
 public:
  RawOdsConn(const std::string& host, uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    int one = 1;  // no Nagle delay: each send leaves at once
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~RawOdsConn() {
    if (fd_ >= 0) ::close(fd_);
  }

  Status handshake(const std::string& key) {
    if (!connected_) return Status::Unavailable("raw connect failed");
    net::Nonce nc = net::make_nonce();
    net::FrameHeader h;
    h.type = net::FrameType::kHello;
    h.body_length = net::kNonceSize;
    SURGE_RETURN_IF_ERROR(send_frame(h, nc.data(), nc.size()));
    SURGE_ASSIGN_OR_RETURN(auto challenge, read_frame());
    if (challenge.first.type != net::FrameType::kChallenge ||
        challenge.second.size() != net::kChallengeBodySize) {
      return Status::ProtocolError("raw client: no challenge");
    }
    net::Nonce ns;
    std::memcpy(ns.data(), challenge.second.data(), net::kNonceSize);
    net::Proof p = net::client_proof(key, ns, nc);
    h.type = net::FrameType::kProof;
    h.body_length = net::kProofSize;
    SURGE_RETURN_IF_ERROR(send_frame(h, p.data(), p.size()));
    SURGE_ASSIGN_OR_RETURN(auto welcome, read_frame());
    if (welcome.first.type != net::FrameType::kWelcome)
      return Status::ProtocolError("raw client: no welcome");
    return Status::OK();
  }

  // A write request for `data` with only its first `sent` payload bytes.
  Status send_write(uint64_t request_id, uint64_t object, std::span<const std::byte> data,
                    size_t sent) {
    pb::WriteRequest q;
    q.set_object_id(object);
    q.set_offset(0);
    q.set_length(data.size());
    q.set_crc32c(surge::crc32c(data.data(), data.size()));
    return send_write(request_id, q, data, sent);
  }

  // The request q (its length is data's) with only `sent` payload bytes.
  Status send_write(uint64_t request_id, const pb::WriteRequest& q,
                    std::span<const std::byte> data, size_t sent) {
    std::string body = q.SerializeAsString();
    net::BulkDescriptor d;
    d.length = data.size();
    d.access = net::BulkAccess::kServerPull;
    std::byte desc[net::kBulkDescriptorSize];
    net::encode_descriptor(d, desc);
    net::FrameHeader h;
    h.type = net::FrameType::kRequest;
    h.service = pb::OdsWrite::kService;
    h.method = pb::OdsWrite::kMethod;
    h.request_id = request_id;
    h.body_length = static_cast<uint32_t>(body.size());
    h.descriptor_count = 1;
    h.payload_length = data.size();
    // One send, so the server sees the whole request at once.
    std::string frame(net::kFrameHeaderSize, '\0');
    net::encode_header(h, reinterpret_cast<std::byte*>(frame.data()));
    frame += body;
    frame.append(reinterpret_cast<const char*>(desc), sizeof desc);
    frame.append(reinterpret_cast<const char*>(data.data()), sent);
    return send_bytes(frame.data(), frame.size());
  }

  Status send_bytes(const void* p, size_t n) {
    const auto* b = static_cast<const char*>(p);
    while (n > 0) {
      ssize_t k = ::send(fd_, b, n, MSG_NOSIGNAL);
      if (k <= 0) return Status::Disconnected("raw client: send failed");
      b += k;
      n -= static_cast<size_t>(k);
    }
    return Status::OK();
  }

  // The next frame (header and body), within 10 s.
  Result<std::pair<net::FrameHeader, std::string>> read_frame() {
    std::byte hdr[net::kFrameHeaderSize];
    SURGE_RETURN_IF_ERROR(read_exact(hdr, sizeof hdr));
    SURGE_ASSIGN_OR_RETURN(net::FrameHeader h, net::decode_header(hdr));
    std::string body(h.body_length, '\0');
    SURGE_RETURN_IF_ERROR(read_exact(reinterpret_cast<std::byte*>(body.data()), body.size()));
    return std::make_pair(h, std::move(body));
  }

 private:
  Status send_frame(const net::FrameHeader& h, const void* body, size_t len) {
    std::byte hdr[net::kFrameHeaderSize];
    net::encode_header(h, hdr);
    SURGE_RETURN_IF_ERROR(send_bytes(hdr, sizeof hdr));
    return send_bytes(body, len);
  }

  Status read_exact(std::byte* dst, size_t n) {
    while (n > 0) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 10000) <= 0) return Status::TimedOut("raw client: no reply within 10 s");
      ssize_t k = ::recv(fd_, dst, n, 0);
      if (k <= 0) return Status::Disconnected("raw client: connection closed");
      dst += k;
      n -= static_cast<size_t>(k);
    }
    return Status::OK();
  }

  int fd_ = -1;
  bool connected_ = false;
};

class OdsInPlaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_file_ = make_key(dir_);
    // TCP on loopback whatever the suite's transport: the raw client below
    // speaks the TCP framing.
    std::string line =
        ods_.start(build_dir() + "/ods/surge-ods",
                   {"--data-dir", dir_.path() + "/data", "--listen", "tcp://127.0.0.1:0", "--mds",
                    "", "--cluster-key-file", key_file_, "--log-level", "info", "--io-threads", "1",
                    "--pool-1m-buffers", "8", "--pool-64k-buffers", "16"},
                   dir_.path() + "/ods.log");
    address_ = address_of(line);
    ASSERT_FALSE(address_.empty()) << line;
    port_ = static_cast<uint16_t>(std::stoi(address_.substr(address_.rfind(':') + 1)));
  }
  void TearDown() override { ods_.stop(); }

  TempDir dir_;
  std::string key_file_;
  DaemonProcess ods_;
  std::string address_;
  uint16_t port_ = 0;
};

TEST_F(OdsInPlaceTest, StalledWritePayloadDoesNotHoldUpOtherConnections) {
  RawOdsConn stalled("127.0.0.1", port_);
  ASSERT_TRUE(stalled.handshake(key_of(key_file_)).ok());
  const auto data = pattern(256 << 10, 41);
  ASSERT_TRUE(stalled.send_write(1, 1, data, 1000).ok());  // the rest is held back

  // Another client on the same (only) I/O thread: connects, writes, reads.
  // Each call gives up after 5 s, well before the server's own 30 s stall
  // limit would free the thread.
  std::unique_ptr<OdsClient> other;
  try {
    other = std::make_unique<OdsClient>(address_, key_of(key_file_), milliseconds(5000));
  } catch (const std::exception& e) {
    FAIL() << "second client cannot connect while a payload stalls: " << e.what();
  }
  const auto mine = pattern(100000, 42);
  auto w = other->write(2, 0, mine);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  auto r = other->read(2, 0, mine.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, mine);

  // The stalled write completes once its bytes arrive, with the right data.
  ASSERT_TRUE(stalled.send_bytes(data.data() + 1000, data.size() - 1000).ok());
  auto reply = stalled.read_frame();
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->first.type, net::FrameType::kResponse);
  EXPECT_EQ(reply->first.status, 0) << reply->second;
  auto back = other->read(1, 0, data.size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, data);
}

TEST_F(OdsInPlaceTest, FailedPiecewiseWriteKeepsAnotherWritersBytesBeforeItsOffset) {
  // A writes [1 MiB, 1.75 MiB) of an empty object in 256 KiB pieces and
  // holds its third piece back after two are stored; B then writes and is
  // acknowledged for [0, 1 MiB); A's third piece fails its CRC. Undoing A's
  // extension must stop at A's offset, not at the empty object A began on.
  constexpr uint64_t kPiece = pb::kWritePieceBytes;
  constexpr uint64_t kOff = 1 << 20;
  RawOdsConn a("127.0.0.1", port_);
  ASSERT_TRUE(a.handshake(key_of(key_file_)).ok());
  const auto data = pattern(3 * kPiece, 51);
  pb::WriteRequest q;
  q.set_object_id(7);
  q.set_offset(kOff);
  q.set_length(data.size());
  pb::set_piece_crcs(q, data.data(), data.size());
  q.set_piece_crc32c(2, q.piece_crc32c(2) ^ 1);
  ASSERT_TRUE(a.send_write(1, q, data, 2 * kPiece).ok());

  OdsClient b(address_, key_of(key_file_), milliseconds(5000));
  // A's two pieces are stored while its third is awaited.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  uint64_t size = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    auto st = b.stat(7);
    if (st.ok() && (size = *st) == kOff + 2 * kPiece) break;
    std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_EQ(size, kOff + 2 * kPiece) << "A's first two pieces were not stored in time";
  const auto mine = pattern(kOff, 52);
  auto w = b.write(7, 0, mine);
  ASSERT_TRUE(w.ok()) << w.status().ToString();

  ASSERT_TRUE(a.send_bytes(data.data() + 2 * kPiece, kPiece).ok());
  auto reply = a.read_frame();
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->first.status, static_cast<uint16_t>(Code::kCorruption)) << reply->second;

  auto back = b.read(7, 0, kOff);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, mine) << "B's acknowledged write was cut";
  auto st = b.stat(7);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(*st, kOff) << "A's own extension is undone, down to its offset";
}

}  // namespace
}  // namespace surge::ods::testing
