// Malformed and hostile input against a running server, over raw TCP
// sockets (TCP-only: the RDMA transport has its own wire). Every case must
// end with an error reply or a closed connection, the server must log the
// peer address with the reason, and a well-behaved client on the same
// server keeps getting answers throughout (a background thread calls echo
// the whole time and must see no failure).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "net/auth.h"
#include "net/frame.h"
#include "net/proto/test_methods.h"
#include "tests/net/hostile_peer_test.h"
#include "tests/net/net_test_util.h"

namespace surge::net::testing {
namespace {

namespace pt = surge::proto::test;
using std::chrono::milliseconds;

struct Frame {
  FrameHeader h;
  std::string body;
};

// A raw TCP client that speaks as much (or as little) of the protocol as a
// test wants.
class RawConn {
 public:
  explicit RawConn(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    sockaddr_in local{};
    socklen_t len = sizeof local;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&local), &len);
    peer_ = "tcp://127.0.0.1:" + std::to_string(ntohs(local.sin_port));
  }
  ~RawConn() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }
  // How the server names us in its log.
  const std::string& peer() const { return peer_; }

  bool send_bytes(const void* p, size_t n) {
    return ::send(fd_, p, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
  }
  bool send_frame(const FrameHeader& h, std::string_view body = {},
                  std::span<const std::byte> extra = {}) {
    std::byte hdr[kFrameHeaderSize];
    encode_header(h, hdr);
    return send_bytes(hdr, sizeof hdr) && send_bytes(body.data(), body.size()) &&
           send_bytes(extra.data(), extra.size());
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }

  // One frame, or an error when the connection closes / times out.
  Result<Frame> read_frame(milliseconds timeout) {
    std::byte hdr[kFrameHeaderSize];
    SURGE_RETURN_IF_ERROR(read_exact(hdr, sizeof hdr, timeout));
    SURGE_ASSIGN_OR_RETURN(FrameHeader h, decode_header(hdr));
    Frame f{h, std::string(h.body_length, '\0')};
    SURGE_RETURN_IF_ERROR(read_exact(reinterpret_cast<std::byte*>(f.body.data()), f.body.size(),
                                     timeout));
    return f;
  }

  // True when the server closes the connection within timeout; frames it
  // sent first are collected.
  bool wait_closed(milliseconds timeout, std::vector<Frame>* frames = nullptr) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string got;
    for (;;) {
      auto left = std::chrono::duration_cast<milliseconds>(deadline -
                                                           std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;  // closed (0) or reset
      got.append(buf, static_cast<size_t>(n));
    }
    if (frames != nullptr) {
      size_t pos = 0;
      while (got.size() - pos >= kFrameHeaderSize) {
        auto h = decode_header({reinterpret_cast<const std::byte*>(got.data() + pos),
                                kFrameHeaderSize});
        if (!h.ok() || got.size() - pos - kFrameHeaderSize < h->body_length) break;
        frames->push_back({*h, got.substr(pos + kFrameHeaderSize, h->body_length)});
        pos += kFrameHeaderSize + h->body_length;
      }
    }
    return true;
  }

  // The client half of the handshake, with any key.
  Status handshake(const std::string& key) {
    Nonce nc = make_nonce();
    FrameHeader h;
    h.type = FrameType::kHello;
    h.body_length = kNonceSize;
    if (!send_frame(h, {reinterpret_cast<const char*>(nc.data()), nc.size()})) {
      return Status::IOError("send hello");
    }
    SURGE_ASSIGN_OR_RETURN(Frame ch, read_frame(milliseconds(5000)));
    if (ch.h.type != FrameType::kChallenge) return Status::ProtocolError("no challenge");
    Nonce ns;
    std::memcpy(ns.data(), ch.body.data(), kNonceSize);
    Proof p = client_proof(key, ns, nc);
    h.type = FrameType::kProof;
    h.body_length = kProofSize;
    if (!send_frame(h, {reinterpret_cast<const char*>(p.data()), p.size()})) {
      return Status::IOError("send proof");
    }
    SURGE_ASSIGN_OR_RETURN(Frame w, read_frame(milliseconds(5000)));
    if (w.h.type == FrameType::kGoAway) return Status(static_cast<Code>(w.h.status), w.body);
    if (w.h.type != FrameType::kWelcome) return Status::ProtocolError("no welcome");
    return Status::OK();
  }

 private:
  Status read_exact(std::byte* dst, size_t n, milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (n > 0) {
      auto left = std::chrono::duration_cast<milliseconds>(deadline -
                                                           std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
        return Status::TimedOut("raw read");
      }
      ssize_t r = ::recv(fd_, dst, n, 0);
      if (r <= 0) return Status::Disconnected("raw read: closed");
      dst += r;
      n -= static_cast<size_t>(r);
    }
    return Status::OK();
  }

  int fd_ = -1;
  bool ok_ = false;
  std::string peer_;
};

class BadInputTest : public HostilePeerTest {
 protected:
  void SetUp() override { start("tcp://127.0.0.1:0", HostilePeerTiming{}); }

  std::unique_ptr<RawConn> raw(bool authenticated = true) {
    auto c = std::make_unique<RawConn>(server_->port());
    EXPECT_TRUE(c->ok());
    if (authenticated) {
      Status st = c->handshake(kTestKey);
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
    return c;
  }

  static constexpr milliseconds kCloseWait{5000};
};

TEST_F(BadInputTest, GarbageInsteadOfAHandshake) {
  auto c = raw(false);
  std::string junk = "GET / HTTP/1.1\r\nHost: surge\r\n\r\n" + std::string(64, 'x');
  ASSERT_TRUE(c->send_bytes(junk.data(), junk.size()));
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "magic"));
}

TEST_F(BadInputTest, BadMagic) {
  auto c = raw();
  std::byte hdr[kFrameHeaderSize];
  encode_header(request(), hdr);
  hdr[0] = std::byte{'Z'};
  ASSERT_TRUE(c->send_bytes(hdr, sizeof hdr));
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "magic"));
}

TEST_F(BadInputTest, WrongVersion) {
  auto c = raw();
  FrameHeader h = request();
  h.version = kProtocolVersion + 1;
  ASSERT_TRUE(c->send_frame(h));
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "version"));
}

TEST_F(BadInputTest, TruncatedHeader) {
  auto c = raw();
  std::byte hdr[kFrameHeaderSize];
  encode_header(request(), hdr);
  ASSERT_TRUE(c->send_bytes(hdr, 20));
  c->shutdown_write();
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "truncated"));
}

TEST_F(BadInputTest, TruncatedBody) {
  auto c = raw();
  FrameHeader h = request();
  h.body_length = 100;
  ASSERT_TRUE(c->send_frame(h, std::string(10, 'b')));
  c->shutdown_write();
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "truncated"));
}

TEST_F(BadInputTest, BodyOverTheLimit) {
  auto c = raw();
  FrameHeader h = request();
  h.body_length = kMaxBodyLength;  // legal...
  std::byte hdr[kFrameHeaderSize];
  encode_header(h, hdr);
  put_u32(hdr + 16, kMaxBodyLength + 1);  // ...and one byte over
  ASSERT_TRUE(c->send_bytes(hdr, sizeof hdr));
  // Refused from the header alone: no need to send 16 MiB.
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "body length"));
}

TEST_F(BadInputTest, UnknownMethodGetsAnErrorReplyAndTheConnectionLives) {
  auto c = raw();
  FrameHeader h = request(pt::kTestUnregisteredMethod);
  h.request_id = 77;
  ASSERT_TRUE(c->send_frame(h));
  auto f = c->read_frame(milliseconds(5000));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->h.type, FrameType::kResponse);
  EXPECT_EQ(f->h.request_id, 77u);
  EXPECT_EQ(static_cast<Code>(f->h.status), Code::kUnknownMethod);
  EXPECT_NE(f->body.find("99"), std::string::npos) << f->body;
  // Still served.
  pt::EchoRequest req;
  req.set_payload("raw echo");
  std::string body;
  ASSERT_TRUE(detail::serialize_message(req, body));
  h = request();
  h.request_id = 78;
  h.body_length = static_cast<uint32_t>(body.size());
  ASSERT_TRUE(c->send_frame(h, body));
  f = c->read_frame(milliseconds(5000));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->h.request_id, 78u);
  EXPECT_EQ(f->h.status, 0);
  pt::EchoReply reply;
  ASSERT_TRUE(detail::parse_message(reply, f->body));
  EXPECT_EQ(reply.payload(), "raw echo");
}

TEST_F(BadInputTest, TooManyDescriptors) {
  auto c = raw();
  std::byte hdr[kFrameHeaderSize];
  encode_header(request(), hdr);
  put_u16(hdr + 14, kMaxDescriptors + 1);
  ASSERT_TRUE(c->send_bytes(hdr, sizeof hdr));
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "descriptor count"));
}

TEST_F(BadInputTest, DescriptorRegionOverTheLimit) {
  auto c = raw();
  FrameHeader h = request(pt::TestBulkSink::kMethod);
  h.descriptor_count = 1;
  std::byte d[kBulkDescriptorSize];
  encode_descriptor({0, kMaxRegionLength + 1, 0, BulkAccess::kServerPush}, d);
  ASSERT_TRUE(c->send_frame(h, {}, d));
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "region length"));
}

TEST_F(BadInputTest, PayloadDisagreesWithThePullRegions) {
  auto c = raw();
  FrameHeader h = request(pt::TestBulkSink::kMethod);
  h.descriptor_count = 1;
  h.payload_length = 50;  // the region says 100
  std::byte d[kBulkDescriptorSize];
  encode_descriptor({0, 100, 0, BulkAccess::kServerPull}, d);
  ASSERT_TRUE(c->send_frame(h, {}, d));
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "pull regions total"));
}

TEST_F(BadInputTest, PullPastItsRegionIsAnErrorReply) {
  // A well-formed request whose handler reads past the region it was given.
  auto c = raw();
  pt::BulkRequest req;
  req.set_offset(60);
  req.set_length(100);
  std::string body;
  ASSERT_TRUE(detail::serialize_message(req, body));
  FrameHeader h = request(pt::TestBulkSink::kMethod);
  h.request_id = 5;
  h.body_length = static_cast<uint32_t>(body.size());
  h.descriptor_count = 1;
  h.payload_length = 100;
  std::vector<std::byte> tail(kBulkDescriptorSize + 100, std::byte{7});
  encode_descriptor({0, 100, 0, BulkAccess::kServerPull}, tail.data());
  ASSERT_TRUE(c->send_frame(h, body, tail));
  auto f = c->read_frame(milliseconds(5000));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(static_cast<Code>(f->h.status), Code::kOutOfRange) << f->body;
}

TEST_F(BadInputTest, BulkDataFrameFromAClient) {
  auto c = raw();
  FrameHeader h;
  h.type = FrameType::kBulkData;
  h.payload_length = 0;
  ASSERT_TRUE(c->send_frame(h));
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "unexpected bulk-data"));
}

TEST_F(BadInputTest, RequestBeforeTheHandshake) {
  auto c = raw(false);
  ASSERT_TRUE(c->send_frame(request()));
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "expected a hello"));
}

TEST_F(BadInputTest, SilentPeerIsDisconnectedAfterTheHandshakeTimeout) {
  auto c = raw(false);
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "no handshake"));
}

TEST_F(BadInputTest, SilentAfterHelloIsDisconnectedToo) {
  auto c = raw(false);
  Nonce nc = make_nonce();
  FrameHeader h;
  h.type = FrameType::kHello;
  h.body_length = kNonceSize;
  ASSERT_TRUE(c->send_frame(h, {reinterpret_cast<const char*>(nc.data()), nc.size()}));
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "no handshake"));
}

TEST_F(BadInputTest, WrongKeyGetsAuthFailedAndIsClosed) {
  auto c = raw(false);
  Status st = c->handshake("wrong key");
  EXPECT_EQ(st.code(), Code::kAuthFailed) << st.ToString();
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "wrong key"));
}

TEST_F(BadInputTest, PeerExceedingItsCreditsIsDisconnected) {
  auto c = raw();
  pt::EchoRequest req;
  req.set_sleep_ms(300);
  std::string body;
  ASSERT_TRUE(detail::serialize_message(req, body));
  for (uint64_t i = 0; i < 10; ++i) {  // the server grants 4
    FrameHeader h = request();
    h.request_id = i + 1;
    h.body_length = static_cast<uint32_t>(body.size());
    c->send_frame(h, body);
  }
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "credits"));
}

TEST_F(BadInputTest, ManyBadPeersAtOnce) {
  std::vector<std::thread> threads;
  std::atomic<int> closed{0};
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      RawConn c(server_->port());
      if (!c.ok()) return;
      if (i % 2 == 0) {
        std::string junk(100 + i, static_cast<char>(i));
        c.send_bytes(junk.data(), junk.size());
      }  // odd ones stay silent
      if (c.wait_closed(kCloseWait)) closed++;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(closed.load(), 16);
}

}  // namespace
}  // namespace surge::net::testing
