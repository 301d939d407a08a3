// RpcServer: accepts connections on one transport (tcp:// or rdma://),
// authenticates each with the cluster key, and dispatches requests to
// handlers. Handlers run on a worker pool and may block (RocksDB, pread);
// the transport's I/O threads never wait on them, except for a brief
// kShortBlocking handler the transport has said it can run in place. A
// handler's Status reaches the caller intact (code and message).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "net/buffer_pool.h"
#include "net/bulk.h"

namespace google::protobuf {
class MessageLite;
}

namespace surge::net {

// What a handler sees of the request besides its body.
class RpcContext {
 public:
  virtual ~RpcContext() = default;
  virtual BulkHandle& bulk() = 0;
  // "tcp://127.0.0.1:53412"
  virtual const std::string& peer() const = 0;
  // The server's registered pool: pull into / push from its buffers.
  virtual BufferPool& pool() = 0;
  // The connection the request came on: unique in this process, never
  // reused (ServerConnection::id). 0: not known (every such request counts
  // as one connection).
  virtual uint64_t connection_id() const { return 0; }
  // True while the handler runs on the transport thread that received the
  // request (kInline, or kShortBlocking run in place): it must then not
  // wait on anything slow, such as another server (HandlerWatch names one
  // that does).
  virtual bool on_transport_thread() const { return false; }
  // From a handler on the transport thread that finds it would have to
  // wait, before it touched the bulk: the core runs the request again,
  // from the start, on a worker, and drops what this run returns. False
  // (nothing changes) anywhere else.
  virtual bool defer_to_worker() { return false; }
  // True once defer_to_worker() returned true: this run does not count as
  // a request served (its result is dropped).
  virtual bool deferred() const { return false; }
};

using RawHandler =
    std::function<Status(RpcContext& ctx, std::string_view request, std::string& response)>;

// Which worker lane a request goes to, from its body (see
// ServerOptions::lane_threads). Runs on the transport thread: cheap, never
// blocking. Past the last lane means the last.
using LaneOf = std::function<size_t(std::string_view request)>;

enum class HandlerMode {
  kWorker,  // on the worker pool; may block
  kInline,  // on the I/O thread; must never block (pings, tiny lookups)
  // Blocks only briefly (page-cache file IO of a bounded size, bulk pulls
  // and pushes; never fsync or long scans). Runs on the transport thread
  // that received the request when the transport says that starves nobody
  // (TCP: it is the only request in service on its I/O thread, its payload
  // has arrived and nothing is queued behind it on its connection), which
  // saves the hand-off to a worker; otherwise on the worker pool, exactly
  // as kWorker. RDMA runs it on the server's loop thread when no other
  // request of that server is in service and no message of its connection
  // waits behind it (its pulls and pushes then reap the CQ themselves).
  kShortBlocking,
};

struct ServerOptions {
  // "tcp://HOST:PORT" or "rdma://HOST:PORT"; port 0 picks a free one.
  std::string listen = "tcp://127.0.0.1:0";
  std::string cluster_key;  // shared secret; connections must prove it
  int io_threads = 2;
  int worker_threads = 8;
  // Worker lanes 1..n besides the main pool (lane 0), with these many
  // threads each. A lane's requests never wait for a thread of another
  // lane, so a server whose handlers wait on other servers (chain
  // forwarding) can order its waits by lane and never deadlock: a handler
  // of lane k that waits only on requests of lanes > k always gets them
  // served. Handlers are routed to lanes with route().
  std::vector<int> lane_threads;
  uint32_t credits_per_connection = 128;  // requests in flight per connection
  BufferPoolOptions pool;
  // A connection that has not authenticated within this is closed (logged).
  std::chrono::milliseconds handshake_timeout{5000};
  // Connections still in the handshake, in total and from one peer address
  // (0: no limit). One more is refused at once (a GoAway(Unavailable) over
  // TCP, a rejected connection request over RDMA), so peers that never
  // prove the key hold at most these many handshake-sized buffers.
  uint32_t max_unauthenticated_connections = 256;
  uint32_t max_unauthenticated_per_address = 32;
  // A bulk transfer that makes no progress for this long (a request's
  // payload declared and not arriving, a reply's data the peer does not
  // read) closes the connection with TimedOut, logged with the peer, so
  // whatever its handler holds (a data server's IO buffers) goes back.
  // Keep it well inside the clients' IO timeout (10 s): a stalled peer's
  // buffers must be back before a well-behaved client waiting for them
  // gives up. TCP only: over RDMA the server reads and writes the peer's
  // memory without its help.
  std::chrono::milliseconds bulk_stall_timeout{3000};
};

class RpcServer {
 public:
  static Result<std::unique_ptr<RpcServer>> Create(ServerOptions options);
  virtual ~RpcServer() = default;

  // Register before start(). A second handler for the same id is a
  // programmer error.
  virtual void add_raw(uint16_t service, uint16_t method, RawHandler handler,
                       HandlerMode mode = HandlerMode::kWorker) = 0;

  // Typed: add<MyMethod>([](RpcContext&, const Req&, Resp&) -> Status {...});
  template <typename M, typename F>
  void add(F&& fn, HandlerMode mode = HandlerMode::kWorker);

  // Sends the requests of a registered kWorker handler to the worker lane
  // lane(body) picks (ServerOptions::lane_threads) instead of the main
  // pool. Before start().
  virtual void route(uint16_t service, uint16_t method, LaneOf lane) = 0;
  // Typed: route<MyMethod>([](const Req&) -> size_t {...}); a body that
  // does not parse goes to lane 0 (its handler refuses it there).
  template <typename M, typename F>
  void route(F&& lane_of);

  virtual Status start() = 0;
  // Stops accepting, fails in-flight work with Cancelled, joins threads.
  virtual void stop() = 0;

  // The address actually bound, e.g. "tcp://127.0.0.1:40123".
  virtual std::string address() const = 0;
  virtual uint16_t port() const = 0;
  virtual BufferPool& pool() = 0;
};

namespace detail {
bool parse_message(google::protobuf::MessageLite& msg, std::string_view bytes);
bool serialize_message(const google::protobuf::MessageLite& msg, std::string& out);
}  // namespace detail

template <typename M, typename F>
void RpcServer::add(F&& fn, HandlerMode mode) {
  add_raw(
      M::kService, M::kMethod,
      [fn = std::forward<F>(fn)](RpcContext& ctx, std::string_view req_bytes,
                                 std::string& resp_bytes) -> Status {
        typename M::Request req;
        if (!detail::parse_message(req, req_bytes)) {
          return Status::ProtocolError("malformed request body for method " +
                                       std::to_string(M::kService) + "." +
                                       std::to_string(M::kMethod));
        }
        typename M::Response resp;
        Status st = fn(ctx, req, resp);
        if (!st.ok()) return st;
        if (!detail::serialize_message(resp, resp_bytes)) {
          return Status::Internal("cannot serialize response");
        }
        return Status::OK();
      },
      mode);
}

template <typename M, typename F>
void RpcServer::route(F&& lane_of) {
  route(M::kService, M::kMethod, [fn = std::forward<F>(lane_of)](std::string_view body) -> size_t {
    typename M::Request req;
    if (!detail::parse_message(req, body)) return 0;
    return fn(req);
  });
}

}  // namespace surge::net
