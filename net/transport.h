// The seam between the RPC core and a transport (internal to net/).
//
// The RPC core (net/rpc_server.cpp, net/rpc_channel.cpp) owns everything
// transport-agnostic: the pending-call table and request ids, per-call
// timeouts, credits, handler dispatch and the worker pool, typed messages.
// A transport (TCP in net/tcp/, RDMA verbs in net/rdma/) owns connections:
// connect/accept, the authentication handshake (net/auth.h has the shared
// HMAC codec), moving frames, and moving bulk bytes. Stream details (TCP
// payload following the request, bulk-data frames) never leave net/tcp/;
// one-sided READ/WRITE details never leave net/rdma/.
//
// Threading contract (both transports):
//  * ClientCallTable / RequestSink callbacks come from the transport's own
//    I/O threads. They never block for long: the core only takes short locks.
//  * ClientTransport::send_request and ServerConnection::send_response are
//    thread-safe and may be called from any thread, including the caller's
//    thread (the core sends requests on the calling thread, no hop).
//  * After ClientTransport::close() / ServerTransport::stop() return, the
//    transport makes no further callbacks.
//
// Bulk contract: the core keeps a call's BulkRegion list in its
// PendingCall::State. A client transport that must write pushed bytes into
// a region (TCP) takes State::mu, checks !abandoned, and writes under it:
// once a caller gives up (timeout) it sets abandoned under mu and nobody
// touches its memory again. A transport that never touches client memory
// from the CPU (RDMA one-sided) must still not start a write into a region
// after `abandoned` is set.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "net/buffer_pool.h"
#include "net/bulk.h"
#include "net/rpc_channel.h"

namespace surge::net {

// ---------------------------------------------------------------- addresses

enum class TransportKind { kTcp, kRdma };

struct Endpoint {
  TransportKind kind = TransportKind::kTcp;
  std::string host;
  uint16_t port = 0;
  // "tcp://127.0.0.1:4000"
  std::string to_string() const;
};

// "tcp://H:P", "rdma://H:P" or bare "H:P" (tcp). IPv6 hosts in brackets.
Result<Endpoint> parse_endpoint(const std::string& address);

// ------------------------------------------------------------- client side

struct ClientCallTableBase;
struct CallDriver;

// One call in flight, shared between the RPC core and the transport.
struct PendingCall::State {
  uint64_t request_id = 0;
  uint16_t service = 0;
  uint16_t method = 0;
  std::vector<BulkRegion> regions;  // the caller's memory, valid until done or abandoned
  std::chrono::steady_clock::time_point deadline;

  std::mutex mu;  // guards everything below, and writes into `regions`
  std::condition_variable cv;
  bool done = false;
  bool abandoned = false;  // the caller gave up: regions must not be touched
  std::atomic<bool> finished{false};  // == done, readable without mu
  Status status;
  std::string response;
  std::weak_ptr<ClientCallTableBase> table;  // to give up the call on timeout
  std::shared_ptr<CallDriver> driver;        // optional, see CallDriver
};

// Optional: a transport that can read replies on the waiting caller's own
// thread (saving a hand-off from its I/O thread per call) gives wait() a
// driver. Transports without one leave ClientTransport::driver() null.
struct CallDriver {
  virtual ~CallDriver() = default;
  // Reads and dispatches incoming frames on this thread until `call`
  // finishes, its deadline passes or the connection fails. Returns false at
  // once when another thread is reading (then wait() sleeps instead).
  virtual bool drive(PendingCall::State& call) = 0;
  // Makes sure the transport's own I/O thread reads now: a caller is about
  // to sleep (e.g. for a credit) without reading replies itself.
  virtual void kick() = 0;
};

// What a request looks like to a client transport.
struct OutgoingRequest {
  uint64_t request_id = 0;
  uint16_t service = 0;
  uint16_t method = 0;
  std::string_view body;
  std::span<const BulkRegion> bulk;
};

// Implemented by the RPC core; the client transport calls it.
struct ClientCallTableBase {
  virtual ~ClientCallTableBase() = default;
  // The call with this id, or null when unknown (never sent, or already
  // finished): late frames for it are dropped.
  virtual std::shared_ptr<PendingCall::State> find(uint64_t request_id) = 0;
  // A response arrived: status (code + message) and body.
  virtual void complete(uint64_t request_id, Status status, std::string body) = 0;
  // The connection is gone: fail every outstanding call with `why`.
  virtual void fail_all(const Status& why) = 0;
  // Called on timeout by the waiter (core-internal, transports ignore it).
  virtual void abandon(uint64_t request_id) = 0;
  // Any call waiting for a reply (a driving transport keeps its I/O thread
  // reading only while this is true).
  virtual bool has_outstanding() = 0;
};

class ClientTransport {
 public:
  virtual ~ClientTransport() = default;
  // Sends one request (with its bulk descriptors; over TCP also the pulled
  // bytes). Thread-safe. An error means the request did not go out; the
  // transport then also fails the connection as it sees fit.
  virtual Status send_request(const OutgoingRequest& req) = 0;
  // Requests in flight the server allows on this connection (handshake).
  virtual uint32_t credits() const = 0;
  virtual bool connected() const = 0;
  // Idempotent. Fails outstanding calls via fail_all(Disconnected).
  virtual void close() = 0;
  virtual const std::string& peer() const = 0;
  // See CallDriver; null by default.
  virtual std::shared_ptr<CallDriver> driver() { return nullptr; }
};

struct ClientTransportOptions {
  Endpoint endpoint;
  std::string cluster_key;
  std::chrono::milliseconds connect_timeout{5000};
  BufferPool* pool = nullptr;  // may be null (TCP needs none)
};

// Connects and authenticates; AuthFailed on a key mismatch, Unavailable /
// ConnectionRefused / TimedOut when the server cannot be reached.
Result<std::unique_ptr<ClientTransport>> connect_tcp(const ClientTransportOptions& options,
                                                     std::shared_ptr<ClientCallTableBase> table);
// DEFINED IN net/rdma/ (placeholder: net/rdma/rdma_unavailable.cpp).
Result<std::unique_ptr<ClientTransport>> connect_rdma(const ClientTransportOptions& options,
                                                      std::shared_ptr<ClientCallTableBase> table);

// ------------------------------------------------------------- server side

// One accepted, authenticated connection, as the RPC core sees it.
class ServerConnection {
 public:
  virtual ~ServerConnection() = default;
  // Sends the reply for request_id: status code + message for an error,
  // else body. Thread-safe. Failures close the connection (logged).
  virtual void send_response(uint64_t request_id, const Status& status, std::string_view body) = 0;
  // Closes after logging `why` with the peer address.
  virtual void close(const Status& why) = 0;
  // "tcp://127.0.0.1:53412"
  virtual const std::string& peer() const = 0;

  // Requests dispatched and not yet answered; the core enforces credits.
  std::atomic<uint32_t> in_flight{0};
  // Unique among this process's connections and never reused (an address
  // may be): what per-connection accounting keys on (RpcContext).
  const uint64_t id = next_id();

 private:
  static uint64_t next_id() {
    static std::atomic<uint64_t> last{0};
    return last.fetch_add(1, std::memory_order_relaxed) + 1;
  }
};

// A request's bulk regions, server side. The core calls finish() exactly
// once after the handler returned and before the reply is sent: a stream
// transport discards unpulled bytes there and resumes reading.
class RequestBulk : public BulkHandle {
 public:
  virtual void finish() = 0;
};

struct InboundRequest {
  uint64_t request_id = 0;
  uint16_t service = 0;
  uint16_t method = 0;
  std::string body;
  std::unique_ptr<RequestBulk> bulk;  // never null (zero regions is fine)
  // Set by a transport when the thread delivering this request may run a
  // brief blocking handler (pulls and pushes included) right there without
  // starving anyone: nothing else is in service on that thread, the pulled
  // bytes are all here and nothing is queued behind this request on its
  // connection. The core then runs a HandlerMode::kShortBlocking handler
  // inline, saving the hop to a worker. Transports that never set it keep
  // every blocking handler on workers.
  bool may_block_here = false;
};

// Implemented by the RPC core; called on a transport I/O thread for every
// request of an authenticated connection, in arrival order. It returns
// quickly unless the request says may_block_here.
class RequestSink {
 public:
  virtual ~RequestSink() = default;
  virtual void on_request(std::shared_ptr<ServerConnection> conn, InboundRequest req) = 0;
  // Whether a request for this method would use may_block_here (its
  // handler is HandlerMode::kShortBlocking): a transport asks before it
  // spends anything on making a request eligible.
  virtual bool runs_in_place_when_allowed(uint16_t service, uint16_t method) const {
    (void)service;
    (void)method;
    return false;
  }
};

struct ServerTransportOptions {
  Endpoint endpoint;  // port 0 picks a free one
  std::string cluster_key;
  int io_threads = 2;
  uint32_t credits_per_connection = 128;  // advertised in the handshake
  std::chrono::milliseconds handshake_timeout{5000};
  // Connections still in the handshake (0: no limit); see ServerOptions.
  uint32_t max_unauthenticated_connections = 256;
  uint32_t max_unauthenticated_per_address = 32;
  // A bulk transfer of an authenticated connection that makes no progress
  // for this long closes it; see ServerOptions.
  std::chrono::milliseconds bulk_stall_timeout{3000};
  BufferPool* pool = nullptr;  // the server's pool (RDMA registers it)
};

class ServerTransport {
 public:
  virtual ~ServerTransport() = default;
  // Binds (done by the factory) and starts accepting.
  virtual Status start() = 0;
  // Stops accepting, closes every connection, joins I/O threads.
  virtual void stop() = 0;
  virtual std::string address() const = 0;
  virtual uint16_t port() const = 0;
};

// Binds the listening socket now (so address()/port() work before start()).
Result<std::unique_ptr<ServerTransport>> make_tcp_server(const ServerTransportOptions& options,
                                                         RequestSink* sink);
// DEFINED IN net/rdma/ (placeholder: net/rdma/rdma_unavailable.cpp).
Result<std::unique_ptr<ServerTransport>> make_rdma_server(const ServerTransportOptions& options,
                                                          RequestSink* sink);

}  // namespace surge::net
