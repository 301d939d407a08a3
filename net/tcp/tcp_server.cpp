// TCP server transport: accepts on an Asio acceptor, runs the cluster-key
// handshake per connection (with a deadline), then turns request frames into
// InboundRequests for the RPC core.
//
// A request whose pulled bytes follow it pauses the connection's read loop
// until its handler has pulled the last of them (or, if it does not, until
// the core calls RequestBulk::finish(), which skips the rest); requests
// without pulled bytes keep the loop running, so many of them are in
// flight at once, and so are requests whose bytes are in.
//
// Requests in service are counted per I/O thread (delivered, not yet
// finished). A request for a kShortBlocking handler that is the only one
// in service on its I/O thread, while the buffer pool is not running low,
// whose whole payload has arrived (waiting
// at most kInPlacePayloadWait, and only for payloads up to
// kInPlaceWaitMaxPayload) and, if it has no payload, with nothing queued
// behind it on its connection (behind a payload the next request waits
// for the paused read loop either way), is delivered with may_block_here:
// running the brief handler right there delays nobody and saves the
// hand-off to a worker. Under load (a second request on the thread,
// pipelined requests without payload, a slow payload) the core's worker
// pool serves as before. The worst case for
// another connection on the same thread is waiting for one payload wait
// plus one brief handler that began while the thread was idle.
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <mutex>
#include <unordered_set>

#include "common/log.h"
#include "net/auth.h"
#include "net/preauth_limits.h"
#include "net/tcp/io_pool.h"
#include "net/tcp/tcp_stream.h"

namespace surge::net::tcp {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// How long an otherwise idle I/O thread waits for the rest of a request's
// payload before handing the request to a worker instead of running it in
// place. A pull in place then never waits on the network, so a slow or
// stalled client can hold up the thread's other connections by no more
// than this. (1 MiB crosses loopback in ~0.2 ms, a 10 Gb/s link in ~1 ms.)
constexpr std::chrono::microseconds kInPlacePayloadWait{2000};
// A larger payload that has not all arrived goes to a worker at once,
// without that wait: its handler can then check and store the first bytes
// while the rest is on its way (the data server's write pieces). Waiting
// for all of it first would put the receiving and the work end to end
// (1 MiB writes took 1.3x as long that way on loopback).
constexpr uint64_t kInPlaceWaitMaxPayload = 256 * 1024;
// Free buffers every pool class must have for a handler to run in place
// (as over RDMA): a data server's read takes one, and a handler on the I/O
// thread that waits for a buffer holds up every connection of the thread
// until workers elsewhere give one back.
constexpr size_t kInPlacePoolReserve = 4;

std::string peer_name(const tcp::socket& s) {
  boost::system::error_code ec;
  auto ep = s.remote_endpoint(ec);
  if (ec) return "tcp://?";
  std::string host = ep.address().to_string();
  if (ep.address().is_v6()) host = "[" + host + "]";
  return "tcp://" + host + ":" + std::to_string(ep.port());
}

class ServerConn;

// Pull/push for one request. Pulled bytes are the stream right after the
// request: region by region (kServerPull ones, in index order).
class TcpRequestBulk final : public RequestBulk {
 public:
  TcpRequestBulk(std::shared_ptr<ServerConn> conn, uint64_t request_id,
                 std::vector<BulkDescriptor> regions, uint64_t payload)
      : conn_(std::move(conn)),
        request_id_(request_id),
        regions_(std::move(regions)),
        paused_(payload > 0) {
    uint64_t pos = 0;
    for (const BulkDescriptor& d : regions_) {
      stream_start_.push_back(pos);
      if (d.access == BulkAccess::kServerPull) pos += d.length;
    }
    payload_ = pos;
  }

  size_t count() const override { return regions_.size(); }
  uint64_t length(size_t r) const override { return r < regions_.size() ? regions_[r].length : 0; }
  BulkAccess access(size_t r) const override {
    return r < regions_.size() ? regions_[r].access : BulkAccess::kServerPull;
  }

  Status pull(size_t region, uint64_t offset, std::span<std::byte> dst) override;
  Status push(size_t region, uint64_t offset, std::span<const std::byte> src) override;
  void finish() override;

 private:
  Status check(size_t region, uint64_t offset, uint64_t len, BulkAccess want) const {
    if (region >= regions_.size()) {
      return Status::InvalidArgument("bulk region " + std::to_string(region) + " of request " +
                                     std::to_string(request_id_) + ": the request has only " +
                                     std::to_string(regions_.size()));
    }
    if (regions_[region].access != want) {
      return Status::InvalidArgument(
          "bulk region " + std::to_string(region) + " of request " + std::to_string(request_id_) +
          (want == BulkAccess::kServerPull ? " is not pullable" : " is not pushable"));
    }
    if (offset > regions_[region].length || len > regions_[region].length - offset) {
      return Status::OutOfRange("bulk [" + std::to_string(offset) + ", +" + std::to_string(len) +
                                ") past region " + std::to_string(region) + " of length " +
                                std::to_string(regions_[region].length));
    }
    return Status::OK();
  }

  std::shared_ptr<ServerConn> conn_;
  const uint64_t request_id_;
  const std::vector<BulkDescriptor> regions_;
  std::vector<uint64_t> stream_start_;  // of each pull region in the payload
  uint64_t payload_ = 0;                // pulled bytes that follow the request
  uint64_t consumed_ = 0;               // payload bytes read so far
  bool paused_;
  bool broken_ = false;
  bool finished_ = false;
};

class ServerConn final : public TcpStream {
 public:
  ServerConn(asio::io_context& io, tcp::socket socket, std::string peer,
             const ServerTransportOptions& options, RequestSink* sink,
             std::function<void(ServerConn*)> on_gone,
             std::shared_ptr<std::atomic<int>> in_service_on_thread)
      : TcpStream(io, std::move(socket), std::move(peer), /*handshake_only=*/true),
        options_(options),
        sink_(sink),
        on_gone_(std::move(on_gone)),
        timer_(io),
        in_service_(std::move(in_service_on_thread)) {
    set_stall_timeout(options.bulk_stall_timeout);
  }

  // Called once, when the connection authenticates or closes before it
  // does: gives back its unauthenticated slot (PreauthLimits).
  void set_on_authenticated_or_gone(std::function<void()> f) { unauth_slot_ = std::move(f); }

  // Starts the handshake deadline and the read loop.
  void begin() {
    timer_.expires_after(options_.handshake_timeout);
    timer_.async_wait([weak = weak_from_this(), this](const boost::system::error_code& ec) {
      auto self = weak.lock();
      if (ec || !self || state_.load() == State::kReady) return;
      fail(Status::AuthFailed("no handshake within " +
                              std::to_string(options_.handshake_timeout.count()) + " ms"));
    });
    start();
  }

  std::shared_ptr<ServerConn> self() {
    return std::static_pointer_cast<ServerConn>(shared_from_this());
  }

  // The RPC core's view of this connection.
  class View final : public ServerConnection {
   public:
    explicit View(std::weak_ptr<ServerConn> c, std::string peer)
        : conn_(std::move(c)), peer_(std::move(peer)) {}
    void send_response(uint64_t id, const Status& st, std::string_view body) override {
      if (auto c = conn_.lock()) c->send_response(id, st, body);
    }
    void close(const Status& why) override {
      if (auto c = conn_.lock()) c->fail(why);
    }
    const std::string& peer() const override { return peer_; }

   private:
    std::weak_ptr<ServerConn> conn_;
    std::string peer_;
  };

  void send_response(uint64_t id, const Status& st, std::string_view body) {
    FrameHeader h;
    h.type = FrameType::kResponse;
    h.request_id = id;
    h.status = static_cast<uint16_t>(st.code());
    std::string_view payload = st.ok() ? body : std::string_view(st.message());
    Status too_big;
    if (payload.size() > kMaxBodyLength) {
      if (st.ok()) {
        too_big = Status::Internal("response body of request " + std::to_string(id) + " is " +
                                   std::to_string(payload.size()) + " bytes, over the limit");
        h.status = static_cast<uint16_t>(too_big.code());
        payload = too_big.message();
      } else {
        payload = payload.substr(0, 4096);
      }
    }
    h.body_length = static_cast<uint32_t>(payload.size());
    iovec part{const_cast<char*>(payload.data()), payload.size()};
    (void)send_frame(h, {&part, 1});  // a failure has already closed the connection
  }

 protected:
  void on_frame(const FrameHeader& h, std::span<const std::byte> trailer) override {
    switch (state_.load()) {
      case State::kAwaitHello: return on_hello(h, trailer);
      case State::kAwaitProof: return on_proof(h, trailer);
      case State::kReady: return on_request(h, trailer);
    }
  }

  void on_closed(const Status& why) override {
    timer_.cancel();
    release_unauth_slot();
    if (state_.load() == State::kReady && why.code() == Code::kDisconnected &&
        why.message().find("closed the connection") != std::string::npos) {
      SLOG_DEBUG("connection from {} closed", peer());
    } else if (why.code() == Code::kCancelled) {
      SLOG_INFO("closing connection from {}: {}", peer(), why.message());
    } else {
      SLOG_WARN("closing connection from {}: {}", peer(), why.ToString());
    }
    if (on_gone_) on_gone_(this);
  }

 private:
  enum class State { kAwaitHello, kAwaitProof, kReady };

  void release_unauth_slot() {
    std::function<void()> f;
    {
      std::lock_guard lk(slot_mu_);
      f.swap(unauth_slot_);
    }
    if (f) f();
  }

  void reject(const Status& why) {
    // Tell the peer why (best effort), then close.
    FrameHeader h;
    h.type = FrameType::kGoAway;
    h.status = static_cast<uint16_t>(why.code());
    h.body_length = static_cast<uint32_t>(why.message().size());
    iovec part{const_cast<char*>(why.message().data()), why.message().size()};
    (void)send_frame(h, {&part, 1});
    fail(why);
  }

  void on_hello(const FrameHeader& h, std::span<const std::byte> body) {
    if (h.type != FrameType::kHello || body.size() != kNonceSize) {
      return fail(Status::ProtocolError(std::string("expected a hello frame, got ") +
                                        frame_type_name(h.type) + " with " +
                                        std::to_string(body.size()) + " body bytes"));
    }
    std::memcpy(client_nonce_.data(), body.data(), kNonceSize);
    server_nonce_ = make_nonce();
    std::byte out[kChallengeBodySize];
    std::memcpy(out, server_nonce_.data(), kNonceSize);
    put_u32(out + kNonceSize, options_.credits_per_connection);
    FrameHeader c;
    c.type = FrameType::kChallenge;
    c.body_length = sizeof out;
    iovec part{out, sizeof out};
    state_ = State::kAwaitProof;
    (void)send_frame(c, {&part, 1});
  }

  void on_proof(const FrameHeader& h, std::span<const std::byte> body) {
    if (h.type != FrameType::kProof || body.size() != kProofSize) {
      return fail(Status::ProtocolError(std::string("expected a proof frame, got ") +
                                        frame_type_name(h.type)));
    }
    Proof got;
    std::memcpy(got.data(), body.data(), kProofSize);
    if (!proofs_equal(got, client_proof(options_.cluster_key, server_nonce_, client_nonce_))) {
      return reject(Status::AuthFailed("peer does not know the cluster key (wrong key)"));
    }
    Proof mine = server_proof(options_.cluster_key, client_nonce_, server_nonce_);
    FrameHeader w;
    w.type = FrameType::kWelcome;
    w.body_length = kProofSize;
    iovec part{mine.data(), mine.size()};
    state_ = State::kReady;
    timer_.cancel();
    open_frames();  // body is not used past this point
    release_unauth_slot();
    view_ = std::make_shared<View>(self(), peer());
    (void)send_frame(w, {&part, 1});
  }

  void on_request(const FrameHeader& h, std::span<const std::byte> trailer) {
    if (h.type != FrameType::kRequest) {
      return fail(Status::ProtocolError(std::string("unexpected ") + frame_type_name(h.type) +
                                        " frame from a client"));
    }
    Result<std::vector<BulkDescriptor>> regions =
        decode_descriptors(trailer.subspan(h.body_length), h.descriptor_count);
    if (!regions.ok()) return fail(regions.status().WithContext("request " + std::to_string(h.request_id)));
    uint64_t pulled = 0;
    for (const BulkDescriptor& d : *regions) {
      if (d.access == BulkAccess::kServerPull) pulled += d.length;
    }
    if (pulled != h.payload_length) {
      return fail(Status::ProtocolError(
          "request " + std::to_string(h.request_id) + " carries " +
          std::to_string(h.payload_length) + " payload bytes but its pull regions total " +
          std::to_string(pulled)));
    }
    InboundRequest req;
    req.request_id = h.request_id;
    req.service = h.service;
    req.method = h.method;
    req.body.assign(reinterpret_cast<const char*>(trailer.data()), h.body_length);
    if (h.payload_length > 0) pause();
    const int in_service = in_service_->fetch_add(1) + 1;  // TcpRequestBulk::finish undoes it
    req.may_block_here =
        in_service == 1 && sink_->runs_in_place_when_allowed(h.service, h.method) &&
        (options_.pool == nullptr || options_.pool->every_class_has_free(kInPlacePoolReserve)) &&
        payload_here(h.payload_length,
                     h.payload_length <= kInPlaceWaitMaxPayload ? kInPlacePayloadWait
                                                                : std::chrono::microseconds{0},
                     /*more_ok=*/h.payload_length > 0);
    req.bulk = std::make_unique<TcpRequestBulk>(self(), h.request_id, std::move(*regions),
                                                h.payload_length);
    sink_->on_request(view_, std::move(req));
  }

  friend class TcpRequestBulk;

  const ServerTransportOptions& options_;
  RequestSink* sink_;
  std::function<void(ServerConn*)> on_gone_;
  asio::steady_timer timer_;
  std::atomic<State> state_{State::kAwaitHello};
  // Requests delivered and not yet finished on this connection's I/O thread
  // (shared by its connections).
  std::shared_ptr<std::atomic<int>> in_service_;
  Nonce client_nonce_{};
  Nonce server_nonce_{};
  std::shared_ptr<View> view_;
  std::mutex slot_mu_;
  std::function<void()> unauth_slot_;
};

Status TcpRequestBulk::pull(size_t region, uint64_t offset, std::span<std::byte> dst) {
  SURGE_RETURN_IF_ERROR(check(region, offset, dst.size(), BulkAccess::kServerPull));
  if (broken_) return Status::Disconnected("connection to " + conn_->peer() + " failed");
  uint64_t pos = stream_start_[region] + offset;
  if (pos < consumed_) {
    return Status::InvalidArgument("TCP bulk pulls must go forward: region " +
                                   std::to_string(region) + " offset " + std::to_string(offset) +
                                   " was already passed");
  }
  if (dst.empty()) return Status::OK();
  Status st = conn_->read_payload(nullptr, pos - consumed_);
  if (st.ok()) st = conn_->read_payload(dst.data(), dst.size());
  if (!st.ok()) {
    broken_ = true;
    return st;
  }
  consumed_ = pos + dst.size();
  if (paused_ && consumed_ == payload_) {
    // Every byte that follows the request is in: the connection's next
    // request is read while this handler goes on (a data server's write
    // stores, then waits for its chain successor, after its last pull).
    paused_ = false;
    conn_->resume();
  }
  return Status::OK();
}

Status TcpRequestBulk::push(size_t region, uint64_t offset, std::span<const std::byte> src) {
  SURGE_RETURN_IF_ERROR(check(region, offset, src.size(), BulkAccess::kServerPush));
  if (src.empty()) return Status::OK();
  FrameHeader h;
  h.type = FrameType::kBulkData;
  h.request_id = request_id_;
  h.region = static_cast<uint32_t>(region);
  h.offset = offset;
  h.payload_length = src.size();
  iovec part{const_cast<std::byte*>(src.data()), src.size()};
  return conn_->send_frame(h, {&part, 1});
}

void TcpRequestBulk::finish() {
  if (finished_) return;
  finished_ = true;
  conn_->in_service_->fetch_sub(1);
  if (!paused_) return;
  paused_ = false;
  if (!broken_ && consumed_ < payload_) (void)conn_->read_payload(nullptr, payload_ - consumed_);
  conn_->resume();
}

class TcpServerTransport final : public ServerTransport {
 public:
  TcpServerTransport(const ServerTransportOptions& options, RequestSink* sink)
      : options_(options),
        sink_(sink),
        io_(options.io_threads, "surge-srv"),
        acceptor_(io_.next()),
        preauth_(options.max_unauthenticated_connections,
                 options.max_unauthenticated_per_address) {
    for (size_t i = 0; i < io_.size(); ++i) {
      in_service_.push_back(std::make_shared<std::atomic<int>>(0));
    }
  }
  ~TcpServerTransport() override { stop(); }

  Status bind() {
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(options_.endpoint.host, ec);
    if (ec) {
      // A name, not a literal: resolve it once.
      tcp::resolver resolver(acceptor_.get_executor());
      auto results = resolver.resolve(options_.endpoint.host, "", ec);
      if (ec || results.empty()) {
        return Status::InvalidArgument("cannot resolve listen host '" + options_.endpoint.host +
                                       "': " + ec.message());
      }
      addr = results.begin()->endpoint().address();
    }
    tcp::endpoint ep(addr, options_.endpoint.port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return Status(ec == boost::asio::error::address_in_use ? Code::kAlreadyExists : Code::kIOError,
                    "listen on " + options_.endpoint.to_string() + ": " + ec.message());
    }
    auto local = acceptor_.local_endpoint(ec);
    Endpoint bound = options_.endpoint;
    bound.port = local.port();
    address_ = bound.to_string();
    port_ = local.port();
    return Status::OK();
  }

  Status start() override {
    asio::post(acceptor_.get_executor(), [this] { accept_next(); });
    return Status::OK();
  }

  void stop() override {
    if (stopped_.exchange(true)) return;
    asio::post(acceptor_.get_executor(), [this] {
      boost::system::error_code ec;
      acceptor_.close(ec);
    });
    std::vector<std::shared_ptr<ServerConn>> conns;
    {
      std::lock_guard lk(mu_);
      for (auto& [p, weak] : conns_) {
        if (auto c = weak.lock()) conns.push_back(std::move(c));
      }
    }
    for (auto& c : conns) c->fail(Status::Cancelled("server " + address_ + " is stopping"));
    conns.clear();
    io_.stop();
  }

  std::string address() const override { return address_; }
  uint16_t port() const override { return port_; }

 private:
  void accept_next() {
    acceptor_.async_accept(io_.next(), [this](const boost::system::error_code& ec,
                                              tcp::socket socket) {
      if (ec) {
        if (ec == asio::error::operation_aborted || stopped_) return;
        SLOG_WARN("accept on {}: {}", address_, ec.message());
      } else {
        on_accept(std::move(socket));
      }
      if (!stopped_) accept_next();
    });
  }

  void on_accept(tcp::socket socket) {
    std::string peer = peer_name(socket);
    boost::system::error_code ec;
    const std::string host = socket.remote_endpoint(ec).address().to_string();
    if (Status full = preauth_.admit(host); !full.ok()) return refuse(std::move(socket), peer, full);
    tune_socket(socket.native_handle(), peer);
    auto& io = static_cast<asio::io_context&>(socket.get_executor().context());
    const size_t thread = io_.index_of(io);
    auto conn = std::make_shared<ServerConn>(
        io, std::move(socket), peer, options_, sink_,
        [this](ServerConn* c) {
          std::lock_guard lk(mu_);
          conns_.erase(c);
        },
        thread < in_service_.size() ? in_service_[thread] : std::make_shared<std::atomic<int>>(1));
    conn->set_on_authenticated_or_gone([this, host] { preauth_.release(host); });
    {
      std::lock_guard lk(mu_);
      conns_[conn.get()] = conn;
    }
    conn->begin();
  }

  // Over a limit: a GoAway saying why (if the socket takes it at once),
  // then close. Logged at most once a second, with how many were refused.
  void refuse(tcp::socket socket, const std::string& peer, const Status& why) {
    FrameHeader h;
    h.type = FrameType::kGoAway;
    h.status = static_cast<uint16_t>(why.code());
    const std::string& text = why.message();
    h.body_length = static_cast<uint32_t>(std::min(text.size(), kMaxHandshakeBody));
    std::byte hdr[kFrameHeaderSize];
    encode_header(h, hdr);
    iovec iov[2] = {{hdr, sizeof hdr}, {const_cast<char*>(text.data()), h.body_length}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    const int fd = socket.native_handle();
    (void)::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    // The GoAway, then our FIN; and what the peer sent already (its hello)
    // read, so the close does not turn into a reset that could beat the
    // GoAway to the client (a refused client retries only on the GoAway).
    ::shutdown(fd, SHUT_WR);
    char drop[kHandshakeReadBufferSize];
    for (int i = 0; i < 4 && ::recv(fd, drop, sizeof drop, MSG_DONTWAIT) > 0; ++i) {
    }
    boost::system::error_code ec;
    socket.close(ec);
    const uint64_t n = refused_.fetch_add(1) + 1;
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lk(mu_);
    if (now - last_refusal_log_ >= std::chrono::seconds(1)) {
      last_refusal_log_ = now;
      SLOG_WARN("refusing connection from {}: {} ({} refused so far)", peer, why.message(), n);
    }
  }

  const ServerTransportOptions options_;
  RequestSink* sink_;
  IoPool io_;
  tcp::acceptor acceptor_;
  std::string address_;
  uint16_t port_ = 0;
  std::atomic<bool> stopped_{false};
  std::mutex mu_;
  std::unordered_map<ServerConn*, std::weak_ptr<ServerConn>> conns_;
  PreauthLimits preauth_;
  std::atomic<uint64_t> refused_{0};
  std::chrono::steady_clock::time_point last_refusal_log_{};  // guarded by mu_
  // Per I/O thread: requests delivered and not yet finished (see the top).
  std::vector<std::shared_ptr<std::atomic<int>>> in_service_;
};

}  // namespace

Result<std::unique_ptr<ServerTransport>> make_tcp_server(const ServerTransportOptions& options,
                                                         RequestSink* sink) {
  auto t = std::make_unique<TcpServerTransport>(options, sink);
  SURGE_RETURN_IF_ERROR(t->bind());
  return std::unique_ptr<ServerTransport>(std::move(t));
}

}  // namespace surge::net::tcp

namespace surge::net {
// The factory is declared in namespace surge::net (net/transport.h).
Result<std::unique_ptr<ServerTransport>> make_tcp_server(const ServerTransportOptions& options,
                                                         RequestSink* sink) {
  return tcp::make_tcp_server(options, sink);
}
}  // namespace surge::net
