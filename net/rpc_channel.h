// RpcChannel: one authenticated connection from a client to a server.
// Thread-safe; many calls in flight, matched by request id; per-call
// timeouts; when the connection drops every outstanding call fails with
// Disconnected at once. A channel does not reconnect: ChannelPool does.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/status.h"
#include "net/buffer_pool.h"
#include "net/bulk.h"
#include "net/rpc_server.h"  // detail::parse_message / serialize_message

namespace surge::net {

struct ChannelOptions {
  std::string cluster_key;
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds call_timeout{30000};  // default per call
  // Registered pool for bouncing bulk regions that are not registered
  // memory (RDMA); may be null for TCP-only use.
  BufferPool* pool = nullptr;
};

// The result of an asynchronous call; wait() blocks until it completes.
class PendingCall {
 public:
  struct State;
  PendingCall() = default;
  explicit PendingCall(std::shared_ptr<State> s) : state_(std::move(s)) {}
  // Blocks until the reply (or error). Safe to call more than once.
  Status wait();
  // Valid after wait() returned OK.
  const std::string& response() const;
  // Moves the response out (after wait() returned OK); saves a copy.
  std::string take_response();
  bool valid() const { return state_ != nullptr; }

 private:
  std::shared_ptr<State> state_;
};

class RpcChannel {
 public:
  // address: "tcp://HOST:PORT", "rdma://HOST:PORT", or "HOST:PORT" (tcp).
  static Result<std::shared_ptr<RpcChannel>> Connect(const std::string& address,
                                                     const ChannelOptions& options);
  virtual ~RpcChannel() = default;

  virtual PendingCall call_raw_async(uint16_t service, uint16_t method, std::string_view request,
                                     std::span<const BulkRegion> bulk = {},
                                     std::optional<std::chrono::milliseconds> timeout = {}) = 0;

  Status call_raw(uint16_t service, uint16_t method, std::string_view request,
                  std::string* response, std::span<const BulkRegion> bulk = {},
                  std::optional<std::chrono::milliseconds> timeout = {});

  template <typename M>
  Status call(const typename M::Request& req, typename M::Response* resp,
              std::span<const BulkRegion> bulk = {},
              std::optional<std::chrono::milliseconds> timeout = {});

  virtual bool connected() const = 0;
  virtual void close() = 0;
  virtual const std::string& address() const = 0;
};

// Parses a typed reply out of a finished PendingCall.
template <typename M>
Status finish_call(PendingCall& call, typename M::Response* resp) {
  SURGE_RETURN_IF_ERROR(call.wait());
  if (resp != nullptr && !detail::parse_message(*resp, call.response())) {
    return Status::ProtocolError("malformed response body for method " +
                                 std::to_string(M::kService) + "." + std::to_string(M::kMethod));
  }
  return Status::OK();
}

template <typename M>
PendingCall call_async(RpcChannel& ch, const typename M::Request& req,
                       std::span<const BulkRegion> bulk = {},
                       std::optional<std::chrono::milliseconds> timeout = {}) {
  std::string bytes;
  detail::serialize_message(req, bytes);
  return ch.call_raw_async(M::kService, M::kMethod, bytes, bulk, timeout);
}

template <typename M>
Status RpcChannel::call(const typename M::Request& req, typename M::Response* resp,
                        std::span<const BulkRegion> bulk,
                        std::optional<std::chrono::milliseconds> timeout) {
  PendingCall c = call_async<M>(*this, req, bulk, timeout);
  return finish_call<M>(c, resp);
}

// Keeps one live channel per address and reconnects on demand, so callers
// (clients, the MDS talking to data servers) survive a server restart.
class ChannelPool {
 public:
  explicit ChannelPool(ChannelOptions options) : options_(std::move(options)) {}
  // A connected channel to address, connecting (again) if needed.
  Result<std::shared_ptr<RpcChannel>> get(const std::string& address);
  void drop(const std::string& address);
  void clear();

 private:
  ChannelOptions options_;
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<RpcChannel>> channels_;
};

}  // namespace surge::net
