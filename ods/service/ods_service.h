// OdsService: the handlers of every OdsXxx method (net/proto/ods.proto),
// between the net layer's bulk handles and the ObjectStore.
//
// Nothing in a request is trusted: object ids, offsets and lengths are
// checked against the limits, and the bulk descriptor must be exactly one
// region of the right access kind and length; a bad request gets an error
// reply and the connection keeps serving.
//
// Memory stays bounded under any load: a request first takes the IO
// buffer units it needs from IoAdmission (capacity: the pool's largest
// buffer class), then pool buffers of at most 1 MiB each. Admission is
// fair per connection (io_admission.h): a connection busy beyond its share
// waits while the others are served, and a peer that declares a payload
// and stops sending it is cut off by the transport's bulk stall timeout
// (logged here with the object), which frees its units well inside the
// clients' IO timeout. Handlers run on the RPC server's worker threads, so
// at most worker_threads requests do IO at once and the rest wait.
//
// Every request's ChunkRef is judged first by the ChainView (when one is
// given): a target id not ours, a stale chain version or a chain we are not
// in is refused with its own code (WrongTarget, StaleChain) before anything
// is read or stored. Chained chunks (ref.chain_id != 0) are handed, with
// one admission unit and one pool buffer, to ChainedChunks (ods/chain/),
// which orders, versions, stores and forwards them; a service without it
// answers NotSupported for them. With it, OdsWrite runs on the worker pool
// (never in place on a transport thread): a chained write waits for its
// successor, which may be waiting for a transport thread of ours. Writes,
// reads and parity deltas of EC chains go to EcChunks (ods/ec/); a service
// without it answers NotSupported for them.
//
// Write: the payload is pulled in order from offset 0 (TCP streams it),
// chunk by chunk into pool buffers while its CRC32C is computed; only when
// that matches the request's CRC does anything reach the store, so a
// damaged transfer leaves no bytes behind. Read: chunks are read (and
// block-verified) into a pool buffer and pushed; the reply carries the CRC
// of exactly the bytes pushed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/metrics/registry.h"
#include "common/status.h"
#include "net/proto/ods_methods.h"
#include "net/rpc_server.h"
#include "ods/chain/chain_view.h"
#include "ods/chain/chained_chunks.h"
#include "ods/chain/forward_lanes.h"
#include "ods/ec/ec_chunks.h"
#include "ods/service/io_admission.h"
#include "ods/service/ods_metrics.h"
#include "ods/store/object_store.h"

namespace surge::ods {

struct OdsServiceOptions {
  // Where the service declares its metrics (OdsMetrics); null: the
  // process's registry.
  metrics::Registry* registry = nullptr;
  uint64_t max_io_bytes = 8 << 20;  // per Write/Read request
  size_t max_sync_ids = 65536;      // per Sync request
  // Admission units (buffers of the pool's largest class); 0: all of them.
  size_t io_buffers = 0;
  std::chrono::milliseconds buffer_wait{30000};
  // The worker lanes of the requests between chain members (the server's
  // lane_threads must match): forwards by hop, resyncs in the last lane.
  // Their buffers come from the pool beyond the admission units
  // (ForwardLanes::extra_buffers), bounded by their lanes' threads, so a
  // forward never waits behind the client requests it serves. 0 lanes:
  // everything on the main pool, forwards under admission as any request.
  ForwardLanes lanes{0, 0};
};

class OdsService {
 public:
  // pool: the RPC server's pool (the one ctx.pool() returns).
  // chains (may be null: no target or chain checks) outlives the service.
  // chained (may be null: chained chunks are not served) outlives it too.
  OdsService(ObjectStore& store, net::BufferPool& pool, OdsServiceOptions options = {},
             ChainView* chains = nullptr, ChainedChunks* chained = nullptr, EcChunks* ec = nullptr);

  void register_handlers(net::RpcServer& server);

  // Requests being served right now (the heartbeat's load).
  uint64_t load() const { return inflight_.load(); }

  // Registers the scrape-time gauges (requests in flight, IO buffers,
  // objects, space) in registry; they stay until the service is gone.
  void watch_metrics(metrics::Registry& registry);
  const IoAdmission& admission() const { return admission_; }

  Status write(net::RpcContext& ctx, const proto::ods::WriteRequest& req,
               proto::ods::WriteReply& resp);
  Status read(net::RpcContext& ctx, const proto::ods::ReadRequest& req, proto::ods::ReadReply& resp);
  Status truncate(const proto::ods::TruncateRequest& req, proto::ods::TruncateReply& resp);
  Status remove(const proto::ods::RemoveRequest& req, proto::ods::RemoveReply& resp);
  Status stat(net::RpcContext& ctx, const proto::ods::StatRequest& req,
              proto::ods::StatReply& resp);
  Status sync(const proto::ods::SyncRequest& req, proto::ods::SyncReply& resp);
  Status statfs(const proto::ods::StatFsRequest& req, proto::ods::StatFsReply& resp);
  Status scrub(const proto::ods::ScrubRequest& req, proto::ods::ScrubReply& resp);
  Status fallocate(const proto::ods::FallocateRequest& req, proto::ods::FallocateReply& resp);
  Status ec_commit(const proto::ods::EcCommitRequest& req, proto::ods::EcCommitReply& resp);
  Status chain_forward(net::RpcContext& ctx, const proto::ods::ChainForwardRequest& req,
                       proto::ods::ChainForwardReply& resp);
  Status list_chunks(const proto::ods::ListChunksRequest& req, proto::ods::ListChunksReply& resp);
  Status resync_chunk(net::RpcContext& ctx, const proto::ods::ResyncChunkRequest& req,
                      proto::ods::ResyncChunkReply& resp);

 private:
  size_t chunk_size() const { return chunk_; }

  // Runs a handler, counted and timed under its method id (not when it
  // deferred itself to a worker: that run counts then).
  template <typename F>
  Status counted(uint16_t method, F&& handler, const net::RpcContext* ctx = nullptr);
  // The ChainView's verdict on a request's ref: our place in its chain
  // (empty for legacy refs and without a view); NotSupported for a chained
  // ref without ChainedChunks.
  // ctx given and on a transport thread: a ref that needs a fetch from the
  // MDS defers the request to a worker (Unavailable returned, dropped).
  Result<ChainPlace> admit(const proto::ods::ChunkRef& ref, const char* op,
                           net::RpcContext* ctx = nullptr);
  // NotSupported for an EC place when no EcChunks was given.
  Status ec_served(const ChainPlace& place, const char* op) const;
  // Legacy objects under a truncate generation the request knows of (see
  // ods_service.cpp): cut before an update; the end a read or stat sees.
  Status catch_up_truncate(const proto::ods::ChunkRef& ref, uint64_t id, const char* op);
  Result<uint64_t> readable_end(const proto::ods::ChunkRef& ref, uint64_t id);
  // What a chained request needs to move bytes: an admission unit and a
  // pool buffer of chunk_size() bytes.
  struct IoBuffer {
    IoAdmission::Grant grant;
    net::PoolBuffer buf;
  };
  Result<IoBuffer> io_buffer(net::RpcContext& ctx);
  // The same for a request of a forward lane: a pool buffer only (no
  // admission unit) when lanes are on.
  Result<IoBuffer> lane_buffer(net::RpcContext& ctx);

  OdsMetrics metrics_;
  std::vector<metrics::Probe> probes_;  // watch_metrics()

  ObjectStore& store_;
  OdsServiceOptions options_;
  ChainView* chains_;
  ChainedChunks* chained_;
  EcChunks* ec_;
  size_t chunk_;  // <= 1 MiB and <= the pool's largest buffer
  IoAdmission admission_;
  std::atomic<uint64_t> inflight_{0};
};

}  // namespace surge::ods
