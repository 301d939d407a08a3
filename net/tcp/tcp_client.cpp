// TCP client transport: connect with a deadline, run the handshake
// synchronously on the caller's thread, then hand the socket to a shared
// client I/O thread that reads replies and pushed bulk data.
//
// Requests are written by the calling thread itself (TcpStream::send_frame:
// header, body, descriptors and the pulled regions in one gather write).
// Pushed bytes land straight in the caller's region, bounds-checked against
// the descriptors of that pending call; bytes for a call that is unknown or
// abandoned (timed out) are read and dropped.
//
// A server over its limits on connections in the handshake
// (net/preauth_limits.h) refuses at once with a GoAway(Unavailable) before
// its challenge. That server is busy, not broken: many processes of one
// host starting at once meet it. connect_tcp tries again after a short,
// growing, randomised pause until the connect deadline. A reset or close
// instead is a server that died or is stopping: reported at once.
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <boost/asio/ip/tcp.hpp>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "net/auth.h"
#include "net/busy_retry.h"
#include "net/tcp/io_pool.h"
#include "net/tcp/tcp_stream.h"

namespace surge::net::tcp {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

class ClientConn final : public TcpStream, public CallDriver {
 public:
  ClientConn(asio::io_context& io, tcp::socket socket, std::string peer,
             std::shared_ptr<ClientCallTableBase> table)
      : TcpStream(io, std::move(socket), std::move(peer)), table_(std::move(table)) {}

  bool drive(PendingCall::State& call) override {
    return drive_reads(
        call, [](void* t) { return static_cast<ClientCallTableBase*>(t)->has_outstanding(); },
        table_.get());
  }
  void kick() override { kick_reader(); }

 protected:
  void on_frame(const FrameHeader& h, std::span<const std::byte> trailer) override {
    switch (h.type) {
      case FrameType::kResponse: {
        std::string body(reinterpret_cast<const char*>(trailer.data()), h.body_length);
        if (h.status == 0) {
          table_->complete(h.request_id, Status::OK(), std::move(body));
        } else {
          table_->complete(h.request_id, Status(static_cast<Code>(h.status), std::move(body)), {});
        }
        return;
      }
      case FrameType::kBulkData: return on_bulk_data(h);
      case FrameType::kGoAway:
        return fail(Status(static_cast<Code>(h.status),
                           "server " + peer() + " said goodbye: " +
                               std::string(reinterpret_cast<const char*>(trailer.data()),
                                           h.body_length)));
      default:
        return fail(Status::ProtocolError(std::string("unexpected ") + frame_type_name(h.type) +
                                          " frame from server " + peer()));
    }
  }

  bool want_io_reads() override { return table_->has_outstanding(); }

  void on_closed(const Status& why) override {
    Status st = why.code() == Code::kDisconnected
                    ? why
                    : Status::Disconnected("connection to " + peer() + " lost: " + why.ToString());
    table_->fail_all(st);
  }

 private:
  void on_bulk_data(const FrameHeader& h) {
    std::shared_ptr<PendingCall::State> call = table_->find(h.request_id);
    if (!call) {
      begin_direct(nullptr, nullptr, h.payload_length);  // late: drop the bytes
      return;
    }
    if (h.region >= call->regions.size() ||
        call->regions[h.region].access != BulkAccess::kServerPush ||
        h.offset > call->regions[h.region].length ||
        h.payload_length > call->regions[h.region].length - h.offset) {
      fail(Status::ProtocolError("server " + peer() + " pushed [" + std::to_string(h.offset) +
                                 ", +" + std::to_string(h.payload_length) + ") into region " +
                                 std::to_string(h.region) + " of request " +
                                 std::to_string(h.request_id) +
                                 ", which does not allow it"));
      return;
    }
    auto* base = static_cast<std::byte*>(call->regions[h.region].addr);
    begin_direct(std::move(call), base + h.offset, h.payload_length);
  }

  std::shared_ptr<ClientCallTableBase> table_;
};

class TcpClientTransport final : public ClientTransport {
 public:
  TcpClientTransport(std::shared_ptr<ClientConn> conn, uint32_t credits)
      : conn_(std::move(conn)), credits_(credits) {}
  ~TcpClientTransport() override { close(); }

  Status send_request(const OutgoingRequest& req) override {
    if (req.bulk.size() > kMaxDescriptors) {
      return Status::InvalidArgument("call to " + peer() + " with " +
                                     std::to_string(req.bulk.size()) +
                                     " bulk regions, over the limit " +
                                     std::to_string(kMaxDescriptors));
    }
    if (req.body.size() > kMaxBodyLength) {
      return Status::InvalidArgument("request body of " + std::to_string(req.body.size()) +
                                     " bytes to " + peer() + " is over the limit");
    }
    std::byte desc[kMaxDescriptors * kBulkDescriptorSize];
    iovec parts[kMaxIov];
    size_t n = 0;
    parts[n++] = {const_cast<char*>(req.body.data()), req.body.size()};
    parts[n++] = {desc, req.bulk.size() * kBulkDescriptorSize};
    uint64_t pulled = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < req.bulk.size(); ++i) {
      const BulkRegion& r = req.bulk[i];
      total += r.length;
      if (r.length > kMaxRegionLength || total > kMaxBulkPerRequest ||
          (r.addr == nullptr && r.length > 0)) {
        return Status::InvalidArgument("bulk region " + std::to_string(i) + " of a call to " +
                                       peer() + " is null or over the limits");
      }
      BulkDescriptor d;
      d.length = r.length;
      d.access = r.access;
      encode_descriptor(d, desc + i * kBulkDescriptorSize);
      if (r.access == BulkAccess::kServerPull && r.length > 0) {
        parts[n++] = {r.addr, r.length};
        pulled += r.length;
      }
    }
    FrameHeader h;
    h.type = FrameType::kRequest;
    h.service = req.service;
    h.method = req.method;
    h.request_id = req.request_id;
    h.body_length = static_cast<uint32_t>(req.body.size());
    h.descriptor_count = static_cast<uint16_t>(req.bulk.size());
    h.payload_length = pulled;
    return conn_->send_frame(h, {parts, n});
  }

  uint32_t credits() const override { return credits_; }
  std::shared_ptr<CallDriver> driver() override {
    return std::shared_ptr<CallDriver>(conn_, static_cast<CallDriver*>(conn_.get()));
  }
  bool connected() const override { return conn_->probe(); }
  void close() override { conn_->fail(Status::Disconnected("channel to " + peer() + " closed")); }
  const std::string& peer() const override { return conn_->peer(); }

 private:
  std::shared_ptr<ClientConn> conn_;
  uint32_t credits_;
};

Status refused(const std::string& peer) {
  return Status(Code::kConnectionRefused,
                "connection refused by " + peer + " (no server is listening there)");
}

Status connect_with_deadline(tcp::socket& s, const tcp::endpoint& ep,
                             std::chrono::steady_clock::time_point deadline,
                             const std::string& peer) {
  boost::system::error_code ec;
  s.open(ep.protocol(), ec);
  if (ec) return Status::IOError("socket for " + peer + ": " + ec.message());
  s.native_non_blocking(true, ec);
  int fd = s.native_handle();
  if (::connect(fd, ep.data(), static_cast<socklen_t>(ep.size())) != 0) {
    if (errno != EINPROGRESS) {
      int err = errno;
      if (err == ECONNREFUSED) return refused(peer);
      return Status::Unavailable("connect to " + peer + ": " + std::strerror(err));
    }
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return Status::TimedOut("connect to " + peer + " timed out");
      pollfd p{fd, POLLOUT, 0};
      int r = ::poll(&p, 1, static_cast<int>(left.count()));
      if (r > 0) break;
      if (r < 0 && errno != EINTR) return Status::FromErrno(errno, "poll connect " + peer);
    }
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == ECONNREFUSED) return refused(peer);
    if (err != 0) return Status::Unavailable("connect to " + peer + ": " + std::strerror(err));
  }
  return Status::OK();
}

// What a failed handshake read or write says: the server that reset or
// closed the connection, by address (a server that died or restarted, or
// one over its limit of unauthenticated connections), not a key problem.
Status handshake_io_error(int err, const std::string& peer, const char* doing) {
  if (err == ECONNRESET) {
    return Status::Unavailable("connection reset by the server at " + peer + " while " + doing +
                               " the handshake (it died, restarted or refused us)");
  }
  if (err == EPIPE || err == 0) {
    return Status::Unavailable("the server at " + peer + " closed the connection while " + doing +
                               " the handshake (it is stopping, restarting or refused us)");
  }
  return Status::Unavailable(std::string(doing) + " the handshake with the server at " + peer +
                             ": " + std::strerror(err));
}

// Exactly len handshake bytes by the deadline.
Status recv_handshake(int fd, std::byte* dst, size_t len,
                      std::chrono::steady_clock::time_point deadline, const std::string& peer) {
  while (len > 0) {
    ssize_t n = ::recv(fd, dst, len, MSG_DONTWAIT);
    if (n > 0) {
      dst += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return handshake_io_error(0, peer, "reading");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return handshake_io_error(errno, peer, "reading");
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return Status::TimedOut("the server at " + peer + " did not complete the handshake in time");
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) {
      return Status::FromErrno(errno, "poll " + peer + " during the handshake");
    }
  }
  return Status::OK();
}

// Reads one handshake frame; a GoAway becomes its status (and sets
// *goaway, if given).
Result<FrameHeader> read_handshake_frame(int fd, std::string& body,
                                         std::chrono::steady_clock::time_point deadline,
                                         const std::string& peer, bool* goaway = nullptr) {
  std::byte hdr[kFrameHeaderSize];
  SURGE_RETURN_IF_ERROR(recv_handshake(fd, hdr, sizeof hdr, deadline, peer));
  SURGE_ASSIGN_OR_RETURN(FrameHeader h, decode_header({hdr, sizeof hdr}));
  if (h.body_length > kMaxHandshakeBody) {
    return Status::ProtocolError("oversized handshake frame from " + peer + ": " +
                                 std::to_string(h.body_length) + " body bytes");
  }
  body.resize(h.body_length);
  SURGE_RETURN_IF_ERROR(
      recv_handshake(fd, reinterpret_cast<std::byte*>(body.data()), body.size(), deadline, peer));
  if (h.type == FrameType::kGoAway) {
    if (goaway != nullptr) *goaway = true;
    return Status(static_cast<Code>(h.status), "server " + peer + " refused us: " + body);
  }
  return h;
}

Status send_handshake_frame(int fd, FrameType type, const void* body, size_t len,
                            const std::string& peer) {
  FrameHeader h;
  h.type = type;
  h.body_length = static_cast<uint32_t>(len);
  std::byte hdr[kFrameHeaderSize];
  encode_header(h, hdr);
  iovec iov[2] = {{hdr, sizeof hdr}, {const_cast<void*>(body), len}};
  size_t left = sizeof hdr + len;
  int i = 0;
  // Handshake frames are tiny: one sendmsg fits them into any socket
  // buffer, so a short write only follows a peer that is gone.
  while (left > 0) {
    msghdr msg{};
    msg.msg_iov = iov + i;
    msg.msg_iovlen = static_cast<size_t>(2 - i);
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return handshake_io_error(errno, peer, "sending");
    }
    left -= static_cast<size_t>(n);
    for (size_t k = static_cast<size_t>(n); k > 0 && i < 2;) {
      size_t step = std::min(k, iov[i].iov_len);
      iov[i].iov_base = static_cast<char*>(iov[i].iov_base) + step;
      iov[i].iov_len -= step;
      k -= step;
      if (iov[i].iov_len == 0) ++i;
    }
  }
  return Status::OK();
}

// The client half of the handshake (net/auth.h). Returns the credits.
// *refused: the server was busy, a GoAway(Unavailable) before its
// challenge (see the top).
Result<uint32_t> handshake(int fd, const std::string& key,
                           std::chrono::steady_clock::time_point deadline,
                           const std::string& peer, bool* refused) {
  Nonce nc = make_nonce();
  std::string body;
  Status sent = send_handshake_frame(fd, FrameType::kHello, nc.data(), nc.size(), peer);
  bool goaway = false;
  Result<FrameHeader> first = sent;
  if (sent.ok()) first = read_handshake_frame(fd, body, deadline, peer, &goaway);
  if (!first.ok()) {
    *refused = goaway && first.status().code() == Code::kUnavailable;
    return first.status();
  }
  FrameHeader h = *first;
  if (h.type != FrameType::kChallenge || body.size() != kChallengeBodySize) {
    return Status::ProtocolError("server " + peer + " sent no valid challenge");
  }
  Nonce ns;
  std::memcpy(ns.data(), body.data(), kNonceSize);
  uint32_t credits = get_u32(reinterpret_cast<const std::byte*>(body.data()) + kNonceSize);
  if (credits == 0) return Status::ProtocolError("server " + peer + " grants zero credits");
  Proof mine = client_proof(key, ns, nc);
  SURGE_RETURN_IF_ERROR(
      send_handshake_frame(fd, FrameType::kProof, mine.data(), mine.size(), peer));
  SURGE_ASSIGN_OR_RETURN(h, read_handshake_frame(fd, body, deadline, peer));
  if (h.type != FrameType::kWelcome || body.size() != kProofSize) {
    return Status::ProtocolError("server " + peer + " sent no valid welcome");
  }
  Proof theirs;
  std::memcpy(theirs.data(), body.data(), kProofSize);
  if (!proofs_equal(theirs, server_proof(key, nc, ns))) {
    return Status::AuthFailed("server " + peer + " does not know the cluster key");
  }
  return credits;
}

// One try at each resolved address in turn; *refused as handshake() says.
Result<std::unique_ptr<ClientTransport>> connect_once(
    asio::io_context& io, const tcp::resolver::results_type& results,
    const ClientTransportOptions& options, const std::shared_ptr<ClientCallTableBase>& table,
    std::chrono::steady_clock::time_point deadline, const std::string& peer, bool* refused) {
  Status last;
  for (const auto& entry : results) {
    tcp::socket socket(io);
    last = connect_with_deadline(socket, entry.endpoint(), deadline, peer);
    if (!last.ok()) continue;
    int fd = socket.native_handle();
    tune_socket(fd, peer);
    Result<uint32_t> credits = handshake(fd, options.cluster_key, deadline, peer, refused);
    if (!credits.ok()) return credits.status();
    auto conn = std::make_shared<ClientConn>(io, std::move(socket), peer, table);
    conn->start();
    return std::unique_ptr<ClientTransport>(
        std::make_unique<TcpClientTransport>(std::move(conn), *credits));
  }
  return last;
}

}  // namespace

Result<std::unique_ptr<ClientTransport>> connect_tcp(const ClientTransportOptions& options,
                                                     std::shared_ptr<ClientCallTableBase> table) {
  const std::string peer = options.endpoint.to_string();
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + options.connect_timeout;
  asio::io_context& io = IoPool::client_pool().next();
  boost::system::error_code ec;
  tcp::resolver resolver(io);
  auto results = resolver.resolve(options.endpoint.host, std::to_string(options.endpoint.port),
                                  tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    return Status::Unavailable("cannot resolve " + peer + ": " + ec.message());
  }
  Status refusal;  // the last GoAway(Unavailable)
  for (int n = 1;; ++n) {
    bool refused = false;
    auto t = connect_once(io, results, options, table, deadline, peer, &refused);
    if (t.ok()) return t;
    // A try after refusals that ran into the deadline: the refusals are why.
    if (!refused && n > 1 && t.status().code() == Code::kTimedOut) {
      return busy_gave_up(refusal, n - 1, start, options.connect_timeout);
    }
    if (!refused) return t;
    refusal = t.status();
    const auto pause = busy_retry_pause(n + 1);
    if (std::chrono::steady_clock::now() + pause >= deadline) {
      return busy_gave_up(refusal, n, start, options.connect_timeout);
    }
    std::this_thread::sleep_for(pause);
  }
}

}  // namespace surge::net::tcp

namespace surge::net {
Result<std::unique_ptr<ClientTransport>> connect_tcp(const ClientTransportOptions& options,
                                                     std::shared_ptr<ClientCallTableBase> table) {
  return tcp::connect_tcp(options, std::move(table));
}
}  // namespace surge::net
