// RpcServer core: handler table, credits, dispatch (inline or to the
// worker pool of the request's lane).
// Transport-agnostic; the transport (net/transport.h) hands it requests.
//
// Invariants: every request the transport delivers gets exactly one
// RequestBulk::finish() and at most one reply; a connection's in_flight is
// decremented BEFORE its reply is sent, so a client that reuses the credit
// the instant the reply lands is never counted twice.
#include "net/rpc_server.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/log.h"
#include "net/handler_watch.h"
#include "net/transport.h"
#include "net/transport_metrics.h"

namespace surge::net {

namespace {

class Context final : public RpcContext {
 public:
  Context(BulkHandle& bulk, const ServerConnection& conn, BufferPool& pool, bool in_place,
          bool may_defer)
      : bulk_(bulk), conn_(conn), pool_(pool), in_place_(in_place), may_defer_(may_defer) {}
  BulkHandle& bulk() override { return bulk_; }
  const std::string& peer() const override { return conn_.peer(); }
  BufferPool& pool() override { return pool_; }
  uint64_t connection_id() const override { return conn_.id; }
  bool on_transport_thread() const override { return in_place_; }
  bool defer_to_worker() override {
    deferred_ = may_defer_;
    return deferred_;
  }
  bool deferred() const override { return deferred_; }

 private:
  BulkHandle& bulk_;
  const ServerConnection& conn_;
  BufferPool& pool_;
  const bool in_place_;
  const bool may_defer_;  // a kShortBlocking handler run in place
  bool deferred_ = false;
};

struct HandlerEntry {
  RawHandler fn;
  HandlerMode mode;
  LaneOf lane;  // empty: lane 0
};

struct Task {
  std::shared_ptr<ServerConnection> conn;
  InboundRequest req;
  const HandlerEntry* entry;
};

uint32_t handler_key(uint16_t service, uint16_t method) {
  return (uint32_t{service} << 16) | method;
}

class RpcServerImpl final : public RpcServer, public RequestSink {
 public:
  explicit RpcServerImpl(ServerOptions options) : options_(std::move(options)) {}
  ~RpcServerImpl() override { stop(); }

  Status init() {
    SURGE_ASSIGN_OR_RETURN(Endpoint ep, parse_endpoint(options_.listen));
    metrics_ = &TransportMetrics::of(ep.kind, Side::kServer);
    if (options_.cluster_key.empty()) {
      return Status::InvalidArgument("server on " + options_.listen + ": empty cluster key");
    }
    if (options_.handshake_timeout.count() <= 0) {
      return Status::InvalidArgument("server on " + options_.listen +
                                     ": the handshake timeout must be positive");
    }
    if (options_.bulk_stall_timeout.count() <= 0) {
      return Status::InvalidArgument("server on " + options_.listen +
                                     ": the bulk stall timeout must be positive");
    }
    if (options_.credits_per_connection == 0 || options_.worker_threads < 1 ||
        options_.io_threads < 1) {
      return Status::InvalidArgument("server on " + options_.listen +
                                     ": credits, io_threads and worker_threads must be > 0");
    }
    for (int n : options_.lane_threads) {
      if (n < 1) {
        return Status::InvalidArgument("server on " + options_.listen +
                                       ": every worker lane needs a thread at least");
      }
    }
    lanes_ = std::vector<Lane>(options_.lane_threads.size() + 1);
    SURGE_ASSIGN_OR_RETURN(pool_, BufferPool::Create(options_.pool));
    ServerTransportOptions t;
    t.endpoint = ep;
    t.cluster_key = options_.cluster_key;
    t.io_threads = options_.io_threads;
    t.credits_per_connection = options_.credits_per_connection;
    t.handshake_timeout = options_.handshake_timeout;
    t.max_unauthenticated_connections = options_.max_unauthenticated_connections;
    t.max_unauthenticated_per_address = options_.max_unauthenticated_per_address;
    t.bulk_stall_timeout = options_.bulk_stall_timeout;
    t.pool = pool_.get();
    if (ep.kind == TransportKind::kRdma) {
      SURGE_ASSIGN_OR_RETURN(transport_, make_rdma_server(t, this));
    } else {
      SURGE_ASSIGN_OR_RETURN(transport_, make_tcp_server(t, this));
    }
    return Status::OK();
  }

  void add_raw(uint16_t service, uint16_t method, RawHandler handler, HandlerMode mode) override {
    if (started_) throw std::logic_error("RpcServer::add_raw after start()");
    auto [it, inserted] =
        handlers_.emplace(handler_key(service, method), HandlerEntry{std::move(handler), mode, {}});
    if (!inserted) {
      throw std::logic_error("second handler for service " + std::to_string(service) +
                             " method " + std::to_string(method));
    }
  }

  void route(uint16_t service, uint16_t method, LaneOf lane) override {
    if (started_) throw std::logic_error("RpcServer::route after start()");
    auto it = handlers_.find(handler_key(service, method));
    if (it == handlers_.end() || it->second.mode != HandlerMode::kWorker) {
      throw std::logic_error("route of service " + std::to_string(service) + " method " +
                             std::to_string(method) + ": no kWorker handler registered");
    }
    it->second.lane = std::move(lane);
  }

  Status start() override {
    if (started_) return Status::InvalidArgument("server " + address() + " already started");
    started_ = true;
    watch_ = std::make_unique<HandlerWatch>(address(), kTransportThreadWarnAfter);
    for (size_t l = 0; l < lanes_.size(); ++l) {
      const int n = l == 0 ? options_.worker_threads : options_.lane_threads[l - 1];
      for (int i = 0; i < n; ++i) workers_.emplace_back([this, l] { worker_loop(lanes_[l]); });
    }
    Status st = transport_->start();
    if (st.ok()) SLOG_INFO("rpc server listening on {}", address());
    return st;
  }

  void stop() override {
    if (stopped_.exchange(true)) return;
    if (transport_) transport_->stop();
    std::deque<Task> leftover;
    {
      std::lock_guard lk(mu_);
      stopping_ = true;
      for (Lane& l : lanes_) {
        for (Task& t : l.queue) leftover.push_back(std::move(t));
        l.queue.clear();
      }
    }
    for (Lane& l : lanes_) l.cv.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
    for (Task& t : leftover) {
      metrics_->call_errors.inc();
      t.req.bulk->finish();
      t.conn->in_flight.fetch_sub(1);
      t.conn->send_response(t.req.request_id,
                            Status::Cancelled("server " + address() + " is stopping"), {});
    }
  }

  std::string address() const override { return transport_ ? transport_->address() : ""; }
  uint16_t port() const override { return transport_ ? transport_->port() : 0; }
  BufferPool& pool() override { return *pool_; }

  bool runs_in_place_when_allowed(uint16_t service, uint16_t method) const override {
    auto it = handlers_.find(handler_key(service, method));
    return it != handlers_.end() && it->second.mode == HandlerMode::kShortBlocking;
  }

  void on_request(std::shared_ptr<ServerConnection> conn, InboundRequest req) override {
    metrics_->calls.inc();
    uint32_t n = conn->in_flight.fetch_add(1) + 1;
    if (n > options_.credits_per_connection) {
      metrics_->call_errors.inc();
      conn->in_flight.fetch_sub(1);
      conn->close(Status::ProtocolError("peer exceeded its " +
                                        std::to_string(options_.credits_per_connection) +
                                        " credits (requests in flight)"));
      req.bulk->finish();
      return;
    }
    auto it = handlers_.find(handler_key(req.service, req.method));
    if (it == handlers_.end()) {
      metrics_->call_errors.inc();
      req.bulk->finish();
      conn->in_flight.fetch_sub(1);
      conn->send_response(req.request_id,
                          Status::UnknownMethod("server " + address() + " has no method " +
                                                std::to_string(req.service) + "." +
                                                std::to_string(req.method)),
                          {});
      return;
    }
    const HandlerMode mode = it->second.mode;
    if (mode == HandlerMode::kInline ||
        (mode == HandlerMode::kShortBlocking && req.may_block_here)) {
      HandlerWatch::Run watched(req.service, req.method, conn->peer());
      watch_->begin(watched);
      const bool done = run(*conn, req, it->second, /*in_place=*/true,
                            /*may_defer=*/mode == HandlerMode::kShortBlocking);
      watch_->end(watched);
      if (done) return;
      // Deferred by its handler: queued as any worker request (lane 0).
    }
    Lane& lane = lanes_[it->second.lane ? std::min(it->second.lane(req.body), lanes_.size() - 1)
                                        : 0];
    {
      std::unique_lock lk(mu_);
      if (!stopping_) {
        lane.queue.push_back(Task{std::move(conn), std::move(req), &it->second});
        lk.unlock();  // else the woken worker would only block on mu_
        lane.cv.notify_one();
        return;
      }
    }
    metrics_->call_errors.inc();
    req.bulk->finish();
    conn->in_flight.fetch_sub(1);
    conn->send_response(req.request_id, Status::Cancelled("server is stopping"), {});
  }

 private:
  // One worker pool: its queue (under mu_) and the wake-up of its threads.
  struct Lane {
    std::condition_variable cv;
    std::deque<Task> queue;
  };

  void worker_loop(Lane& lane) {
    for (;;) {
      Task t;
      {
        std::unique_lock lk(mu_);
        lane.cv.wait(lk, [&] { return stopping_ || !lane.queue.empty(); });
        if (lane.queue.empty()) return;
        t = std::move(lane.queue.front());
        lane.queue.pop_front();
      }
      run(*t.conn, t.req, *t.entry, /*in_place=*/false, /*may_defer=*/false);
    }
  }

  // False when the handler deferred itself to a worker (nothing finished,
  // nothing sent: the caller queues the request).
  bool run(ServerConnection& conn, InboundRequest& req, const HandlerEntry& entry, bool in_place,
           bool may_defer) {
    Context ctx(*req.bulk, conn, *pool_, in_place, may_defer);
    std::string response;
    Status st;
    try {
      st = entry.fn(ctx, req.body, response);
    } catch (const std::exception& e) {
      // A throwing handler is a bug, but one bad handler must not take the
      // whole server down: the caller sees Internal and the log says why.
      SLOG_ERROR("handler {}.{} threw for {}: {}", req.service, req.method, conn.peer(),
                 e.what());
      st = Status::Internal(std::string("handler threw: ") + e.what());
    }
    if (ctx.deferred()) return false;
    req.bulk->finish();
    conn.in_flight.fetch_sub(1);
    conn.send_response(req.request_id, st, st.ok() ? std::string_view(response) : "");
    return true;
  }

  // A handler on a transport thread this long holds up that thread's other
  // connections noticeably (in-place handlers take microseconds).
  static constexpr std::chrono::milliseconds kTransportThreadWarnAfter{1000};

  ServerOptions options_;
  TransportMetrics* metrics_ = nullptr;  // resolved in init(): counting takes no lock
  std::unique_ptr<BufferPool> pool_;
  std::unique_ptr<ServerTransport> transport_;
  std::unordered_map<uint32_t, HandlerEntry> handlers_;
  bool started_ = false;
  std::atomic<bool> stopped_{false};

  std::mutex mu_;
  std::vector<Lane> lanes_;  // [0]: the main pool (worker_threads)
  bool stopping_ = false;
  std::vector<std::thread> workers_;
  // From start(): names handlers that hold a transport thread.
  std::unique_ptr<HandlerWatch> watch_;
};

}  // namespace

Result<std::unique_ptr<RpcServer>> RpcServer::Create(ServerOptions options) {
  auto server = std::make_unique<RpcServerImpl>(std::move(options));
  SURGE_RETURN_IF_ERROR(server->init());
  return std::unique_ptr<RpcServer>(std::move(server));
}

}  // namespace surge::net
