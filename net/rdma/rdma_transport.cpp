// The RDMA transport behind net/transport.h: connect_rdma / make_rdma_server.
//
// Frames (net/frame.h) travel as RdmaConnection messages; a request's bulk
// descriptors carry (addr, rkey, length) of the client's memory, and the
// server's BulkHandle pulls with RDMA READ and pushes with RDMA WRITE before
// the reply is sent (RC ordering puts the data before the reply).
//
// Client memory: a region inside a BufferPool registered with the device is
// exposed zero-copy with its slab's rkey. Any other region is bounced
// through a buffer of the channel's pool (copied in before the request for
// pulls, copied out after the reply for pushes, under the call's mutex and
// only if the caller has not abandoned it).
//
// Exposure: on a device with type 2 memory windows (unless
// SURGE_RDMA_MEMORY_WINDOWS=0), a window is bound over each region of a
// request, its rkey goes in the descriptor, and it is invalidated when the
// reply arrives: a server reaches only the buffers of requests in flight.
// Without windows (see net/rdma/README.md) keys are per slab.
#include <arpa/inet.h>
#include <netdb.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "common/log.h"
#include "net/busy_retry.h"
#include "net/frame.h"
#include "net/preauth_limits.h"
#include "net/rdma/busy_reject.h"
#include "net/rdma/rdma_connection.h"
#include "net/rdma/rdma_event_loop.h"
#include "net/transport.h"

namespace surge::net {

namespace {

using rdma::ConnectionCallbacks;
using rdma::ConnectionLimits;
using rdma::RdmaConnection;
using rdma::RdmaEventLoop;
using rdma::RdmaMessage;

// SURGE_RDMA_POLLING=1: event loops spin over their CQs instead of sleeping
// on the completion channels (lower latency, one busy core per loop).
bool polling_from_env() {
  const char* v = std::getenv("SURGE_RDMA_POLLING");
  return v != nullptr && std::string_view(v) == "1";
}

// All client connections of the process share one loop thread. The loop is
// never destroyed (channels of static owners may outlive any point we could
// pick), but its thread is stopped at exit: it reaps the completions and
// disconnects of channels just closed, freeing connections and devices
// (erasing from the device table) and logging as it does, while exit()
// destroys the statics that touches. surgectl scrub over RDMA died at exit
// of a double free, about once in 500 runs, with its report unflushed
// (tests/net/rpc_test.cpp, ClientThreadsAreStoppedBeforeExitDestroysStatics).
Result<RdmaEventLoop*> client_loop() {
  static std::mutex mu;
  static RdmaEventLoop* loop = nullptr;
  std::lock_guard lk(mu);
  if (loop == nullptr) {
    SURGE_ASSIGN_OR_RETURN(auto l, RdmaEventLoop::Create("rdma-client", polling_from_env()));
    loop = l.release();
    // Before the destructors of the statics made so far (made first: the
    // logger); not in a child forked later, which has no such thread.
    static const pid_t owner = getpid();
    (void)spdlog::default_logger_raw();
    std::atexit([] {
      if (getpid() == owner) loop->stop();
    });
  }
  return loop;
}

// Bounce buffers for channels created without a pool (ChannelOptions.pool
// null): one registered pool per process, made on first use.
Result<BufferPool*> shared_bounce_pool() {
  static std::mutex mu;
  static BufferPool* pool = nullptr;  // lives until exit on purpose
  std::lock_guard lk(mu);
  if (pool == nullptr) {
    BufferPoolOptions o;
    o.name = "rdma-bounce";
    o.classes = {{64 * 1024, 32}, {1024 * 1024, 16}};
    o.huge_pages = false;
    SURGE_ASSIGN_OR_RETURN(auto p, BufferPool::Create(o));
    pool = p.release();
  }
  return pool;
}

std::string make_frame(const FrameHeader& h, std::string_view body,
                       std::span<const BulkDescriptor> descs) {
  std::string out(kFrameHeaderSize, '\0');
  encode_header(h, reinterpret_cast<std::byte*>(out.data()));
  out.append(body);
  size_t at = out.size();
  out.resize(at + descs.size() * kBulkDescriptorSize);
  for (size_t i = 0; i < descs.size(); ++i) {
    encode_descriptor(descs[i],
                      reinterpret_cast<std::byte*>(out.data() + at) + i * kBulkDescriptorSize);
  }
  return out;
}

// ------------------------------------------------------------ client side

// A waiting caller reaps its connection's completions itself: its reply
// wakes it straight from the completion channel, not the loop thread that
// would then wake it. One caller at a time; the others sleep as before and
// the loop reaps whenever nobody drives.
class RdmaCallDriver final : public CallDriver {
 public:
  explicit RdmaCallDriver(std::shared_ptr<RdmaConnection> conn) : conn_(std::move(conn)) {}
  bool drive(PendingCall::State& call) override {
    return conn_->drive([&] { return call.finished.load(std::memory_order_acquire); },
                        call.deadline);
  }
  void kick() override {}  // the loop reaps whenever no caller does

 private:
  std::shared_ptr<RdmaConnection> conn_;
};

class RdmaClientTransport final : public ClientTransport {
 public:
  RdmaClientTransport(std::shared_ptr<ClientCallTableBase> table, BufferPool* pool,
                      std::string peer)
      : table_(std::move(table)), pool_(pool), peer_(std::move(peer)) {}
  ~RdmaClientTransport() override { close(); }

  Status start(RdmaEventLoop* loop, const ClientTransportOptions& o) {
    ConnectionCallbacks cbs;
    cbs.on_message = [this](RdmaMessage m) { on_message(std::move(m)); };
    cbs.on_closed = [this](const Status& why) { on_closed(why); };
    if (pool_ == nullptr) {
      SURGE_ASSIGN_OR_RETURN(pool_, shared_bounce_pool());
    }
    SURGE_ASSIGN_OR_RETURN(
        conn_, RdmaConnection::Connect(loop, o.endpoint, o.cluster_key, ConnectionLimits{}, pool_,
                                       std::move(cbs), o.connect_timeout));
    driver_ = std::make_shared<RdmaCallDriver>(conn_);
    return Status::OK();
  }
  std::shared_ptr<CallDriver> driver() override { return driver_; }

  Status send_request(const OutgoingRequest& req) override {
    if (req.bulk.size() > kMaxDescriptors) {
      return Status::InvalidArgument("rdma: " + std::to_string(req.bulk.size()) +
                                     " bulk regions for " + peer_ + " (max " +
                                     std::to_string(kMaxDescriptors) + ")");
    }
    std::vector<BulkDescriptor> descs;
    Exposure ex;
    Status st = describe(req, descs, ex);
    if (!st.ok()) {
      for (auto& w : ex.windows) conn_->release_window(w);
      return st;
    }
    FrameHeader h;
    h.type = FrameType::kRequest;
    h.service = req.service;
    h.method = req.method;
    h.request_id = req.request_id;
    h.body_length = static_cast<uint32_t>(req.body.size());
    h.descriptor_count = static_cast<uint16_t>(descs.size());
    std::string frame = make_frame(h, req.body, descs);
    if (!ex.bounces.empty() || !ex.windows.empty()) {
      std::lock_guard lk(mu_);
      exposed_[req.request_id] = std::move(ex);
    }
    st = conn_->send_message(std::move(frame));
    if (!st.ok()) take_exposure(req.request_id);
    return st;
  }

  uint32_t credits() const override { return conn_->rpc_credits(); }
  bool connected() const override { return conn_ && conn_->ready() && !closed_; }
  void close() override {
    if (conn_) conn_->close(Status::Disconnected("rdma: channel to " + peer_ + " closed"));
    closed_ = true;
  }
  const std::string& peer() const override { return peer_; }

 private:
  struct Bounce;
  struct Exposure;

  // One descriptor per region: zero copy for registered memory, else a
  // bounce buffer; narrowed to a memory window where the device has them.
  Status describe(const OutgoingRequest& req, std::vector<BulkDescriptor>& descs, Exposure& ex) {
    std::vector<Bounce>& bounces = ex.bounces;
    for (size_t i = 0; i < req.bulk.size(); ++i) {
      const BulkRegion& r = req.bulk[i];
      BulkDescriptor d;
      d.length = r.length;
      d.access = r.access;
      auto keys = r.length == 0 ? std::optional<rdma::MemoryKeys>(rdma::MemoryKeys{})
                                : conn_->device()->find_keys(r.addr, r.length);
      if (keys) {
        d.addr = reinterpret_cast<uintptr_t>(r.addr);
        d.rkey = keys->rkey;
        if (r.length > 0) SURGE_RETURN_IF_ERROR(narrow(ex, r.addr, d));
      } else {
        // Bounce: a free pool buffer when one fits, else a buffer registered
        // for this call. Never a wait for the pool: the caller may hold the
        // buffers it would wait for (write behind holds a batch's data in
        // them while it sends that batch's parity from the heap, and waited
        // out the whole timeout for each EC group). Never the caller's
        // memory itself: the copy-out happens only while the caller still
        // waits (see on_message).
        Bounce b;
        b.region = i;
        b.push = r.access == BulkAccess::kServerPush;
        if (pool_ != nullptr && r.length <= pool_->max_buffer_size()) {
          if (auto pb = pool_->try_acquire(r.length); pb.ok()) {
            b.buf = std::move(*pb);
            b.data = b.buf.data();
            d.rkey = conn_->device()->find_keys(b.data, r.length)->rkey;
          }
        }
        if (b.data == nullptr) {
          auto tb = conn_->device()->allocate_registered(r.length);
          if (!tb.ok()) return tb.status().WithContext("bulk region for " + peer_);
          b.tmp = std::move(*tb);
          b.data = b.tmp->data();
          d.rkey = b.tmp->rkey();
        }
        if (!b.push) std::memcpy(b.data, r.addr, r.length);
        d.addr = reinterpret_cast<uintptr_t>(b.data);
        if (!b.tmp) SURGE_RETURN_IF_ERROR(narrow(ex, b.data, d));
        bounces.push_back(std::move(b));
      }
      descs.push_back(d);
    }
    return Status::OK();
  }

  struct Bounce {
    PoolBuffer buf;
    std::unique_ptr<rdma::RegisteredBuffer> tmp;
    std::byte* data = nullptr;
    size_t region = 0;
    bool push = false;
  };
  // What one request exposes to the server until its reply.
  struct Exposure {
    std::vector<Bounce> bounces;
    std::vector<RdmaConnection::Window> windows;
  };

  // Where the device has type 2 memory windows, expose only [addr, +len)
  // of this call instead of the whole slab: the descriptor gets the
  // window's rkey. On any failure, windows already bound are released.
  Status narrow(Exposure& ex, void* addr, BulkDescriptor& d) {
    if (!conn_->windows_enabled()) return Status::OK();
    auto w = conn_->bind_window(addr, d.length, d.access == BulkAccess::kServerPush);
    if (!w.ok()) {
      for (auto& win : ex.windows) conn_->release_window(win);
      ex.windows.clear();
      return w.status();
    }
    d.rkey = w->rkey;
    ex.windows.push_back(*w);
    return Status::OK();
  }

  // Removes a request's exposure and invalidates its windows.
  Exposure take_exposure(uint64_t request_id) {
    Exposure ex;
    {
      std::lock_guard lk(mu_);
      auto it = exposed_.find(request_id);
      if (it == exposed_.end()) return ex;
      ex = std::move(it->second);
      exposed_.erase(it);
    }
    for (auto& w : ex.windows) conn_->release_window(w);
    return ex;
  }

  void on_message(RdmaMessage m) {
    auto bytes = m.bytes();
    auto hr = decode_header(bytes);
    if (!hr.ok() || bytes.size() < kFrameHeaderSize + hr->body_length) {
      Status bad = hr.ok() ? Status::ProtocolError("rdma: truncated frame from " + peer_)
                           : hr.status().WithContext("rdma: frame from " + peer_);
      SLOG_ERROR("{}", bad.ToString());
      conn_->close(bad);
      return;
    }
    const FrameHeader& h = *hr;
    std::string body(reinterpret_cast<const char*>(bytes.data()) + kFrameHeaderSize, h.body_length);
    m.release();
    if (h.type == FrameType::kGoAway) {
      conn_->close(Status(h.status != 0 ? static_cast<Code>(h.status) : Code::kDisconnected,
                          "rdma: " + peer_ + " went away: " + body));
      return;
    }
    if (h.type != FrameType::kResponse) {
      conn_->close(Status::ProtocolError(std::string("rdma: unexpected ") +
                                         frame_type_name(h.type) + " frame from " + peer_));
      return;
    }
    Exposure ex = take_exposure(h.request_id);
    std::vector<Bounce>& bounces = ex.bounces;
    if (h.status != 0) {
      table_->complete(h.request_id, Status(static_cast<Code>(h.status), std::move(body)), {});
      return;
    }
    if (!bounces.empty()) {
      if (auto call = table_->find(h.request_id)) {
        std::lock_guard lk(call->mu);
        if (!call->abandoned) {
          for (auto& b : bounces) {
            if (!b.push || b.region >= call->regions.size()) continue;
            const BulkRegion& r = call->regions[b.region];
            std::memcpy(r.addr, b.data, r.length);
          }
        }
      }
    }
    table_->complete(h.request_id, Status::OK(), std::move(body));
  }

  void on_closed(const Status& why) {
    {
      std::lock_guard lk(mu_);
      exposed_.clear();  // the QP is in error: the server can no longer touch them
    }
    table_->fail_all(
        why.code() == Code::kDisconnected
            ? why
            : Status::Disconnected("rdma: connection to " + peer_ + " lost: " + why.ToString()));
  }

  std::shared_ptr<ClientCallTableBase> table_;
  BufferPool* pool_;
  std::string peer_;
  std::shared_ptr<RdmaConnection> conn_;
  std::shared_ptr<CallDriver> driver_;
  std::atomic<bool> closed_{false};
  std::mutex mu_;
  std::unordered_map<uint64_t, Exposure> exposed_;
};

// ------------------------------------------------------------ server side

class RdmaServerConnection final : public ServerConnection {
 public:
  explicit RdmaServerConnection(std::string peer) : peer_(std::move(peer)) {}
  // Once, on the loop thread, before any other use.
  void set(std::shared_ptr<RdmaConnection> c) {
    peer_ = c->peer();
    conn_ = std::move(c);
  }
  const std::shared_ptr<RdmaConnection>& conn() const { return conn_; }

  void send_response(uint64_t request_id, const Status& status, std::string_view body) override {
    FrameHeader h;
    h.type = FrameType::kResponse;
    h.request_id = request_id;
    h.status = static_cast<uint16_t>(status.code());
    std::string_view b = status.ok() ? body : std::string_view(status.message());
    h.body_length = static_cast<uint32_t>(b.size());
    Status st = conn_->send_message(make_frame(h, b, {}));
    if (!st.ok())
      SLOG_DEBUG("rdma: response {} to {} not sent: {}", request_id, peer_, st.ToString());
  }
  void close(const Status& why) override {
    SLOG_WARN("rdma: closing connection from {}: {}", peer_, why.ToString());
    conn_->close(why);
  }
  const std::string& peer() const override { return peer_; }

 private:
  std::string peer_;
  std::shared_ptr<RdmaConnection> conn_;
};

// A request's regions: pull = RDMA READ, push = RDMA WRITE.
class RdmaRequestBulk final : public RequestBulk {
 public:
  RdmaRequestBulk(std::shared_ptr<RdmaConnection> conn, std::vector<BulkDescriptor> descs,
                  BufferPool* pool, std::shared_ptr<std::atomic<uint32_t>> in_service)
      : conn_(std::move(conn)),
        descs_(std::move(descs)),
        pool_(pool),
        in_service_(std::move(in_service)) {
    in_service_->fetch_add(1);
  }
  ~RdmaRequestBulk() override { finish(); }

  size_t count() const override { return descs_.size(); }
  uint64_t length(size_t region) const override {
    return region < descs_.size() ? descs_[region].length : 0;
  }
  BulkAccess access(size_t region) const override {
    return region < descs_.size() ? descs_[region].access : BulkAccess::kServerPull;
  }

  Status pull(size_t region, uint64_t offset, std::span<std::byte> dst) override {
    SURGE_RETURN_IF_ERROR(check(region, offset, dst.size(), BulkAccess::kServerPull, "pull"));
    return transfer(true, descs_[region], offset, dst.data(), dst.size());
  }
  Status push(size_t region, uint64_t offset, std::span<const std::byte> src) override {
    SURGE_RETURN_IF_ERROR(check(region, offset, src.size(), BulkAccess::kServerPush, "push"));
    return transfer(false, descs_[region], offset, const_cast<std::byte*>(src.data()), src.size());
  }
  // The handler's own registered buffer goes out as a staged WRITE as it
  // is: no copy into a staging buffer and no wait for the acknowledgement,
  // at any size one work request takes.
  Status push_owned(size_t region, uint64_t offset, PoolBuffer buf, size_t len) override {
    SURGE_RETURN_IF_ERROR(check(region, offset, len, BulkAccess::kServerPush, "push"));
    if (len == 0) return Status::OK();
    if (len <= buf.capacity() && conn_->can_write_staged(buf.data(), len)) {
      const BulkDescriptor& d = descs_[region];
      return conn_->write_staged(std::move(buf), len, d.addr + offset, d.rkey);
    }
    return RequestBulk::push_owned(region, offset, std::move(buf), len);
  }
  // The handler is done with the request (called once by the core; the
  // destructor covers a request dropped without it).
  void finish() override {
    if (!finished_) in_service_->fetch_sub(1);
    finished_ = true;
  }

 private:
  Status check(size_t region, uint64_t offset, uint64_t len, BulkAccess want,
               const char* what) const {
    if (region >= descs_.size()) {
      return Status::InvalidArgument(std::string("rdma: ") + what + " of region " +
                                     std::to_string(region) + " from " + conn_->peer() +
                                     ": the request has " + std::to_string(descs_.size()));
    }
    if (descs_[region].access != want) {
      return Status::InvalidArgument(std::string("rdma: ") + what + " of region " +
                                     std::to_string(region) + " from " + conn_->peer() +
                                     ": wrong access for this region");
    }
    const uint64_t rl = descs_[region].length;
    if (offset > rl || len > rl - offset) {
      return Status::OutOfRange(std::string("rdma: ") + what + " [" + std::to_string(offset) +
                                ", +" + std::to_string(len) + ") past region " +
                                std::to_string(region) + " of " + std::to_string(rl) +
                                " bytes from " + conn_->peer());
    }
    return Status::OK();
  }

  // Pushes up to this size are staged (copied into a pool buffer the
  // connection holds until the WRITE is done) instead of waiting for the
  // WRITE's acknowledgement: the reply follows on the same QP, so the data
  // is there first. At 64 KiB the copy is cheaper than the round trip and
  // the two thread wake-ups of waiting.
  static constexpr uint64_t kStagedPushMax = 64 * 1024;

  Status transfer(bool is_read, const BulkDescriptor& d, uint64_t offset, std::byte* local,
                  uint64_t len) {
    if (len == 0) return Status::OK();
    if (!is_read && len <= kStagedPushMax && pool_ != nullptr) {
      auto staged = pool_->try_acquire(len);
      if (staged.ok()) {  // else (pool empty) the waiting path below
        std::memcpy(staged->data(), local, len);
        return conn_->write_staged(std::move(*staged), len, d.addr + offset, d.rkey);
      }
    }
    if (conn_->device()->find_keys(local, len)) {
      return is_read ? conn_->read({local, len}, d.addr + offset, d.rkey)
                     : conn_->write({local, len}, d.addr + offset, d.rkey);
    }
    // Not registered: bounce through the server's pool, one buffer at a time.
    if (pool_ == nullptr) {
      return Status::InvalidArgument("rdma: bulk buffer for " + conn_->peer() +
                                     " is not registered and the server has no pool");
    }
    uint64_t step = pool_->max_buffer_size();
    for (uint64_t done = 0; done < len;) {
      uint64_t n = std::min(step, len - done);
      SURGE_ASSIGN_OR_RETURN(PoolBuffer b, pool_->acquire(n, std::chrono::milliseconds(5000)));
      if (is_read) {
        SURGE_RETURN_IF_ERROR(conn_->read({b.data(), n}, d.addr + offset + done, d.rkey));
        std::memcpy(local + done, b.data(), n);
      } else {
        std::memcpy(b.data(), local + done, n);
        SURGE_RETURN_IF_ERROR(conn_->write({b.data(), n}, d.addr + offset + done, d.rkey));
      }
      done += n;
    }
    return Status::OK();
  }

  std::shared_ptr<RdmaConnection> conn_;
  std::vector<BulkDescriptor> descs_;
  BufferPool* pool_;
  std::shared_ptr<std::atomic<uint32_t>> in_service_;
  bool finished_ = false;
};

class RdmaServerTransport final : public ServerTransport, public rdma::CmEventTarget {
 public:
  RdmaServerTransport(ServerTransportOptions o, RequestSink* sink)
      : options_(std::move(o)), sink_(sink) {}
  ~RdmaServerTransport() override { stop(); }

  Status bind() {
    SURGE_ASSIGN_OR_RETURN(loop_, RdmaEventLoop::Create("rdma-server", polling_from_env()));
    const std::string where = options_.endpoint.to_string();
    addrinfo hints{};
    hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* ai = nullptr;
    int rc = getaddrinfo(options_.endpoint.host.empty() ? nullptr : options_.endpoint.host.c_str(),
                         std::to_string(options_.endpoint.port).c_str(), &hints, &ai);
    if (rc != 0) {
      return Status::InvalidArgument("rdma: cannot resolve listen address " + where + ": " +
                                     gai_strerror(rc));
    }
    Status st;
    loop_->run_sync([&] {
      if (rdma_create_id(loop_->cm_channel(), &listen_id_, static_cast<CmEventTarget*>(this),
                         RDMA_PS_TCP) != 0) {
        st = Status::FromErrno(errno, "rdma: rdma_create_id to listen on " + where);
        return;
      }
      if (rdma_bind_addr(listen_id_, ai->ai_addr) != 0) {
        st = Status::Unavailable("rdma: cannot bind " + where + ": " + strerror(errno) +
                                 " (no RDMA device has this address?)");
        return;
      }
      if (listen_id_->verbs == nullptr && !is_wildcard(ai->ai_addr)) {
        st = Status::Unavailable("rdma: no RDMA device holds the address " + where);
      }
    });
    freeaddrinfo(ai);
    if (!st.ok()) {
      stop();
      return st;
    }
    port_ = ntohs(rdma_get_src_port(listen_id_));
    Endpoint ep = options_.endpoint;
    ep.port = port_;
    address_ = ep.to_string();
    return Status::OK();
  }

  Status start() override {
    Status st;
    loop_->run_sync([&] {
      if (rdma_listen(listen_id_, 128) != 0) {
        st = Status::FromErrno(errno, "rdma: rdma_listen on " + address_);
      }
    });
    if (st.ok()) SLOG_INFO("rdma: listening on {}", address_);
    return st;
  }

  void stop() override {
    if (!loop_) return;
    std::vector<std::shared_ptr<RdmaConnection>> conns;
    loop_->run_sync([&] {
      stopping_ = true;
      if (listen_id_ != nullptr) {
        rdma_destroy_id(listen_id_);
        listen_id_ = nullptr;
      }
      for (auto& [raw, sc] : conns_) conns.push_back(sc->conn());
      conns_.clear();
    });
    for (auto& c : conns) c->close(Status::Cancelled("rdma: server " + address_ + " stopping"));
    // Wait (bounded) for the flushes so every QP/CQ/MR is released.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (auto& c : conns) {
      while (!c->destroyed() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      if (!c->destroyed()) SLOG_ERROR("rdma: connection {} did not drain at stop", c->peer());
    }
    loop_->stop();
    conns.clear();
    loop_.reset();
  }

  std::string address() const override { return address_; }
  uint16_t port() const override { return port_; }

  void on_cm_event(const rdma::CmEvent& ev) override {
    if (ev.type != RDMA_CM_EVENT_CONNECT_REQUEST) {
      SLOG_DEBUG("rdma: listener {} event {} ignored", address_, rdma_event_str(ev.type));
      return;
    }
    if (stopping_) {
      rdma_reject(ev.id, nullptr, 0);
      rdma_destroy_id(ev.id);
      return;
    }
    // Refused before anything (QP, receive buffers) is set up for it.
    const std::string host = peer_host(ev.id);
    PreauthLimits::Refusal why;
    if (Status full = preauth_.admit(host, &why); !full.ok()) {
      // Saying "busy" lets the client come back later (connect_rdma).
      const std::string pd = rdma::encode_busy_reject({why.per_address, why.limit});
      rdma_reject(ev.id, pd.data(), static_cast<uint8_t>(pd.size()));
      rdma_destroy_id(ev.id);
      const auto now = std::chrono::steady_clock::now();
      ++refused_;
      if (now - last_refusal_log_ >= std::chrono::seconds(1)) {
        last_refusal_log_ = now;
        SLOG_WARN("rdma: refusing a connection request from {} on {}: {} ({} refused so far)",
                  host, address_, full.message(), refused_);
      }
      return;
    }
    // Its slot goes back once, when it authenticates or closes first.
    auto slot = std::make_shared<bool>(true);
    auto release = [this, slot, host] {
      if (*slot) {
        *slot = false;
        preauth_.release(host);
      }
    };
    // The wrapper exists before the connection so callbacks can name it;
    // none runs before Accept returns (they run on this thread).
    auto sc = std::make_shared<RdmaServerConnection>("rdma://?");
    std::weak_ptr<RdmaServerConnection> weak = sc;
    ConnectionCallbacks cbs;
    cbs.on_message = [this, weak](RdmaMessage m) {
      if (auto s = weak.lock()) on_request(s, std::move(m));
    };
    cbs.on_ready = release;
    cbs.on_closed = [this, weak, release](const Status& why) {
      release();
      auto s = weak.lock();
      if (!s) return;
      SLOG_DEBUG("rdma: connection {} closed: {}", s->peer(), why.ToString());
      conns_.erase(s.get());
    };
    auto c = RdmaConnection::Accept(loop_.get(), ev, options_.cluster_key, ConnectionLimits{},
                                    options_.credits_per_connection, options_.pool, std::move(cbs),
                                    options_.handshake_timeout);
    if (!c.ok()) {
      release();
      SLOG_WARN("rdma: refused a connection on {}: {}", address_, c.status().ToString());
      return;
    }
    sc->set(*c);
    conns_[sc.get()] = sc;
  }

 private:
  static bool is_wildcard(const sockaddr* sa) {
    if (sa->sa_family == AF_INET) {
      return reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr == htonl(INADDR_ANY);
    }
    if (sa->sa_family == AF_INET6) {
      const auto& a = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
      return std::memcmp(&a, &in6addr_any, sizeof a) == 0;
    }
    return false;
  }

  static std::string peer_host(rdma_cm_id* id) {
    sockaddr* sa = rdma_get_peer_addr(id);
    char host[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(sa)->sin_addr, host, sizeof host);
    } else if (sa->sa_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(sa)->sin6_addr, host, sizeof host);
    }
    return host;
  }

  void on_request(const std::shared_ptr<RdmaServerConnection>& sc, RdmaMessage m) {
    auto bytes = m.bytes();
    auto hr = decode_header(bytes);
    Status bad;
    if (!hr.ok()) {
      bad = hr.status();
    } else if (hr->type != FrameType::kRequest) {
      bad =
          Status::ProtocolError(std::string("unexpected ") + frame_type_name(hr->type) + " frame");
    } else if (bytes.size() != kFrameHeaderSize + hr->trailer_length()) {
      bad = Status::ProtocolError("frame length " + std::to_string(bytes.size()) +
                                  " does not match its header");
    }
    std::vector<BulkDescriptor> descs;
    if (bad.ok() && hr->descriptor_count > 0) {
      auto d = decode_descriptors(bytes.subspan(kFrameHeaderSize + hr->body_length),
                                  hr->descriptor_count);
      if (d.ok()) {
        descs = std::move(*d);
      } else {
        bad = d.status();
      }
    }
    if (!bad.ok()) {
      sc->close(bad.WithContext("rdma: bad request from " + sc->peer()));
      return;
    }
    InboundRequest req;
    req.request_id = hr->request_id;
    req.service = hr->service;
    req.method = hr->method;
    req.body.assign(reinterpret_cast<const char*>(bytes.data()) + kFrameHeaderSize,
                    hr->body_length);
    m.release();  // body copied: give the receive buffer back now
    // A brief handler runs right here, on the loop thread (no hand-off to
    // a worker and back), when that holds nobody up: no other request of
    // this server is in service (a worker's READ or WRITE needs this
    // thread to reap its completion, and might hold the pool buffer an
    // in-place handler would wait for) and no message of this connection
    // waits behind it. Its own bulk operations reap the CQ while they wait.
    // Nor while the pool runs low: staged pushes hold buffers until this
    // thread reaps their WRITEs, so a handler here waiting for a buffer
    // would wait for itself (until its acquire timed out, the loop stalled).
    req.may_block_here = in_service_->load() == 0 && !sc->conn()->messages_waiting() &&
                         (options_.pool == nullptr ||
                          options_.pool->every_class_has_free(kInPlacePoolReserve));
    req.bulk =
        std::make_unique<RdmaRequestBulk>(sc->conn(), std::move(descs), options_.pool, in_service_);
    sink_->on_request(sc, std::move(req));
  }

  // Free buffers every pool class must have for a handler to run in place:
  // a brief handler takes one or two (the data server's read takes one and
  // its staged push another).
  static constexpr size_t kInPlacePoolReserve = 4;

  ServerTransportOptions options_;
  RequestSink* sink_;
  std::unique_ptr<RdmaEventLoop> loop_;
  rdma_cm_id* listen_id_ = nullptr;
  uint16_t port_ = 0;
  std::string address_;
  bool stopping_ = false;  // loop thread
  // Requests delivered whose handlers have not finished (any thread).
  std::shared_ptr<std::atomic<uint32_t>> in_service_ = std::make_shared<std::atomic<uint32_t>>(0);
  std::unordered_map<RdmaServerConnection*, std::shared_ptr<RdmaServerConnection>> conns_;
  // Connections in the handshake, per address and in total (loop thread).
  PreauthLimits preauth_{options_.max_unauthenticated_connections,
                         options_.max_unauthenticated_per_address};
  uint64_t refused_ = 0;                                  // loop thread
  std::chrono::steady_clock::time_point last_refusal_log_{};  // loop thread
};

}  // namespace

// A server that rejects the connection request as busy (over its limits
// on connections in the handshake) is asked again after a short, growing,
// randomised pause (net/busy_retry.h, as the TCP client does) until the
// connect deadline; then the error names the address, the limit and how
// often it was refused (also when the last try, started with little time
// left, timed out). Any other failure is reported at once.
Result<std::unique_ptr<ClientTransport>> connect_rdma(const ClientTransportOptions& options,
                                                      std::shared_ptr<ClientCallTableBase> table) {
  SURGE_ASSIGN_OR_RETURN(RdmaEventLoop * loop, client_loop());
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + options.connect_timeout;
  Status refusal;  // the last Busy
  for (int n = 1;; ++n) {
    auto t = std::make_unique<RdmaClientTransport>(table, options.pool,
                                                   options.endpoint.to_string());
    ClientTransportOptions o = options;
    o.connect_timeout = std::max(std::chrono::milliseconds(1),
                                 std::chrono::duration_cast<std::chrono::milliseconds>(
                                     deadline - std::chrono::steady_clock::now()));
    Status st = t->start(loop, o);
    if (st.ok()) return std::unique_ptr<ClientTransport>(std::move(t));
    if (st.code() == Code::kTimedOut && n > 1) {
      return busy_gave_up(refusal, n - 1, start, options.connect_timeout);
    }
    if (st.code() != Code::kBusy) return st;
    refusal = st;
    const auto pause = busy_retry_pause(n + 1);
    if (std::chrono::steady_clock::now() + pause >= deadline) {
      return busy_gave_up(refusal, n, start, options.connect_timeout);
    }
    std::this_thread::sleep_for(pause);
  }
}

Result<std::unique_ptr<ServerTransport>> make_rdma_server(const ServerTransportOptions& options,
                                                          RequestSink* sink) {
  auto t = std::make_unique<RdmaServerTransport>(options, sink);
  SURGE_RETURN_IF_ERROR(t->bind());
  return std::unique_ptr<ServerTransport>(std::move(t));
}

}  // namespace surge::net
