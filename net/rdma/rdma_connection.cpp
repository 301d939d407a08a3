// RdmaConnection: RC QP, credits, fragments, one-sided bulk, teardown.
// See rdma_connection.h for the protocol and the invariants.
#include "net/rdma/rdma_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "common/log.h"
#include "net/frame.h"
#include "net/rdma/busy_reject.h"

namespace surge::net::rdma {

namespace {

// Every SEND starts with this header (little-endian).
constexpr uint32_t kMsgMagic = 0x4d445253;  // "SRDM"
constexpr size_t kMsgHeaderSize = 16;
constexpr uint8_t kTypeData = 1;
constexpr uint8_t kTypeCtrl = 2;
constexpr uint8_t kFlagMore = 1;
constexpr uint32_t kCtrlRecvs = 4;
// Reassembled messages larger than this close the connection.
constexpr size_t kMaxMessage =
    kMaxBodyLength + kFrameHeaderSize + kMaxDescriptors * kBulkDescriptorSize;

// rdma_cm private data: Hello (connect, <= 56 bytes) and Challenge (accept).
constexpr uint32_t kHelloMagic = 0x48445253;  // "SRDH"
constexpr size_t kPrivateDataSize = 16 + kNonceSize;
constexpr uint64_t kRecvFlag = 1ull << 63;

std::string wc_error(const ibv_wc& wc) {
  return std::string(ibv_wc_status_str(wc.status)) + " (vendor error " +
         std::to_string(wc.vendor_err) + ")";
}

}  // namespace

// One send-queue work request, queued until credits and queue room allow.
struct RdmaConnection::Wr {
  enum class Kind : uint8_t { kMessage, kRead, kWrite, kBind, kInvalidate };
  Kind kind = Kind::kMessage;
  std::string payload;  // kMessage: this fragment's bytes
  uint8_t flags = 0;
  std::byte* local = nullptr;  // one-sided
  uint32_t lkey = 0;
  uint64_t length = 0;
  uint64_t remote = 0;
  uint32_t rkey = 0;
  std::shared_ptr<OpWaiter> waiter;
  int slot = -1;  // send buffer in use, returned on completion
  bool control = false;
  bool signaled = true;  // produces a completion of its own
  ibv_mw* mw = nullptr;  // kBind / kInvalidate
  ibv_mr* mr = nullptr;  // kBind
  bool remote_write = false;
  PoolBuffer staged;  // write_staged: the source, held until the WRITE is done
};

// A blocking bulk operation waiting for its work requests.
struct RdmaConnection::OpWaiter {
  std::mutex mu;
  std::condition_variable cv;
  size_t remaining = 0;
  Status status;
  void complete(const Status& st) {
    std::lock_guard lk(mu);
    if (!st.ok() && status.ok()) status = st;
    if (--remaining == 0) cv.notify_all();
  }
};

RdmaMessage& RdmaMessage::operator=(RdmaMessage&& o) noexcept {
  if (this != &o) {
    release();
    conn_ = std::move(o.conn_);
    slots_ = std::move(o.slots_);
    assembled_ = std::move(o.assembled_);
    view_ = o.view_;
    if (!assembled_.empty()) {
      view_ = {reinterpret_cast<const std::byte*>(assembled_.data()), assembled_.size()};
    }
    o.view_ = {};
  }
  return *this;
}

void RdmaMessage::release() {
  if (conn_ && !slots_.empty()) conn_->repost(slots_, true);
  slots_.clear();
  conn_.reset();
  view_ = {};
}

// ------------------------------------------------------------------ setup

RdmaConnection::RdmaConnection(RdmaEventLoop* loop, Role role, std::string key,
                               ConnectionLimits limits, BufferPool* user_pool,
                               ConnectionCallbacks cbs)
    : loop_(loop),
      role_(role),
      key_(std::move(key)),
      limits_(limits),
      user_pool_(user_pool),
      cbs_(std::move(cbs)),
      metrics_(TransportMetrics::of(TransportKind::kRdma,
                                    role == Role::kServer ? Side::kServer : Side::kClient)) {
  my_nonce_ = make_nonce();
  // counters() takes mu_ at scrape time; probes are made and dropped here
  // and in the destructor, never under mu_.
  probes_ = std::make_unique<RdmaConnectionProbes>(
      role == Role::kServer ? Side::kServer : Side::kClient, [this] {
        Counters c = counters();
        return RdmaConnectionState{c.send_credits, c.queued, c.recvs_posted};
      });
}

RdmaConnection::~RdmaConnection() {
  probes_.reset();  // no scrape reads us from here on
  // Resources are destroyed by maybe_destroy_locked; a connection that
  // never got an id or QP has nothing left here but memory.
  if (qp_ != nullptr || cq_ != nullptr) {
    SLOG_ERROR("rdma: connection {} destroyed with verbs resources alive", peer_);
  }
}

Status RdmaConnection::setup_verbs() {
  SURGE_ASSIGN_OR_RETURN(device_, RdmaDevice::For(id_->verbs));
  const auto& attr = device_->attr();
  limits_.send_queue_depth =
      std::min<uint32_t>(limits_.send_queue_depth, static_cast<uint32_t>(attr.max_qp_wr));
  uint32_t recvs = limits_.data_recvs + kCtrlRecvs;
  uint32_t sends = limits_.data_recvs + kCtrlRecvs;
  BufferPoolOptions po;
  po.name = "rdma-msg " + peer_;
  po.classes = {{limits_.buffer_size, size_t{recvs} + sends}};
  po.huge_pages = false;
  SURGE_ASSIGN_OR_RETURN(msg_pool_, BufferPool::Create(po));
  SURGE_RETURN_IF_ERROR(device_->attach_pool(*msg_pool_));
  msg_pool_attached_ = true;
  if (user_pool_ != nullptr) {
    SURGE_RETURN_IF_ERROR(device_->attach_pool(*user_pool_));
    user_pool_attached_ = true;
  }
  for (uint32_t i = 0; i < recvs; ++i) {
    SURGE_ASSIGN_OR_RETURN(auto b, msg_pool_->try_acquire(limits_.buffer_size));
    recv_bufs_.push_back(std::move(b));
  }
  for (uint32_t i = 0; i < sends; ++i) {
    SURGE_ASSIGN_OR_RETURN(auto b, msg_pool_->try_acquire(limits_.buffer_size));
    send_bufs_.push_back(std::move(b));
    free_send_slots_.push_back(sends - 1 - i);
  }

  // Every message buffer lies in the one slab of msg_pool_: one key.
  auto send_keys = device_->find_keys(send_bufs_[0].data(), limits_.buffer_size);
  if (!send_keys) {
    return Status::Internal("rdma: message buffers for " + peer_ + " are not registered on " +
                            device_->name());
  }
  send_lkey_ = send_keys->lkey;
  comp_ = ibv_create_comp_channel(id_->verbs);
  if (comp_ == nullptr)
    return Status::FromErrno(errno, "rdma: ibv_create_comp_channel for " + peer_);
  int fl = fcntl(comp_->fd, F_GETFL);
  fcntl(comp_->fd, F_SETFL, fl | O_NONBLOCK);
  int cqe = static_cast<int>(std::min<uint32_t>(limits_.send_queue_depth + recvs + 16,
                                                static_cast<uint32_t>(attr.max_cqe)));
  cq_ = ibv_create_cq(id_->verbs, cqe, nullptr, comp_, 0);
  if (cq_ == nullptr) return Status::FromErrno(errno, "rdma: ibv_create_cq for " + peer_);
  if (!loop_->polling() && ibv_req_notify_cq(cq_, 0) != 0) {
    return Status::FromErrno(errno, "rdma: ibv_req_notify_cq for " + peer_);
  }
  ibv_qp_init_attr qa{};
  qa.send_cq = cq_;
  qa.recv_cq = cq_;
  qa.qp_type = IBV_QPT_RC;
  // Messages are signaled only now and then (pump_locked): a completion
  // per SEND would wake the loop thread twice per RPC for nothing.
  qa.sq_sig_all = 0;
  qa.cap.max_send_wr = limits_.send_queue_depth;
  qa.cap.max_recv_wr = recvs;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  if (rdma_create_qp(id_, device_->pd(), &qa) != 0) {
    return Status::FromErrno(errno, "rdma: rdma_create_qp for " + peer_);
  }
  qp_ = id_->qp;
  // On wherever the device has type 2 windows, so a data server reaches
  // only the buffers of the requests in flight (README.md: what Soft-RoCE
  // enforces of them); SURGE_RDMA_MEMORY_WINDOWS=0 turns them off.
  const char* mw_env = std::getenv("SURGE_RDMA_MEMORY_WINDOWS");
  windows_enabled_ =
      device_->supports_mw_type2() && !(mw_env != nullptr && std::string_view(mw_env) == "0");
  {
    std::lock_guard lk(mu_);
    for (uint32_t i = 0; i < recvs; ++i) SURGE_RETURN_IF_ERROR(post_recv_locked(i));
  }
  auto weak = weak_from_this();
  loop_->add_fd(comp_->fd, [weak] {
    if (auto c = weak.lock()) c->on_cq_readable();
  });
  if (loop_->polling()) {
    loop_->add_poller(this, [weak] {
      if (auto c = weak.lock()) c->on_poll();
    });
  }
  return Status::OK();
}

std::string RdmaConnection::hello_private_data() const {
  std::string pd(kPrivateDataSize, '\0');
  auto* p = reinterpret_cast<std::byte*>(pd.data());
  put_u32(p, kHelloMagic);
  put_u32(p + 4, limits_.data_recvs);
  put_u32(p + 8, limits_.buffer_size);
  put_u32(p + 12, rpc_credits_);
  std::memcpy(p + 16, my_nonce_.data(), kNonceSize);
  return pd;
}

Status RdmaConnection::apply_peer_private_data(std::string_view pd) {
  if (pd.size() < kPrivateDataSize) {
    return Status::ProtocolError("rdma: " + peer_ + " sent " + std::to_string(pd.size()) +
                                 " bytes of connection private data, want " +
                                 std::to_string(kPrivateDataSize));
  }
  auto* p = reinterpret_cast<const std::byte*>(pd.data());
  if (get_u32(p) != kHelloMagic) {
    return Status::ProtocolError("rdma: " + peer_ + " is not a Surge RDMA peer (bad magic)");
  }
  uint32_t recvs = get_u32(p + 4);
  uint32_t bufsize = get_u32(p + 8);
  if (recvs == 0 || bufsize <= kMsgHeaderSize || bufsize > (16u << 20)) {
    return Status::ProtocolError("rdma: " + peer_ + " advertised " + std::to_string(recvs) +
                                 " receive buffers of " + std::to_string(bufsize) + " bytes");
  }
  std::lock_guard lk(mu_);
  send_credits_ = recvs;
  ctrl_credits_ = kCtrlRecvs;
  peer_buffer_size_ = std::min(bufsize, limits_.buffer_size);
  if (role_ == Role::kClient) rpc_credits_ = get_u32(p + 12);
  std::memcpy(peer_nonce_.data(), p + 16, kNonceSize);
  return Status::OK();
}

Result<std::shared_ptr<RdmaConnection>> RdmaConnection::Connect(
    RdmaEventLoop* loop, const Endpoint& ep, std::string cluster_key, ConnectionLimits limits,
    BufferPool* user_pool, ConnectionCallbacks cbs, std::chrono::milliseconds timeout) {
  std::shared_ptr<RdmaConnection> c(new RdmaConnection(loop, Role::kClient, std::move(cluster_key),
                                                       limits, user_pool, std::move(cbs)));
  c->peer_ = ep.to_string();
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* ai = nullptr;
  int rc = getaddrinfo(ep.host.c_str(), std::to_string(ep.port).c_str(), &hints, &ai);
  if (rc != 0) {
    return Status::InvalidArgument("rdma: cannot resolve host of " + c->peer_ + ": " +
                                   gai_strerror(rc));
  }
  Status st;
  loop->run_sync([&] {
    c->self_ = c;
    if (rdma_create_id(loop->cm_channel(), &c->id_, static_cast<CmEventTarget*>(c.get()),
                       RDMA_PS_TCP) != 0) {
      st = Status::FromErrno(errno, "rdma: rdma_create_id for " + c->peer_);
      c->self_.reset();
      return;
    }
    if (rdma_resolve_addr(c->id_, nullptr, ai->ai_addr,
                          static_cast<int>(std::min<int64_t>(timeout.count(), 5000))) != 0) {
      st = Status::FromErrno(errno, "rdma: rdma_resolve_addr " + c->peer_);
      c->shutdown(st);
    }
  });
  freeaddrinfo(ai);
  if (!st.ok()) return st;
  std::unique_lock lk(c->mu_);
  if (!c->state_cv_.wait_for(lk, timeout, [&] { return c->connect_done_; })) {
    lk.unlock();
    Status to = Status::TimedOut("rdma: connecting to " + c->peer_ + " took longer than " +
                                 std::to_string(timeout.count()) + " ms");
    c->close(to);
    return to;
  }
  if (!c->connect_status_.ok()) {
    Status why = c->connect_status_;
    lk.unlock();
    c->close(why);
    return why;
  }
  return c;
}

Result<std::shared_ptr<RdmaConnection>> RdmaConnection::Accept(
    RdmaEventLoop* loop, const CmEvent& ev, std::string cluster_key, ConnectionLimits limits,
    uint32_t rpc_credits, BufferPool* user_pool, ConnectionCallbacks cbs,
    std::chrono::milliseconds handshake_timeout) {
  std::shared_ptr<RdmaConnection> c(new RdmaConnection(loop, Role::kServer, std::move(cluster_key),
                                                       limits, user_pool, std::move(cbs)));
  c->id_ = ev.id;
  c->id_->context = static_cast<CmEventTarget*>(c.get());
  c->rpc_credits_ = rpc_credits;
  c->self_ = c;
  sockaddr* sa = rdma_get_peer_addr(ev.id);
  char host[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(sa)->sin_addr, host, sizeof host);
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(sa)->sin6_addr, host, sizeof host);
  }
  Endpoint pe{TransportKind::kRdma, host, ntohs(rdma_get_dst_port(ev.id))};
  c->peer_ = pe.to_string();
  Status st = c->apply_peer_private_data(ev.private_data);
  if (st.ok()) st = c->setup_verbs();
  if (st.ok()) {
    const auto& attr = c->device_->attr();
    std::string pd = c->hello_private_data();
    rdma_conn_param cp{};
    cp.private_data = pd.data();
    cp.private_data_len = static_cast<uint8_t>(pd.size());
    // We are the one issuing READs: our initiator depth is bounded by what
    // the client will respond to.
    uint32_t init = std::min<uint32_t>({static_cast<uint32_t>(attr.max_qp_init_rd_atom),
                                        ev.responder_resources, c->limits_.max_rd_atomic});
    cp.initiator_depth = static_cast<uint8_t>(std::max<uint32_t>(init, 1));
    cp.responder_resources = static_cast<uint8_t>(
        std::min<uint32_t>({static_cast<uint32_t>(attr.max_qp_rd_atom), ev.initiator_depth, 255}));
    cp.retry_count = 7;
    cp.rnr_retry_count = 7;
    {
      std::lock_guard lk(c->mu_);
      c->max_rd_ = cp.initiator_depth;
      c->state_ = State::kHandshake;
    }
    if (rdma_accept(c->id_, &cp) != 0)
      st = Status::FromErrno(errno, "rdma: rdma_accept " + c->peer_);
  }
  if (!st.ok()) {
    rdma_reject(ev.id, nullptr, 0);
    c->shutdown(st);
    return st;
  }
  std::weak_ptr<RdmaConnection> weak = c;
  loop->run_after(handshake_timeout, [weak] {
    auto conn = weak.lock();
    if (!conn) return;
    bool pending;
    {
      std::lock_guard lk(conn->mu_);
      pending = conn->state_ == State::kHandshake;
    }
    if (pending) {
      conn->fail(Status::TimedOut("rdma: " + conn->peer_ + " did not finish the handshake"));
    }
  });
  return c;
}

// --------------------------------------------------------------- rdma_cm

void RdmaConnection::on_cm_event(const CmEvent& ev) {
  auto keep = shared_from_this();
  switch (ev.type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rdma_resolve_route(id_, 2000) != 0) {
        finish_connect(Status::FromErrno(errno, "rdma: rdma_resolve_route " + peer_));
      }
      return;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      Status st = setup_verbs();
      if (!st.ok()) {
        finish_connect(st);
        return;
      }
      const auto& attr = device_->attr();
      std::string pd = hello_private_data();
      rdma_conn_param cp{};
      cp.private_data = pd.data();
      cp.private_data_len = static_cast<uint8_t>(pd.size());
      cp.responder_resources = static_cast<uint8_t>(
          std::min<uint32_t>({static_cast<uint32_t>(attr.max_qp_rd_atom), 255u}));
      cp.initiator_depth = static_cast<uint8_t>(std::min<uint32_t>(
          {static_cast<uint32_t>(attr.max_qp_init_rd_atom), limits_.max_rd_atomic}));
      cp.retry_count = 7;
      cp.rnr_retry_count = 7;
      if (rdma_connect(id_, &cp) != 0) {
        finish_connect(Status::FromErrno(errno, "rdma: rdma_connect " + peer_));
      }
      return;
    }
    case RDMA_CM_EVENT_ESTABLISHED:
      if (role_ == Role::kClient) {
        Status st = apply_peer_private_data(ev.private_data);
        if (!st.ok()) {
          finish_connect(st);
          return;
        }
        {
          std::lock_guard lk(mu_);
          max_rd_ = std::max<uint32_t>(1, ev.initiator_depth);
          state_ = State::kHandshake;
        }
        // Handshake 3: prove the key against the server's nonce.
        Proof p = client_proof(key_, peer_nonce_, my_nonce_);
        Status s2 = send_message(
            control_frame(static_cast<int>(FrameType::kProof), Status::OK(), {p.data(), p.size()}));
        if (!s2.ok()) finish_connect(s2);
      }
      return;
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
      finish_connect(Status::Unavailable("rdma: no route to " + peer_ + " (" +
                                         rdma_event_str(ev.type) + ", " + strerror(-ev.status) +
                                         "): is there an RDMA device for this address?"));
      return;
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR:
      finish_connect(
          Status::Unavailable("rdma: " + peer_ + " unreachable (" + rdma_event_str(ev.type) + ")"));
      return;
    case RDMA_CM_EVENT_REJECTED:
      // A busy server says so (busy_reject.h): Busy, which connect_rdma
      // retries; any other rejection is final.
      if (auto busy = decode_busy_reject(ev.private_data)) {
        finish_connect(Status(Code::kBusy, "rdma: " + peer_ +
                                               " refused the connection request as busy (" +
                                               busy->describe() + ")"));
        return;
      }
      finish_connect(
          Status(Code::kConnectionRefused, "rdma: " + peer_ +
                                               " rejected the connection (no listener, or the "
                                               "server is out of resources)"));
      return;
    case RDMA_CM_EVENT_DISCONNECTED:
      shutdown(Status::Disconnected("rdma: " + peer_ + " disconnected"));
      return;
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      shutdown(Status::Unavailable("rdma: device of " + peer_ + " was removed"));
      return;
    default:
      SLOG_DEBUG("rdma: {} event {} ignored", peer_, rdma_event_str(ev.type));
      return;
  }
}

void RdmaConnection::finish_connect(const Status& st) {
  if (!st.ok()) shutdown(st);
  std::lock_guard lk(mu_);
  if (connect_done_) return;
  connect_done_ = true;
  connect_status_ = st;
  state_cv_.notify_all();
}

std::string RdmaConnection::control_frame(int type, const Status& st,
                                          std::span<const std::byte> body) const {
  FrameHeader h;
  h.type = static_cast<FrameType>(type);
  h.status = static_cast<uint16_t>(st.code());
  std::string text = st.ok() ? std::string() : st.message();
  h.body_length = static_cast<uint32_t>(st.ok() ? body.size() : text.size());
  std::string out(kFrameHeaderSize, '\0');
  encode_header(h, reinterpret_cast<std::byte*>(out.data()));
  if (st.ok()) {
    out.append(reinterpret_cast<const char*>(body.data()), body.size());
  } else {
    out += text;
  }
  return out;
}

// Handshake frames (Proof on the server, Welcome / GoAway on the client).
void RdmaConnection::handle_handshake(std::span<const std::byte> frame) {
  auto hr = decode_header(frame);
  if (!hr.ok() || frame.size() < kFrameHeaderSize + hr->body_length) {
    Status bad = Status::ProtocolError("rdma: malformed handshake frame from " + peer_);
    if (role_ == Role::kClient) finish_connect(bad);
    fail(bad);
    return;
  }
  const FrameHeader& h = *hr;
  auto body = frame.subspan(kFrameHeaderSize, h.body_length);
  if (role_ == Role::kServer) {
    Proof got{};
    bool ok = h.type == FrameType::kProof && body.size() == kProofSize;
    if (ok) {
      std::memcpy(got.data(), body.data(), kProofSize);
      ok = proofs_equal(got, client_proof(key_, my_nonce_, peer_nonce_));
    }
    if (!ok) {
      Status why = Status::AuthFailed("rdma: " + peer_ + " failed the cluster key check");
      SLOG_WARN("{}", why.message());
      {
        std::lock_guard lk(mu_);
        close_after_send_ = true;
        close_reason_ = why;
      }
      [[maybe_unused]] Status s =
          send_message(control_frame(static_cast<int>(FrameType::kGoAway), why, {}));
      return;
    }
    Proof mine = server_proof(key_, peer_nonce_, my_nonce_);
    {
      std::lock_guard lk(mu_);
      state_ = State::kReady;
    }
    // Queued before any response: FIFO keeps the Welcome first.
    [[maybe_unused]] Status s = send_message(control_frame(
        static_cast<int>(FrameType::kWelcome), Status::OK(), {mine.data(), mine.size()}));
    if (cbs_.on_ready) cbs_.on_ready();
    return;
  }
  // Client.
  if (h.type == FrameType::kGoAway) {
    std::string msg(reinterpret_cast<const char*>(body.data()), body.size());
    Status why(h.status != 0 ? static_cast<Code>(h.status) : Code::kAuthFailed,
               "rdma: " + peer_ + " refused the connection: " + msg);
    finish_connect(why);
    return;
  }
  Proof got{};
  bool ok = h.type == FrameType::kWelcome && body.size() == kProofSize;
  if (ok) {
    std::memcpy(got.data(), body.data(), kProofSize);
    ok = proofs_equal(got, server_proof(key_, my_nonce_, peer_nonce_));
  }
  if (!ok) {
    finish_connect(
        Status::AuthFailed("rdma: " + peer_ + " could not prove the cluster key (wrong key?)"));
    return;
  }
  {
    std::lock_guard lk(mu_);
    state_ = State::kReady;
  }
  finish_connect(Status::OK());
}

// ----------------------------------------------------------- completions

void RdmaConnection::on_cq_readable() {
  if (comp_ == nullptr) return;
  // A caller is reaping (drive): it consumes the events too.
  std::unique_lock rl(reap_mu_, std::try_to_lock);
  if (!rl.owns_lock()) return;
  reaper_ = std::this_thread::get_id();
  consume_events_and_rearm();
  poll_cq();
  reaper_ = std::thread::id();
}

void RdmaConnection::consume_events_and_rearm() {
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  while (ibv_get_cq_event(comp_, &ev_cq, &ev_ctx) == 0) ibv_ack_cq_events(ev_cq, 1);
  if (cq_ != nullptr && ibv_req_notify_cq(cq_, 0) != 0) {
    SLOG_ERROR("rdma: re-arming the CQ of {} failed", peer_);
  }
}

void RdmaConnection::sleep_on_channel(int timeout_ms) {
  // The CQ is empty and armed (every event consumed re-arms before the
  // next poll): sleep until a completion. The timeout only bounds a miss.
  pollfd p{comp_->fd, POLLIN, 0};
  ::poll(&p, 1, timeout_ms);
  consume_events_and_rearm();
}

void RdmaConnection::on_poll() {
  std::unique_lock rl(reap_mu_, std::try_to_lock);
  if (!rl.owns_lock()) return;
  reaper_ = std::this_thread::get_id();
  poll_cq();
  reaper_ = std::thread::id();
}

bool RdmaConnection::drive(const std::function<bool()>& done,
                           std::chrono::steady_clock::time_point deadline) {
  if (loop_->in_loop() || loop_->polling()) return false;
  std::unique_lock rl(reap_mu_, std::try_to_lock);
  if (!rl.owns_lock()) return false;
  int fd;
  {
    std::lock_guard lk(mu_);
    if (state_ != State::kReady || comp_ == nullptr) return false;
    ++drivers_;  // keeps the CQ and its channel until we are out
    fd = comp_->fd;
  }
  auto keep = shared_from_this();
  reaper_ = std::this_thread::get_id();
  loop_->pause_fd(fd);
  ibv_wc wcs[16];
  while (ready()) {
    // Whatever is polled gets dispatched before the drive ends, even once
    // its own call is done: a completion taken off the CQ raises no event
    // any more, and the caller it answers would sleep to its deadline.
    // (Completions left by the loop thread come first.)
    if (!reaped_.empty()) {
      ibv_wc wc = reaped_.front();
      reaped_.pop_front();
      dispatch(wc);
      continue;
    }
    if (done()) break;
    int n = ibv_poll_cq(cq_, 16, wcs);
    if (n < 0) {
      fail(Status::IOError("rdma: ibv_poll_cq failed on " + peer_));
      break;
    }
    if (n > 0) {
      reaped_.insert(reaped_.end(), wcs, wcs + n);
      continue;
    }
    auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    sleep_on_channel(static_cast<int>(std::min<int64_t>(left.count(), 100)));
  }
  loop_->resume_fd(fd);  // events still pending now reach the loop
  reaper_ = std::thread::id();
  rl.unlock();
  bool closing;
  {
    std::lock_guard lk(mu_);
    --drivers_;
    closing = state_ >= State::kClosing;
  }
  // A close while we reaped left the destroy to us (we may have taken
  // the last flushes): the loop does it.
  if (closing) {
    loop_->post([keep] {
      std::lock_guard lk(keep->mu_);
      keep->maybe_destroy_locked();
    });
  }
  return true;
}

void RdmaConnection::poll_cq() {
  auto keep = shared_from_this();
  ibv_wc wcs[32];
  for (;;) {
    if (cq_ == nullptr) return;
    if (reaped_.empty()) {
      int n = ibv_poll_cq(cq_, 32, wcs);
      if (n <= 0) {
        if (n < 0) fail(Status::IOError("rdma: ibv_poll_cq failed on " + peer_));
        return;
      }
      reaped_.insert(reaped_.end(), wcs, wcs + n);
    }
    // A handler run in place (under handle_recv) reaps on its own and
    // leaves the receives it finds here, behind the ones polled before.
    while (!reaped_.empty()) {
      ibv_wc wc = reaped_.front();
      reaped_.pop_front();
      dispatch(wc);
    }
    std::lock_guard lk(mu_);
    maybe_destroy_locked();
  }
}

void RdmaConnection::dispatch(const ibv_wc& wc) {
  if (wc.wr_id & kRecvFlag) {
    handle_recv(wc);
  } else {
    handle_send(wc);
  }
}

bool RdmaConnection::messages_waiting() const {
  return std::any_of(reaped_.begin(), reaped_.end(),
                     [](const ibv_wc& wc) { return (wc.wr_id & kRecvFlag) != 0; });
}

Status RdmaConnection::wait_on_loop(OpWaiter& waiter) {
  auto keep = shared_from_this();
  auto done = [&] {
    std::lock_guard lk(waiter.mu);
    return waiter.remaining == 0;
  };
  // Send completions polled before the handler ran go first: handle_send
  // retires every earlier work request, so their order must hold.
  std::vector<ibv_wc> sends;
  std::deque<ibv_wc> recvs;
  for (const ibv_wc& wc : reaped_) {
    if (wc.wr_id & kRecvFlag) {
      recvs.push_back(wc);
    } else {
      sends.push_back(wc);
    }
  }
  reaped_.swap(recvs);
  for (const ibv_wc& wc : sends) handle_send(wc);
  ibv_wc wcs[16];
  while (!done()) {
    // Destroyed: every signaled work request (ours too) has completed.
    if (cq_ == nullptr) break;
    int n = ibv_poll_cq(cq_, 16, wcs);
    if (n < 0) {
      Status st = Status::IOError("rdma: ibv_poll_cq failed on " + peer_);
      fail(st);
      return st;
    }
    for (int i = 0; i < n; ++i) {
      if (wcs[i].wr_id & kRecvFlag) {
        reaped_.push_back(wcs[i]);
      } else {
        handle_send(wcs[i]);
      }
    }
    if (n > 0 || loop_->polling()) continue;
    sleep_on_channel(100);
  }
  std::lock_guard lk(waiter.mu);
  if (waiter.remaining != 0) {
    return Status::Disconnected("rdma: connection to " + peer_ + " closed during a bulk transfer");
  }
  return waiter.status;
}

void RdmaConnection::handle_recv(const ibv_wc& wc) {
  auto slot = static_cast<uint32_t>(wc.wr_id & ~kRecvFlag);
  State st;
  {
    std::lock_guard lk(mu_);
    --recvs_posted_;
    st = state_;
  }
  metrics_.rdma_recv_completions->inc();
  if (wc.status != IBV_WC_SUCCESS) {
    metrics_.rdma_recv_completion_errors->inc();
    if (st < State::kClosing) {
      shutdown(Status::Disconnected("rdma: receive on " + peer_ + " failed: " + wc_error(wc)));
    }
    return;
  }
  metrics_.received_bytes.inc(wc.byte_len);
  if (st >= State::kClosing) return;
  const std::byte* p = recv_bufs_[slot].data();
  if (wc.byte_len < kMsgHeaderSize || get_u32(p) != kMsgMagic ||
      get_u32(p + 12) > wc.byte_len - kMsgHeaderSize) {
    fail(Status::ProtocolError("rdma: malformed message header from " + peer_));
    return;
  }
  uint8_t type = std::to_integer<uint8_t>(p[4]);
  uint8_t flags = std::to_integer<uint8_t>(p[5]);
  uint16_t ctrl_back = get_u16(p + 6);
  uint32_t credits_back = get_u32(p + 8);
  uint32_t len = get_u32(p + 12);
  {
    std::lock_guard lk(mu_);
    send_credits_ += credits_back;
    ctrl_credits_ += ctrl_back;
    if (type == kTypeCtrl) {
      Status s = post_recv_locked(slot);
      if (s.ok()) ++owed_ctrl_;
    }
    pump_locked();
  }
  if (type == kTypeCtrl) return;
  if (type != kTypeData) {
    fail(Status::ProtocolError("rdma: unknown message type from " + peer_));
    return;
  }
  bool more = (flags & kFlagMore) != 0;
  if (st == State::kHandshake && (more || !frag_data_.empty())) {
    // Handshake frames fit one buffer: a peer that has not proven the key
    // gets nothing assembled for it.
    fail(Status::ProtocolError("rdma: fragmented message from " + peer_ +
                               " before the handshake is done"));
    return;
  }
  if (more || !frag_data_.empty()) {
    if (frag_data_.size() + len > kMaxMessage) {
      frag_data_.clear();
      fail(Status::ProtocolError("rdma: message from " + peer_ + " exceeds " +
                                 std::to_string(kMaxMessage) + " bytes"));
      return;
    }
    // A fragment is copied out, so its buffer goes back at once: a message
    // larger than all receive buffers together must still get through.
    frag_data_.append(reinterpret_cast<const char*>(p + kMsgHeaderSize), len);
    repost({slot}, true);
  } else {
    frag_slots_.push_back(slot);
  }
  if (more) return;
  RdmaMessage m;
  m.conn_ = shared_from_this();
  m.slots_ = std::move(frag_slots_);
  frag_slots_.clear();
  if (!frag_data_.empty()) {
    m.assembled_ = std::move(frag_data_);
    frag_data_.clear();
    m.view_ = {reinterpret_cast<const std::byte*>(m.assembled_.data()), m.assembled_.size()};
  } else {
    m.view_ = {p + kMsgHeaderSize, len};
  }
  State now;
  {
    std::lock_guard lk(mu_);
    now = state_;
  }
  if (now == State::kHandshake) {
    // Give the buffer back first so the reply already returns its credit.
    std::string frame(reinterpret_cast<const char*>(m.bytes().data()), m.bytes().size());
    m.release();
    handle_handshake({reinterpret_cast<const std::byte*>(frame.data()), frame.size()});
    return;
  }
  if (now == State::kReady && cbs_.on_message) cbs_.on_message(std::move(m));
}

void RdmaConnection::handle_send(const ibv_wc& wc) {
  std::unique_ptr<Wr> w;
  Status err;
  metrics_.rdma_send_completions->inc();
  if (wc.status != IBV_WC_SUCCESS) metrics_.rdma_send_completion_errors->inc();
  {
    std::lock_guard lk(mu_);
    auto it = posted_.find(wc.wr_id);
    if (it == posted_.end()) {
      SLOG_ERROR("rdma: completion for unknown work request {} on {}", wc.wr_id, peer_);
      return;
    }
    // Unsignaled work requests posted before this one have completed (in
    // order, successfully: a failed one has a completion of its own).
    for (auto e = posted_.begin(); e != it;) {
      Wr& done = *e->second;
      --sq_outstanding_;
      if (done.slot >= 0) free_send_slots_.push_back(static_cast<uint32_t>(done.slot));
      e = posted_.erase(e);
    }
    w = std::move(it->second);
    posted_.erase(it);
    --sq_outstanding_;
    if (w->signaled) --signaled_outstanding_;
    if (w->kind == Wr::Kind::kRead) --rd_outstanding_;
    if (w->slot >= 0) free_send_slots_.push_back(static_cast<uint32_t>(w->slot));
    // An invalidated window is free to be bound again (with a new key).
    if (w->kind == Wr::Kind::kInvalidate && wc.status == IBV_WC_SUCCESS) {
      free_mws_.push_back(w->mw);
    }
    if (wc.status != IBV_WC_SUCCESS) {
      const char* what = w->kind == Wr::Kind::kRead         ? "RDMA READ"
                         : w->kind == Wr::Kind::kWrite      ? "RDMA WRITE"
                         : w->kind == Wr::Kind::kBind       ? "memory window bind"
                         : w->kind == Wr::Kind::kInvalidate ? "memory window invalidate"
                                                            : "SEND";
      if (wc.status == IBV_WC_WR_FLUSH_ERR) {
        err = Status::Disconnected(std::string("rdma: ") + what + " to " + peer_ +
                                   " flushed: " + close_reason_.ToString());
      } else if (wc.status == IBV_WC_REM_ACCESS_ERR || wc.status == IBV_WC_LOC_PROT_ERR ||
                 wc.status == IBV_WC_REM_INV_REQ_ERR) {
        char buf[96];
        snprintf(buf, sizeof buf,
                 " addr 0x%llx len %llu rkey 0x%x: ", static_cast<unsigned long long>(w->remote),
                 static_cast<unsigned long long>(w->length), w->rkey);
        err = Status::PermissionDenied(std::string("rdma: ") + what + " at " + peer_ + buf +
                                       wc_error(wc) + " (bad bulk descriptor)");
      } else if (wc.status == IBV_WC_RETRY_EXC_ERR || wc.status == IBV_WC_RNR_RETRY_EXC_ERR) {
        err = Status::Unavailable(std::string("rdma: ") + what + " to " + peer_ + ": " +
                                  wc_error(wc) + " (peer gone?)");
      } else {
        err = Status::IOError(std::string("rdma: ") + what + " to " + peer_ + ": " + wc_error(wc));
      }
    } else {
      pump_locked();
      if (close_after_send_ && posted_.empty() && queue_.empty()) {
        err = close_reason_;
      }
    }
  }
  if (w->waiter) w->waiter->complete(err);
  if (!err.ok() && wc.status != IBV_WC_WR_FLUSH_ERR) fail(err);
}

// --------------------------------------------------------------- sending

Status RdmaConnection::post_recv_locked(uint32_t slot) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(recv_bufs_[slot].data());
  sge.length = limits_.buffer_size;
  auto keys = device_->find_keys(recv_bufs_[slot].data(), limits_.buffer_size);
  if (!keys) {
    return Status::Internal("rdma: receive buffer for " + peer_ + " is not registered on " +
                            device_->name());
  }
  sge.lkey = keys->lkey;
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = kRecvFlag | slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (ibv_post_recv(qp_, &wr, &bad) != 0) {
    return Status::FromErrno(errno, "rdma: ibv_post_recv on " + peer_);
  }
  ++recvs_posted_;
  return Status::OK();
}

void RdmaConnection::repost(const std::vector<uint32_t>& slots, bool data) {
  std::lock_guard lk(mu_);
  if (state_ >= State::kClosing || qp_ == nullptr) return;
  for (uint32_t s : slots) {
    if (!post_recv_locked(s).ok()) return;
    if (data) ++owed_credits_;
  }
  pump_locked();
}

Status RdmaConnection::send_message(std::string msg) {
  std::lock_guard lk(mu_);
  if (state_ >= State::kClosing) {
    return Status::Disconnected("rdma: connection to " + peer_ +
                                " is closed: " + close_reason_.ToString());
  }
  size_t frag = (peer_buffer_size_ != 0 ? peer_buffer_size_ : limits_.buffer_size) - kMsgHeaderSize;
  size_t off = 0;
  do {
    auto w = std::make_unique<Wr>();
    size_t n = std::min(frag, msg.size() - off);
    if (off == 0 && n == msg.size()) {
      w->payload = std::move(msg);
    } else {
      w->payload.assign(msg, off, n);
    }
    off += n;
    w->flags = off < msg.size() ? kFlagMore : 0;
    queue_.push_back(std::move(w));
  } while (off < msg.size());
  pump_locked();
  return Status::OK();
}

void RdmaConnection::pump_locked() {
  if (qp_ == nullptr || state_ >= State::kClosing) return;
  auto post = [&](std::unique_ptr<Wr> w) -> bool {
    ibv_sge sge{};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    uint64_t id = next_wr_id_++;
    wr.wr_id = id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (w->kind == Wr::Kind::kMessage) {
      // A SEND needs no completion of its own unless its buffer (or queue
      // room) may be needed soon: signal every 16th, and every one while
      // send buffers or queue slots run low or a close waits for it. The
      // completion of a signaled one retires the unsignaled before it.
      const size_t low_slots = send_bufs_.size() / 2;
      // Staged WRITEs (never signaled) give their buffers back on the
      // next signaled completion: do not let too many wait for one.
      w->signaled = ++unsignaled_run_ >= 16 || free_send_slots_.size() < low_slots ||
                    sq_outstanding_ + 1 >= limits_.send_queue_depth / 2 || close_after_send_ ||
                    staged_unsignaled_ >= 4;
    }
    if (w->signaled) {
      wr.send_flags = IBV_SEND_SIGNALED;
      unsignaled_run_ = 0;
      staged_unsignaled_ = 0;
    } else if (w->staged) {
      ++staged_unsignaled_;
    }
    if (w->kind == Wr::Kind::kMessage) {
      std::byte* b = send_bufs_[w->slot].data();
      put_u32(b, kMsgMagic);
      b[4] = std::byte{w->control ? kTypeCtrl : kTypeData};
      b[5] = std::byte{w->flags};
      put_u16(b + 6, static_cast<uint16_t>(owed_ctrl_));
      put_u32(b + 8, owed_credits_);
      put_u32(b + 12, static_cast<uint32_t>(w->payload.size()));
      std::memcpy(b + kMsgHeaderSize, w->payload.data(), w->payload.size());
      owed_ctrl_ = 0;
      owed_credits_ = 0;
      w->payload.clear();
      sge.addr = reinterpret_cast<uintptr_t>(b);
      sge.length = static_cast<uint32_t>(kMsgHeaderSize + get_u32(b + 12));
      sge.lkey = send_lkey_;
      wr.opcode = IBV_WR_SEND;
    } else if (w->kind == Wr::Kind::kBind) {
      wr.sg_list = nullptr;
      wr.num_sge = 0;
      wr.opcode = IBV_WR_BIND_MW;
      wr.bind_mw.mw = w->mw;
      wr.bind_mw.rkey = w->rkey;
      wr.bind_mw.bind_info.mr = w->mr;
      wr.bind_mw.bind_info.addr = reinterpret_cast<uintptr_t>(w->local);
      wr.bind_mw.bind_info.length = w->length;
      wr.bind_mw.bind_info.mw_access_flags =
          w->remote_write ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ;
    } else if (w->kind == Wr::Kind::kInvalidate) {
      wr.sg_list = nullptr;
      wr.num_sge = 0;
      wr.opcode = IBV_WR_LOCAL_INV;
      wr.invalidate_rkey = w->rkey;
    } else {
      sge.addr = reinterpret_cast<uintptr_t>(w->local);
      sge.length = static_cast<uint32_t>(w->length);
      sge.lkey = w->lkey;
      wr.opcode = w->kind == Wr::Kind::kRead ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
      wr.wr.rdma.remote_addr = w->remote;
      wr.wr.rdma.rkey = w->rkey;
    }
    if (ibv_post_send(qp_, &wr, &bad) != 0) {
      int e = errno;
      if (w->slot >= 0) free_send_slots_.push_back(static_cast<uint32_t>(w->slot));
      if (w->waiter) {
        w->waiter->complete(Status::FromErrno(e, "rdma: ibv_post_send to " + peer_));
      }
      close_reason_ = Status::FromErrno(e, "rdma: ibv_post_send to " + peer_);
      auto self = shared_from_this();
      Status why = close_reason_;
      loop_->post([self, why] { self->shutdown(why); });
      return false;
    }
    // Bytes out (SEND, WRITE) and in (READ), counted when posted.
    if (w->kind == Wr::Kind::kMessage || w->kind == Wr::Kind::kWrite) {
      metrics_.sent_bytes.inc(sge.length);
    } else if (w->kind == Wr::Kind::kRead) {
      metrics_.received_bytes.inc(sge.length);
    }
    if (w->kind == Wr::Kind::kBind) {
      // The provider names the window by ibv_mw::rkey in the bind (librxe
      // passes it as the window's identity and the kernel compares it with
      // the window's current key): it must follow every bind, or the next
      // bind of this window fails ("memory management operation error").
      w->mw->rkey = w->rkey;
    }
    ++sq_outstanding_;
    if (w->signaled) ++signaled_outstanding_;
    if (w->kind == Wr::Kind::kRead) ++rd_outstanding_;
    posted_.emplace(id, std::move(w));
    return true;
  };
  // Credits go back first, on control messages that never wait behind data.
  uint32_t threshold = std::max<uint32_t>(1, limits_.data_recvs / 4);
  if (owed_credits_ >= threshold && ctrl_credits_ > 0 && !free_send_slots_.empty() &&
      sq_outstanding_ < limits_.send_queue_depth) {
    auto w = std::make_unique<Wr>();
    w->control = true;
    w->slot = static_cast<int>(free_send_slots_.back());
    free_send_slots_.pop_back();
    --ctrl_credits_;
    if (!post(std::move(w))) return;
  }
  while (!queue_.empty() && sq_outstanding_ < limits_.send_queue_depth) {
    Wr& head = *queue_.front();
    if (head.kind == Wr::Kind::kMessage) {
      // Keep one send buffer for a control message.
      if (send_credits_ == 0 || free_send_slots_.size() < 2) break;
      head.slot = static_cast<int>(free_send_slots_.back());
      free_send_slots_.pop_back();
      --send_credits_;
    } else if (head.kind == Wr::Kind::kRead && rd_outstanding_ >= max_rd_) {
      break;
    }
    auto w = std::move(queue_.front());
    queue_.pop_front();
    if (!post(std::move(w))) return;
  }
}

Result<RdmaConnection::Window> RdmaConnection::bind_window(void* addr, uint64_t len,
                                                           bool remote_write) {
  if (!windows_enabled_) {
    return Status::NotSupported("rdma: no type 2 memory windows on the device of " + peer_);
  }
  ibv_mr* mr = device_->find_mr(addr, len);
  if (mr == nullptr) {
    return Status::InvalidArgument("rdma: a window over " + std::to_string(len) + " bytes for " +
                                   peer_ + " needs registered memory");
  }
  std::lock_guard lk(mu_);
  if (state_ != State::kReady) {
    return Status::Disconnected("rdma: connection to " + peer_ +
                                " is not open: " + close_reason_.ToString());
  }
  ibv_mw* mw = nullptr;
  if (!free_mws_.empty()) {
    mw = free_mws_.back();
    free_mws_.pop_back();
  } else {
    mw = ibv_alloc_mw(device_->pd(), IBV_MW_TYPE_2);
    if (mw == nullptr) {
      return Status::FromErrno(errno, "rdma: ibv_alloc_mw (type 2) for " + peer_);
    }
    all_mws_.push_back(mw);
  }
  // A fresh key each bind: an old rkey of this window never works again.
  // (mw->rkey is the current key; it becomes `rkey` when the bind posts.)
  uint32_t rkey = ibv_inc_rkey(mw->rkey);
  auto w = std::make_unique<Wr>();
  w->kind = Wr::Kind::kBind;
  w->signaled = false;  // a failed bind still reports; success needs no action
  w->mw = mw;
  w->mr = mr;
  w->local = static_cast<std::byte*>(addr);
  w->length = len;
  w->rkey = rkey;
  w->remote_write = remote_write;
  queue_.push_back(std::move(w));
  pump_locked();
  return Window{mw, rkey};
}

void RdmaConnection::release_window(const Window& win) {
  if (win.mw == nullptr) return;
  std::lock_guard lk(mu_);
  if (state_ >= State::kClosing) return;  // dead QP: windows go at destroy
  auto w = std::make_unique<Wr>();
  w->kind = Wr::Kind::kInvalidate;
  w->mw = win.mw;
  w->rkey = win.rkey;
  queue_.push_back(std::move(w));
  pump_locked();
}

Status RdmaConnection::bulk_op(bool is_read, std::byte* local, uint64_t len, uint64_t remote,
                               uint32_t rkey) {
  if (len == 0) return Status::OK();
  auto keys = device_ ? device_->find_keys(local, len) : std::nullopt;
  if (!keys) {
    return Status::InvalidArgument("rdma: local buffer of " + std::to_string(len) + " bytes for " +
                                   peer_ + " is not in registered memory");
  }
  uint64_t chunk = std::max<uint64_t>(4096, std::min(limits_.max_chunk, device_->max_msg_size()));
  auto waiter = std::make_shared<OpWaiter>();
  waiter->remaining = (len + chunk - 1) / chunk;
  {
    std::lock_guard lk(mu_);
    if (state_ != State::kReady) {
      return Status::Disconnected("rdma: connection to " + peer_ +
                                  " is not open: " + close_reason_.ToString());
    }
    for (uint64_t off = 0; off < len; off += chunk) {
      auto w = std::make_unique<Wr>();
      w->kind = is_read ? Wr::Kind::kRead : Wr::Kind::kWrite;
      w->local = local + off;
      w->lkey = keys->lkey;
      w->length = std::min(chunk, len - off);
      w->remote = remote + off;
      w->rkey = rkey;
      w->waiter = waiter;
      queue_.push_back(std::move(w));
    }
    pump_locked();
  }
  // A handler run in place: nobody else would reap the completions.
  if (loop_->in_loop()) return wait_on_loop(*waiter);
  std::unique_lock lk(waiter->mu);
  waiter->cv.wait(lk, [&] { return waiter->remaining == 0; });
  return waiter->status;
}

bool RdmaConnection::can_write_staged(const void* p, uint64_t len) const {
  return device_ != nullptr && len <= std::min(limits_.max_chunk, device_->max_msg_size()) &&
         device_->find_keys(p, len).has_value();
}

Status RdmaConnection::write_staged(PoolBuffer staged, uint64_t len, uint64_t remote_addr,
                                    uint32_t rkey) {
  if (len == 0) return Status::OK();
  auto keys = device_ ? device_->find_keys(staged.data(), len) : std::nullopt;
  if (!keys || len > staged.capacity() ||
      len > std::min(limits_.max_chunk, device_->max_msg_size())) {
    return Status::InvalidArgument("rdma: a staged write of " + std::to_string(len) +
                                   " bytes for " + peer_ +
                                   " needs one registered buffer and one work request");
  }
  std::lock_guard lk(mu_);
  if (state_ != State::kReady) {
    return Status::Disconnected("rdma: connection to " + peer_ +
                                " is not open: " + close_reason_.ToString());
  }
  auto w = std::make_unique<Wr>();
  w->kind = Wr::Kind::kWrite;
  w->local = staged.data();
  w->lkey = keys->lkey;
  w->length = len;
  w->remote = remote_addr;
  w->rkey = rkey;
  w->signaled = false;
  w->staged = std::move(staged);
  queue_.push_back(std::move(w));
  pump_locked();
  return Status::OK();
}

Status RdmaConnection::read(std::span<std::byte> local, uint64_t remote_addr, uint32_t rkey) {
  return bulk_op(true, local.data(), local.size(), remote_addr, rkey);
}

Status RdmaConnection::write(std::span<const std::byte> local, uint64_t remote_addr,
                             uint32_t rkey) {
  return bulk_op(false, const_cast<std::byte*>(local.data()), local.size(), remote_addr, rkey);
}

// -------------------------------------------------------------- teardown

void RdmaConnection::close(const Status& why) {
  auto self = shared_from_this();
  {
    // Already closing: nothing to do, and the loop may be gone (a server
    // handler closing a connection after the server stopped).
    std::lock_guard lk(mu_);
    if (state_ >= State::kClosing) return;
  }
  loop_->run_sync([&] { shutdown(why); });
  // A caller still in drive() may be delivering a message: wait for it, so
  // no callback runs after close() returns (it leaves as it sees closing).
  if (reaper_.load() != std::this_thread::get_id()) {
    std::lock_guard rl(reap_mu_);
  }
}

void RdmaConnection::fail(const Status& why) {
  {
    std::lock_guard lk(mu_);
    if (state_ >= State::kClosing) return;
  }
  SLOG_WARN("rdma: closing connection {}: {}", peer_, why.ToString());
  shutdown(why);
}

void RdmaConnection::shutdown(const Status& why) {
  if (!loop_->in_loop()) {
    // A caller in drive() found the fault: teardown is the loop's.
    loop_->post([self = shared_from_this(), why] { self->shutdown(why); });
    return;
  }
  std::deque<std::unique_ptr<Wr>> dropped;
  bool notify = false;
  {
    std::lock_guard lk(mu_);
    if (state_ >= State::kClosing) return;
    bool was_ready = state_ == State::kReady;
    state_ = State::kClosing;
    close_reason_ = why;
    dropped.swap(queue_);
    notify = !closed_notified_ && (was_ready || role_ == Role::kServer);
    closed_notified_ = true;
    if (qp_ != nullptr) {
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_ERR;
      ibv_modify_qp(qp_, &a, IBV_QP_STATE);  // flushes every posted work request
    }
    if (id_ != nullptr) rdma_disconnect(id_);
    if (!connect_done_ && role_ == Role::kClient) {
      connect_done_ = true;
      connect_status_ = why;
      state_cv_.notify_all();
    }
  }
  for (auto& w : dropped) {
    if (w->waiter) w->waiter->complete(why);
  }
  SLOG_DEBUG("rdma: closing connection {}: {}", peer_, why.ToString());
  if (notify && cbs_.on_closed) cbs_.on_closed(why);
  // Flush completions arrive on the CQ; the last one destroys everything.
  std::lock_guard lk(mu_);
  maybe_destroy_locked();
}

void RdmaConnection::maybe_destroy_locked() {
  // Unsignaled work requests may never report (done before the QP went to
  // the error state): the signaled ones and the receives are what must
  // drain, and destroying the QP stops the device touching the rest.
  if (state_ != State::kClosing || signaled_outstanding_ != 0 || recvs_posted_ != 0 ||
      drivers_ != 0) {
    return;
  }
  state_ = State::kClosed;
  if (comp_ != nullptr) loop_->remove_fd(comp_->fd);
  loop_->remove_poller(this);
  // Windows first: a bound type 2 window holds a reference on its QP, and
  // destroying the QP under it makes rxe wait and warn (__rxe_cleanup).
  for (ibv_mw* mw : all_mws_) ibv_dealloc_mw(mw);
  all_mws_.clear();
  free_mws_.clear();
  if (qp_ != nullptr) rdma_destroy_qp(id_);
  qp_ = nullptr;
  posted_.clear();
  reaped_.clear();
  if (cq_ != nullptr && ibv_destroy_cq(cq_) != 0) {
    SLOG_ERROR("rdma: ibv_destroy_cq for {} failed", peer_);
  }
  cq_ = nullptr;
  if (comp_ != nullptr) ibv_destroy_comp_channel(comp_);
  comp_ = nullptr;
  if (id_ != nullptr) {
    id_->context = nullptr;
    rdma_destroy_id(id_);
  }
  id_ = nullptr;
  if (device_) {
    if (msg_pool_attached_) device_->detach_pool(*msg_pool_);
    if (user_pool_attached_) device_->detach_pool(*user_pool_);
    msg_pool_attached_ = user_pool_attached_ = false;
  }
  state_cv_.notify_all();
  // Drop our self-reference once out of this call stack.
  loop_->post([keep = std::move(self_)] {});
}

bool RdmaConnection::ready() const {
  std::lock_guard lk(mu_);
  return state_ == State::kReady;
}

bool RdmaConnection::destroyed() const {
  std::lock_guard lk(mu_);
  return state_ == State::kClosed;
}

RdmaConnection::Counters RdmaConnection::counters() const {
  std::lock_guard lk(mu_);
  return {send_credits_, static_cast<uint32_t>(queue_.size()), recvs_posted_};
}

}  // namespace surge::net::rdma
