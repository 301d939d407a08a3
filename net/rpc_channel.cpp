// RpcChannel core: request ids, the pending-call table, credits, per-call
// timeouts, ChannelPool. Transport-agnostic (net/transport.h).
//
// Invariants: a call holds one credit from the moment it enters the table
// until its reply arrives or the connection fails; a call that timed out
// stays in the table (abandoned) so its credit is only reused once the
// server has answered it, which keeps the client within the server's limit.
// The waiter alone decides a timeout: it sets `abandoned` under State::mu,
// after which the transport never writes into the call's regions.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "common/log.h"
#include "net/rpc_channel.h"
#include "net/transport.h"
#include "net/transport_metrics.h"

namespace surge::net {

namespace {

class CallTable final : public ClientCallTableBase {
 public:
  CallTable(std::string peer, TransportMetrics& metrics)
      : peer_(std::move(peer)), metrics_(metrics) {}

  void set_credits(uint32_t n) {
    std::lock_guard lk(mu_);
    credits_ = n;
  }
  const std::string& peer() const { return peer_; }
  TransportMetrics& metrics() { return metrics_; }

  // Takes a credit (waiting until the call's deadline) and enters the call.
  Status begin(const std::shared_ptr<PendingCall::State>& call) {
    std::unique_lock lk(mu_);
    if (credits_ == 0 && !failed_) {
      // Credits come back with replies; nobody may be reading them (callers
      // read their own replies when they wait), so wake the transport.
      if (call->driver) {
        lk.unlock();
        call->driver->kick();
        lk.lock();
      }
      if (!credit_cv_.wait_until(lk, call->deadline, [&] { return failed_ || credits_ > 0; })) {
        return Status::TimedOut("no credit for a call to " + peer_ +
                                " before its deadline (too many requests in flight)");
      }
    }
    if (failed_) return fail_status_;
    --credits_;
    calls_.emplace(call->request_id, call);
    return Status::OK();
  }

  std::shared_ptr<PendingCall::State> find(uint64_t request_id) override {
    std::lock_guard lk(mu_);
    auto it = calls_.find(request_id);
    return it == calls_.end() ? nullptr : it->second;
  }

  void complete(uint64_t request_id, Status status, std::string body) override {
    (void)take_and_finish(request_id, std::move(status), std::move(body));
  }

  // A request that did not go out: finished with `why` and counted as an
  // error, unless the connection's failure (fail_all) took it first.
  void fail_unsent(uint64_t request_id, Status why) {
    if (take_and_finish(request_id, std::move(why), {})) metrics_.call_errors.inc();
  }

  void fail_all(const Status& why) override {
    std::unordered_map<uint64_t, std::shared_ptr<PendingCall::State>> calls;
    {
      std::lock_guard lk(mu_);
      if (!failed_) {
        failed_ = true;
        fail_status_ = why;
      }
      calls.swap(calls_);
    }
    credit_cv_.notify_all();
    // Calls that timed out already were counted then (they stay in the
    // table until answered, for their credit).
    uint64_t failed = 0;
    for (auto& [id, call] : calls) failed += finish(*call, why, {}) ? 1 : 0;
    metrics_.call_errors.inc(failed);
  }

  bool has_outstanding() override {
    std::lock_guard lk(mu_);
    return !calls_.empty();
  }

  void abandon(uint64_t) override {
    // Nothing to do: the call stays entered until the server answers it or
    // the connection fails, so its credit is not reused early.
  }

  bool failed() {
    std::lock_guard lk(mu_);
    return failed_;
  }
  Status fail_status() {
    std::lock_guard lk(mu_);
    return fail_status_;
  }

 private:
  // False when the call is not (or no longer) in the table, or its waiter
  // gave up on it already.
  bool take_and_finish(uint64_t request_id, Status status, std::string body) {
    std::shared_ptr<PendingCall::State> call;
    {
      std::lock_guard lk(mu_);
      auto it = calls_.find(request_id);
      if (it == calls_.end()) return false;  // late or unknown: dropped
      call = std::move(it->second);
      calls_.erase(it);
      ++credits_;
    }
    credit_cv_.notify_one();
    return finish(*call, std::move(status), std::move(body));
  }

  // False when the call was done already (its waiter timed out).
  static bool finish(PendingCall::State& call, Status status, std::string body) {
    {
      std::lock_guard lk(call.mu);
      if (call.done) return false;
      call.done = true;
      call.status = std::move(status);
      call.response = std::move(body);
      call.finished.store(true, std::memory_order_release);
    }
    call.cv.notify_all();
    return true;
  }

  const std::string peer_;
  TransportMetrics& metrics_;
  std::mutex mu_;
  std::condition_variable credit_cv_;
  uint32_t credits_ = 0;
  bool failed_ = false;
  Status fail_status_;
  std::unordered_map<uint64_t, std::shared_ptr<PendingCall::State>> calls_;
};

class RpcChannelImpl final : public RpcChannel {
 public:
  RpcChannelImpl(std::string address, ChannelOptions options, std::shared_ptr<CallTable> table,
                 std::unique_ptr<ClientTransport> transport)
      : address_(std::move(address)),
        options_(std::move(options)),
        table_(std::move(table)),
        transport_(std::move(transport)),
        driver_(transport_->driver()) {}
  ~RpcChannelImpl() override { close(); }

  PendingCall call_raw_async(uint16_t service, uint16_t method, std::string_view request,
                             std::span<const BulkRegion> bulk,
                             std::optional<std::chrono::milliseconds> timeout) override {
    auto call = std::make_shared<PendingCall::State>();
    call->request_id = next_id_.fetch_add(1, std::memory_order_relaxed);
    call->service = service;
    call->method = method;
    call->regions.assign(bulk.begin(), bulk.end());
    call->deadline = std::chrono::steady_clock::now() + timeout.value_or(options_.call_timeout);
    call->table = table_;
    call->driver = driver_;
    TransportMetrics& m = table_->metrics();
    m.calls.inc();
    Status st = table_->begin(call);
    if (st.ok()) {
      OutgoingRequest req{call->request_id, service, method, request, call->regions};
      st = transport_->send_request(req);
      if (!st.ok()) table_->fail_unsent(call->request_id, st);
      return PendingCall(std::move(call));
    }
    m.call_errors.inc();
    call->done = true;
    call->finished = true;
    call->status = std::move(st);
    return PendingCall(std::move(call));
  }

  bool connected() const override { return transport_->connected(); }
  void close() override { transport_->close(); }
  const std::string& address() const override { return address_; }

 private:
  const std::string address_;
  const ChannelOptions options_;
  std::shared_ptr<CallTable> table_;
  std::unique_ptr<ClientTransport> transport_;
  std::shared_ptr<CallDriver> driver_;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace

Status PendingCall::wait() {
  if (!state_) return Status::InvalidArgument("wait() on an empty PendingCall");
  State& s = *state_;
  // Read the reply on this thread when the transport can (no hand-off from
  // its I/O thread); sleep when another thread is already reading.
  while (s.driver && !s.finished.load(std::memory_order_acquire) &&
         std::chrono::steady_clock::now() < s.deadline && s.driver->drive(s)) {
  }
  std::unique_lock lk(s.mu);
  if (!s.done && !s.cv.wait_until(lk, s.deadline, [&] { return s.done; })) {
    s.done = true;
    s.abandoned = true;
    s.finished.store(true, std::memory_order_release);
    std::string peer = "server";
    if (auto t = s.table.lock()) {
      auto& table = static_cast<CallTable&>(*t);
      peer = table.peer();
      table.metrics().call_errors.inc();
    }
    s.status = Status::TimedOut("call " + std::to_string(s.service) + "." +
                                std::to_string(s.method) + " (request " +
                                std::to_string(s.request_id) + ") to " + peer + " timed out");
    lk.unlock();
    if (auto t = s.table.lock()) t->abandon(s.request_id);
    lk.lock();
  }
  // A call that completed normally is also marked abandoned now: its regions
  // belong to the caller again, whatever a confused peer sends later.
  s.abandoned = true;
  return s.status;
}

const std::string& PendingCall::response() const {
  static const std::string kEmpty;
  return state_ ? state_->response : kEmpty;
}

std::string PendingCall::take_response() {
  if (!state_) return {};
  std::lock_guard lk(state_->mu);
  return std::move(state_->response);
}

Status RpcChannel::call_raw(uint16_t service, uint16_t method, std::string_view request,
                            std::string* response, std::span<const BulkRegion> bulk,
                            std::optional<std::chrono::milliseconds> timeout) {
  PendingCall c = call_raw_async(service, method, request, bulk, timeout);
  SURGE_RETURN_IF_ERROR(c.wait());
  if (response != nullptr) *response = c.take_response();
  return Status::OK();
}

Result<std::shared_ptr<RpcChannel>> RpcChannel::Connect(const std::string& address,
                                                        const ChannelOptions& options) {
  SURGE_ASSIGN_OR_RETURN(Endpoint ep, parse_endpoint(address));
  if (options.cluster_key.empty()) {
    return Status::InvalidArgument("connect to " + address + ": empty cluster key");
  }
  TransportMetrics& metrics = TransportMetrics::of(ep.kind, Side::kClient);
  auto table = std::make_shared<CallTable>(ep.to_string(), metrics);
  ClientTransportOptions t;
  t.endpoint = ep;
  t.cluster_key = options.cluster_key;
  t.connect_timeout = options.connect_timeout;
  t.pool = options.pool;
  Result<std::unique_ptr<ClientTransport>> connected =
      ep.kind == TransportKind::kRdma ? connect_rdma(t, table) : connect_tcp(t, table);
  if (!connected.ok()) {
    metrics.connect_errors.inc();
    return connected.status();
  }
  std::unique_ptr<ClientTransport> transport = std::move(connected).value();
  table->set_credits(transport->credits());
  return std::shared_ptr<RpcChannel>(
      std::make_shared<RpcChannelImpl>(address, options, std::move(table), std::move(transport)));
}

Result<std::shared_ptr<RpcChannel>> ChannelPool::get(const std::string& address) {
  {
    std::lock_guard lk(mu_);
    auto it = channels_.find(address);
    if (it != channels_.end() && it->second->connected()) return it->second;
  }
  // Connect outside the lock: a dead server must not stall calls to others.
  SURGE_ASSIGN_OR_RETURN(std::shared_ptr<RpcChannel> ch, RpcChannel::Connect(address, options_));
  std::lock_guard lk(mu_);
  auto& slot = channels_[address];
  if (slot && slot->connected()) return slot;  // another thread won the race
  if (slot) {
    // The channel it replaces had died: a reconnect (drop() forgets the
    // address, so a channel made after it counts as a first connect).
    auto ep = parse_endpoint(address);
    TransportMetrics::of(ep.ok() ? ep->kind : TransportKind::kTcp, Side::kClient)
        .reconnects.inc();
  }
  slot = ch;
  return ch;
}

void ChannelPool::drop(const std::string& address) {
  std::lock_guard lk(mu_);
  channels_.erase(address);
}

void ChannelPool::clear() {
  std::lock_guard lk(mu_);
  channels_.clear();
}

}  // namespace surge::net
