// OdsService: request checks, bulk pulls and pushes, and store calls.
#include "ods/service/ods_service.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/log.h"
#include "net/proto/ods_write_pieces.h"
#include "ods/store/block_checksum.h"

namespace surge::ods {
namespace {

namespace pb = surge::proto::ods;

constexpr size_t kMaxChunk = 1 << 20;
constexpr size_t kReadPieceBytes = 256 << 10;

size_t largest_class_count(net::BufferPool& pool) {
  size_t best_size = 0, count = 0;
  for (const auto& c : pool.stats()) {
    if (c.buffer_size >= best_size) {
      best_size = c.buffer_size;
      count = c.total;
    }
  }
  return count;
}

// Counts a request as in flight for the heartbeat's load figure.
class InflightGuard {
 public:
  explicit InflightGuard(std::atomic<uint64_t>& n) : n_(n) { n_.fetch_add(1); }
  ~InflightGuard() { n_.fetch_sub(1); }

 private:
  std::atomic<uint64_t>& n_;
};

std::string obj_name(uint64_t id) { return "object " + std::to_string(id); }

Status check_bulk(net::RpcContext& ctx, net::BulkAccess want, uint64_t id, const char* op) {
  net::BulkHandle& bulk = ctx.bulk();
  if (bulk.count() != 1) {
    return Status::InvalidArgument(std::string(op) + " " + obj_name(id) + " from " + ctx.peer() +
                                   ": expected 1 bulk region, got " + std::to_string(bulk.count()));
  }
  if (bulk.access(0) != want) {
    return Status::InvalidArgument(std::string(op) + " " + obj_name(id) + " from " + ctx.peer() +
                                   ": bulk region has the wrong access kind");
  }
  return Status::OK();
}

}  // namespace

OdsService::OdsService(ObjectStore& store, net::BufferPool& pool, OdsServiceOptions options,
                       ChainView* chains, ChainedChunks* chained, EcChunks* ec)
    : metrics_(options.registry != nullptr ? *options.registry : metrics::Registry::global()),
      store_(store),
      options_(options),
      chains_(chains),
      chained_(chained),
      ec_(ec),
      chunk_(std::min(kMaxChunk, pool.max_buffer_size())),
      admission_(options.io_buffers != 0 ? std::min(options.io_buffers, largest_class_count(pool))
                                         : largest_class_count(pool),
                 chunk_ == 0 ? 1 : (options.max_io_bytes + chunk_ - 1) / chunk_) {
  if (chunk_ == 0 || admission_.capacity() == 0) {
    throw std::logic_error("OdsService: the buffer pool " + pool.name() + " has no buffers");
  }
  // A request never needs more units than exist, or it could never run.
  options_.max_io_bytes = std::min<uint64_t>(options_.max_io_bytes, admission_.capacity() * chunk_);
}

template <typename F>
Status OdsService::counted(uint16_t method, F&& handler, const net::RpcContext* ctx) {
  static_assert(pb::OdsEcCommit::kMethod <= OdsMetrics::kMaxMethod,
                "grow OdsMetrics::kMaxMethod with the methods");
  const auto t0 = std::chrono::steady_clock::now();
  Status st = handler();
  if (ctx != nullptr && ctx->deferred()) return st;
  const OdsMetrics::Method& m = metrics_.methods[method];
  m.requests->inc();
  if (!st.ok()) m.errors->inc();
  m.duration->observe(std::chrono::steady_clock::now() - t0);
  if (st.code() == Code::kNoSpace) metrics_.nospace_errors.inc();
  return st;
}

void OdsService::register_handlers(net::RpcServer& server) {
  // Reads, writes, stat and statfs touch the page cache and move at most
  // max_io_bytes: brief enough to run on the transport thread when the
  // server is otherwise idle (kShortBlocking). Sync, truncate, remove and
  // scrub may wait for the disk and always go to the worker pool. A write
  // with its sync flag set does fsync; clients send OdsSync instead.
  constexpr auto kBrief = net::HandlerMode::kShortBlocking;
  server.add<pb::OdsWrite>(
      [this](net::RpcContext& ctx, const pb::WriteRequest& q, pb::WriteReply& r) {
        return counted(pb::OdsWrite::kMethod, [&] { return write(ctx, q, r); });
      },
      chained_ != nullptr ? net::HandlerMode::kWorker : kBrief);
  server.add<pb::OdsRead>(
      [this](net::RpcContext& ctx, const pb::ReadRequest& q, pb::ReadReply& r) {
        return counted(
            pb::OdsRead::kMethod, [&] { return read(ctx, q, r); }, &ctx);
      },
      kBrief);
  server.add<pb::OdsTruncate>([this](net::RpcContext&, const pb::TruncateRequest& q, pb::TruncateReply& r) {
    return counted(pb::OdsTruncate::kMethod, [&] { return truncate(q, r); });
  });
  server.add<pb::OdsRemove>([this](net::RpcContext&, const pb::RemoveRequest& q, pb::RemoveReply& r) {
    return counted(pb::OdsRemove::kMethod, [&] { return remove(q, r); });
  });
  server.add<pb::OdsStat>(
      [this](net::RpcContext& ctx, const pb::StatRequest& q, pb::StatReply& r) {
        return counted(
            pb::OdsStat::kMethod, [&] { return stat(ctx, q, r); }, &ctx);
      },
      kBrief);
  server.add<pb::OdsSync>([this](net::RpcContext&, const pb::SyncRequest& q, pb::SyncReply& r) {
    return counted(pb::OdsSync::kMethod, [&] { return sync(q, r); });
  });
  server.add<pb::OdsStatFs>(
      [this](net::RpcContext&, const pb::StatFsRequest& q, pb::StatFsReply& r) {
        return counted(pb::OdsStatFs::kMethod, [&] { return statfs(q, r); });
      },
      kBrief);
  server.add<pb::OdsScrub>([this](net::RpcContext&, const pb::ScrubRequest& q, pb::ScrubReply& r) {
    return counted(pb::OdsScrub::kMethod, [&] { return scrub(q, r); });
  });
  server.add<pb::OdsFallocate>(
      [this](net::RpcContext&, const pb::FallocateRequest& q, pb::FallocateReply& r) {
        return counted(pb::OdsFallocate::kMethod, [&] { return fallocate(q, r); });
      });
  // It waits on the parity positions (hop 1), as a write does.
  server.add<pb::OdsEcCommit>(
      [this](net::RpcContext&, const pb::EcCommitRequest& q, pb::EcCommitReply& r) {
        return counted(pb::OdsEcCommit::kMethod, [&] { return ec_commit(q, r); });
      });
  // Between data servers (docs/redundancy.md): they wait for the next
  // member or the disk, so always on the worker pool.
  server.add<pb::OdsChainForward>(
      [this](net::RpcContext& ctx, const pb::ChainForwardRequest& q, pb::ChainForwardReply& r) {
        return counted(pb::OdsChainForward::kMethod, [&] { return chain_forward(ctx, q, r); });
      });
  server.add<pb::OdsListChunks>(
      [this](net::RpcContext&, const pb::ListChunksRequest& q, pb::ListChunksReply& r) {
        return counted(pb::OdsListChunks::kMethod, [&] { return list_chunks(q, r); });
      });
  server.add<pb::OdsResyncChunk>(
      [this](net::RpcContext& ctx, const pb::ResyncChunkRequest& q, pb::ResyncChunkReply& r) {
        return counted(pb::OdsResyncChunk::kMethod, [&] { return resync_chunk(ctx, q, r); });
      });
  if (chained_ != nullptr && options_.lanes.lanes > 0) {
    const ForwardLanes lanes = options_.lanes;
    server.route<pb::OdsChainForward>(
        [lanes](const pb::ChainForwardRequest& q) { return lanes.of_hop(q.hop()); });
    server.route<pb::OdsListChunks>([lanes](const pb::ListChunksRequest&) { return lanes.of_resync(); });
    server.route<pb::OdsResyncChunk>(
        [lanes](const pb::ResyncChunkRequest&) { return lanes.of_resync(); });
  }
}

void OdsService::watch_metrics(metrics::Registry& registry) {
  using metrics::Type;
  auto gauge = [&](const char* name, const char* help, std::function<double()> read) {
    probes_.push_back(registry.probe(name, help, Type::kGauge, {}, std::move(read)));
  };
  gauge("surge_ods_inflight_requests", "Requests being served (the queue depth).",
        [this] { return static_cast<double>(inflight_.load()); });
  gauge("surge_ods_io_buffers_in_use", "IO buffer units held by requests.",
        [this] { return static_cast<double>(admission_.in_use()); });
  gauge("surge_ods_io_buffers", "IO buffer units (admission capacity).",
        [this] { return static_cast<double>(admission_.capacity()); });
  gauge("surge_ods_io_buffer_waiters", "Requests waiting for IO buffers.",
        [this] { return static_cast<double>(admission_.waiting()); });
  gauge("surge_ods_open_objects", "Objects in the descriptor cache.",
        [this] { return static_cast<double>(store_.open_objects()); });
  // statvfs per scrape: one call per gauge is a few microseconds.
  auto space = [this](uint64_t StoreStats::*field) {
    return [this, field] {
      auto s = store_.statfs();
      return s.ok() ? static_cast<double>((*s).*field) : 0.0;
    };
  };
  gauge("surge_ods_capacity_bytes", "Size of the data directory's file system.",
        space(&StoreStats::capacity_bytes));
  gauge("surge_ods_free_bytes", "Free bytes of the data directory's file system.",
        space(&StoreStats::free_bytes));
  gauge("surge_ods_objects", "Objects stored.", space(&StoreStats::objects));
}

Status OdsService::ec_served(const ChainPlace& place, const char* op) const {
  if (place.ec && ec_ == nullptr) {
    return Status::NotSupported(std::string(op) + " of an EC chunk (chain " +
                                std::to_string(place.chain_id) +
                                "): this data server does not serve EC chains");
  }
  return Status::OK();
}

Result<ChainPlace> OdsService::admit(const pb::ChunkRef& ref, const char* op,
                                     net::RpcContext* ctx) {
  if (chains_ == nullptr) {
    if (ref.chain_id() != 0) {
      return Status::NotSupported(std::string(op) + " of a chunk of chain " +
                                  std::to_string(ref.chain_id()) +
                                  ": this data server has no chain table (no MDS)");
    }
    return ChainPlace{};
  }
  const bool in_place = ctx != nullptr && ctx->on_transport_thread();
  bool would_fetch = false;
  auto admitted = chains_->admit(ref, op, in_place ? &would_fetch : nullptr);
  if (would_fetch) {
    // A round trip to the MDS would hold up the transport thread's other
    // connections: a worker judges the request again.
    if (ctx->defer_to_worker()) return admitted.status();
    admitted = chains_->admit(ref, op);
  }
  SURGE_ASSIGN_OR_RETURN(ChainPlace place, std::move(admitted));
  if (place.chain_id != 0 && chained_ == nullptr) {
    return Status::NotSupported(std::string(op) + " of a chunk of chain " +
                                std::to_string(place.chain_id) +
                                ": this data server does not serve chained chunks");
  }
  return place;
}

Result<OdsService::IoBuffer> OdsService::io_buffer(net::RpcContext& ctx) {
  IoBuffer b;
  SURGE_ASSIGN_OR_RETURN(b.grant, admission_.acquire(ctx.connection_id(), 1, options_.buffer_wait));
  SURGE_ASSIGN_OR_RETURN(b.buf, ctx.pool().acquire(chunk_, options_.buffer_wait));
  return b;
}

Result<OdsService::IoBuffer> OdsService::lane_buffer(net::RpcContext& ctx) {
  if (options_.lanes.lanes == 0) return io_buffer(ctx);
  IoBuffer b;
  SURGE_ASSIGN_OR_RETURN(b.buf, ctx.pool().acquire(chunk_, options_.buffer_wait));
  return b;
}

Status OdsService::chain_forward(net::RpcContext& ctx, const pb::ChainForwardRequest& req,
                                 pb::ChainForwardReply& resp) {
  InflightGuard g(inflight_);
  SURGE_ASSIGN_OR_RETURN(ChainPlace place, admit(req.ref(), "chain forward"));
  if (place.chain_id == 0) return Status::InvalidArgument("chain forward without a chain id");
  const bool delta = req.kind() == pb::UPDATE_EC_DELTA;
  if (delta) SURGE_RETURN_IF_ERROR(ec_served(place, "EC delta"));
  SURGE_ASSIGN_OR_RETURN(IoBuffer io, lane_buffer(ctx));
  Status st = delta ? ec_->apply_delta(ctx, req, place, std::move(io.buf), resp)
                    : chained_->forward(ctx, req, place, std::move(io.buf), resp);
  if (st.ok() && req.kind() == pb::UPDATE_WRITE) {
    metrics_.write_bytes.inc(req.length());
  }
  return st;
}

Status OdsService::list_chunks(const pb::ListChunksRequest& req, pb::ListChunksReply& resp) {
  InflightGuard g(inflight_);
  SURGE_ASSIGN_OR_RETURN(ChainPlace place, admit(req.ref(), "list chunks"));
  if (place.chain_id == 0) return Status::InvalidArgument("list chunks without a chain id");
  return chained_->list(req, place, resp);
}

Status OdsService::resync_chunk(net::RpcContext& ctx, const pb::ResyncChunkRequest& req,
                                pb::ResyncChunkReply& resp) {
  InflightGuard g(inflight_);
  SURGE_ASSIGN_OR_RETURN(ChainPlace place, admit(req.ref(), "resync chunk"));
  if (place.chain_id == 0) return Status::InvalidArgument("resync chunk without a chain id");
  SURGE_ASSIGN_OR_RETURN(IoBuffer io, lane_buffer(ctx));
  return chained_->resync(ctx, req, place, std::move(io.buf), resp);
}

// Legacy objects and truncate generations (ObjectStore::apply_truncate):
// a request that knows of a truncate the object has not applied finds the
// object as if cut. An update cuts it first.
Status OdsService::catch_up_truncate(const pb::ChunkRef& ref, uint64_t id, const char* op) {
  if (ref.truncate_seq() == 0 || id == 0) return Status::OK();
  return store_.apply_truncate(id, ref.truncate_seq(), ref.truncate_size(), /*for_update=*/true)
      .WithContext(std::string("before the ") + op + " of " + obj_name(id));
}

// ... and a read or stat answers nothing past that truncate's size.
Result<uint64_t> OdsService::readable_end(const pb::ChunkRef& ref, uint64_t id) {
  if (ref.truncate_seq() == 0) return UINT64_MAX;
  SURGE_ASSIGN_OR_RETURN(ObjectStore::TruncateGeneration g, store_.truncate_generation(id));
  return g.seq >= ref.truncate_seq() ? UINT64_MAX : ref.truncate_size();
}

Status OdsService::write(net::RpcContext& ctx, const pb::WriteRequest& req, pb::WriteReply& resp) {
  InflightGuard g(inflight_);
  SURGE_ASSIGN_OR_RETURN(ChainPlace place, admit(req.ref(), "write"));
  if (place.chain_id != 0) {
    SURGE_RETURN_IF_ERROR(ec_served(place, "write"));
    SURGE_ASSIGN_OR_RETURN(IoBuffer io, io_buffer(ctx));
    Status st = place.ec ? ec_->write(ctx, req, place, std::move(io.buf), resp)
                         : chained_->write(ctx, req, place, std::move(io.buf), resp);
    if (st.ok()) metrics_.write_bytes.inc(req.length());
    return st;
  }
  const uint64_t id = req.object_id(), off = req.offset(), len = req.length();
  if (id == 0) return Status::InvalidArgument("write from " + ctx.peer() + ": object id 0");
  if (len == 0) return Status::InvalidArgument("write " + obj_name(id) + " from " + ctx.peer() + ": length 0");
  if (len > options_.max_io_bytes) {
    return Status::InvalidArgument("write " + obj_name(id) + " from " + ctx.peer() + ": length " +
                                   std::to_string(len) + " over the limit " + std::to_string(options_.max_io_bytes));
  }
  const uint64_t max_size = store_.options().max_object_size;
  if (off > max_size || len > max_size - off) {
    return Status::InvalidArgument("write " + obj_name(id) + " from " + ctx.peer() + ": range [" +
                                   std::to_string(off) + ", +" + std::to_string(len) +
                                   ") past the maximum object size " + std::to_string(max_size));
  }
  SURGE_RETURN_IF_ERROR(check_bulk(ctx, net::BulkAccess::kServerPull, id, "write"));
  if (ctx.bulk().length(0) != len) {
    return Status::InvalidArgument("write " + obj_name(id) + " from " + ctx.peer() + ": bulk region of " +
                                   std::to_string(ctx.bulk().length(0)) + " bytes for a length of " +
                                   std::to_string(len));
  }

  SURGE_RETURN_IF_ERROR(catch_up_truncate(req.ref(), id, "write"));

  // The payload is checked and stored piece by piece as it arrives (see
  // WriteRequest.piece_crc32c), so checksumming and storing one piece
  // overlaps the arrival of the next. A client that sends one CRC for the
  // whole payload gets it checked as one piece.
  const bool pieces = req.piece_crc32c_size() > 0;
  const uint64_t piece_bytes = pieces ? req.piece_bytes() : len;
  if (pieces && !pb::valid_piece_bytes(piece_bytes)) {
    return Status::InvalidArgument(
        "write " + obj_name(id) + " from " + ctx.peer() + ": piece size " +
        std::to_string(piece_bytes) + " is not a power of two in [" +
        std::to_string(pb::kMinPieceBytes) + ", " + std::to_string(pb::kMaxPieceBytes) + "]");
  }
  // Only now: piece_count divides by the piece size, which may have been 0.
  const uint64_t npieces = pieces ? pb::piece_count(off, len, piece_bytes) : 1;
  if (pieces) {
    if (static_cast<uint64_t>(req.piece_crc32c_size()) != npieces) {
      return Status::InvalidArgument("write " + obj_name(id) + " from " + ctx.peer() + ": " +
                                     std::to_string(req.piece_crc32c_size()) + " piece CRCs for " +
                                     std::to_string(npieces) + " pieces");
    }
  }

  // Buffers for the largest piece, reused for every piece.
  const uint64_t window = std::min(len, piece_bytes);
  const size_t chunks = (window + chunk_ - 1) / chunk_;
  SURGE_ASSIGN_OR_RETURN(auto grant,
                         admission_.acquire(ctx.connection_id(), chunks, options_.buffer_wait));
  std::vector<net::PoolBuffer> bufs;
  bufs.reserve(chunks);
  for (uint64_t left = window; left > 0;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk_, left));
    SURGE_ASSIGN_OR_RETURN(net::PoolBuffer buf, ctx.pool().acquire(n, options_.buffer_wait));
    bufs.push_back(std::move(buf));
    left -= n;
  }

  // A write that fails after storing some pieces must not leave the object
  // longer than it was (what a failed single write guarantees too), or
  // than its own offset, whichever is more: note the size to cut back to.
  uint64_t size_before = 0;
  if (npieces > 1) {
    auto st = store_.stat(id);
    if (st.ok()) {
      size_before = *st;
    } else if (st.status().code() != Code::kNotFound) {
      return st.status();
    }
  }
  std::vector<iovec> segs;
  segs.reserve(chunks);
  uint64_t size = 0;
  uint64_t done = 0;
  auto undo_extension = [&](Status st) {
    // Only our own extension: if the object is no longer exactly where our
    // last piece left it, another writer has grown it and it stays. And
    // never below our own offset: what lies before it is not ours, and
    // another writer may have stored (and been acknowledged for) bytes
    // there while our pieces arrived; cutting them would lose them.
    const uint64_t back_to = std::max(size_before, off);
    if (done > 0 && size == off + done && size > back_to) {
      Status ts = store_.truncate(id, back_to, size);
      if (!ts.ok())
        SLOG_ERROR("write {}: cannot undo the extension of a failed write: {}", obj_name(id),
                   ts.ToString());
    }
    return st;
  };
  for (int piece = 0; done < len; ++piece) {
    const uint64_t at = off + done;
    const uint64_t plen = pieces ? pb::piece_length(at, len - done, piece_bytes) : len;
    segs.clear();
    for (uint64_t got = 0; got < plen;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk_, plen - got));
      std::span<std::byte> dst(bufs[segs.size()].data(), n);
      Status ps = ctx.bulk().pull(0, done + got, dst);
      if (!ps.ok()) {
        // A stalled or vanished peer: its connection is closed (over TCP,
        // after ServerOptions::bulk_stall_timeout without a byte) and the
        // units it held go back as this returns.
        if (ps.code() == Code::kTimedOut) {
          SLOG_ERROR("write {} from {}: payload stopped after {} of {} bytes, {} IO buffers freed: {}",
                     obj_name(id), ctx.peer(), done + got, len, chunks, ps.ToString());
        } else {
          SLOG_WARN("write {} from {}: payload ended after {} of {} bytes: {}", obj_name(id),
                    ctx.peer(), done + got, len, ps.ToString());
        }
        return undo_extension(
            ps.WithContext("while pulling " + obj_name(id) + " data from " + ctx.peer()));
      }
      segs.push_back({dst.data(), n});
      got += n;
    }
    const PayloadChecksums sums = checksum_payload(segs, at);
    const uint32_t want = pieces ? req.piece_crc32c(piece) : req.crc32c();
    if (sums.payload != want) {
      metrics_.payload_crc_errors.inc();
      SLOG_WARN(
          "write {} at offset {} from {}: payload CRC {:08x} over [{}, +{}), request says {:08x}; "
          "{}",
          obj_name(id), off, ctx.peer(), sums.payload, at, plen, want,
          done == 0 ? "nothing stored" : "stored up to there");
      return undo_extension(Status::Corruption(
          "write " + obj_name(id) + " at offset " + std::to_string(off) +
          ": payload checksum mismatch in [" + std::to_string(at) + ", +" + std::to_string(plen) +
          "), " +
          (done == 0 ? std::string("nothing stored")
                     : "the " + std::to_string(done) + " bytes before it were stored")));
    }
    const bool last = done + plen == len;
    auto stored = store_.write(id, at, segs, req.sync() && last, &sums);
    if (!stored.ok()) return undo_extension(stored.status());
    size = *stored;
    done += plen;
  }
  metrics_.write_bytes.inc(len);
  resp.set_object_size(size);
  return Status::OK();
}

Status OdsService::read(net::RpcContext& ctx, const pb::ReadRequest& req, pb::ReadReply& resp) {
  InflightGuard g(inflight_);
  SURGE_ASSIGN_OR_RETURN(ChainPlace place, admit(req.ref(), "read", &ctx));
  if (place.chain_id != 0) {
    if (req.length() > options_.max_io_bytes) {
      return Status::InvalidArgument("read of a chunk from " + ctx.peer() + ": length " +
                                     std::to_string(req.length()) + " over the limit " +
                                     std::to_string(options_.max_io_bytes));
    }
    SURGE_RETURN_IF_ERROR(ec_served(place, "read"));
    SURGE_ASSIGN_OR_RETURN(IoBuffer io, io_buffer(ctx));
    Status st = place.ec ? ec_->read(ctx, req, place, std::move(io.buf), resp)
                         : chained_->read(ctx, req, place, std::move(io.buf), resp);
    if (st.ok()) metrics_.read_bytes.inc(resp.length());
    return st;
  }
  const uint64_t id = req.object_id(), off = req.offset();
  if (id == 0) return Status::InvalidArgument("read from " + ctx.peer() + ": object id 0");
  if (req.length() > options_.max_io_bytes) {
    return Status::InvalidArgument("read " + obj_name(id) + " from " + ctx.peer() + ": length " +
                                   std::to_string(req.length()) + " over the limit " +
                                   std::to_string(options_.max_io_bytes));
  }
  SURGE_RETURN_IF_ERROR(check_bulk(ctx, net::BulkAccess::kServerPush, id, "read"));
  if (ctx.bulk().length(0) < req.length()) {
    return Status::InvalidArgument("read " + obj_name(id) + " from " + ctx.peer() +
                                   ": bulk region of " + std::to_string(ctx.bulk().length(0)) +
                                   " bytes for a length of " + std::to_string(req.length()));
  }
  resp.set_length(0);
  resp.set_crc32c(0);
  SURGE_ASSIGN_OR_RETURN(const uint64_t end, readable_end(req.ref(), id));
  if (off >= end) return Status::OK();
  const uint64_t len = std::min(req.length(), end - off);
  if (len == 0 || off >= store_.options().max_object_size) return Status::OK();

  // In pieces, so reading and checking one overlaps the client receiving
  // the one before.
  const size_t piece = std::min<size_t>(chunk_, kReadPieceBytes);
  SURGE_ASSIGN_OR_RETURN(auto grant, admission_.acquire(ctx.connection_id(), 1, options_.buffer_wait));
  SURGE_ASSIGN_OR_RETURN(net::PoolBuffer buf,
                         ctx.pool().acquire(std::min<uint64_t>(piece, len), options_.buffer_wait));
  uint32_t crc = 0;
  uint64_t done = 0;
  while (done < len) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(piece, len - done));
    auto chunk = store_.read(id, off + done, std::span<std::byte>(buf.data(), n), &crc);
    if (!chunk.ok()) {
      if (chunk.status().code() == Code::kCorruption) metrics_.stored_crc_errors.inc();
      return chunk.status();
    }
    const uint64_t got = *chunk;
    if (got == 0) break;
    // The last piece goes out of the buffer itself, handed to the
    // transport (over RDMA no copy and no wait for the WRITE).
    const bool last = got < n || done + got == len;
    Status ps = last ? ctx.bulk().push_owned(0, done, std::move(buf), got)
                     : ctx.bulk().push(0, done, std::span<const std::byte>(buf.data(), got));
    if (!ps.ok()) {
      // A peer that stopped reading: closed after the stall timeout.
      if (ps.code() == Code::kTimedOut) {
        SLOG_ERROR("read {} by {}: data stopped after {} of {} bytes, IO buffer freed: {}",
                   obj_name(id), ctx.peer(), done, len, ps.ToString());
      }
      return ps.WithContext("while pushing " + obj_name(id) + " data to " + ctx.peer());
    }
    done += got;
    if (last) break;  // the buffer is gone; got < n: the end of the object
  }
  metrics_.read_bytes.inc(done);
  resp.set_length(done);
  resp.set_crc32c(crc);
  return Status::OK();
}

Status OdsService::truncate(const pb::TruncateRequest& req, pb::TruncateReply& resp) {
  InflightGuard g(inflight_);
  SURGE_ASSIGN_OR_RETURN(ChainPlace place, admit(req.ref(), "truncate"));
  if (place.ec) {
    SURGE_RETURN_IF_ERROR(ec_served(place, "truncate"));
    return ec_->truncate(req, place, resp);
  }
  if (place.chain_id != 0) return chained_->truncate(req, place, resp);
  // With a generation (the MDS's intent pass): nothing if the object
  // applied it already, so a late truncate never cuts a later write.
  return store_.apply_truncate(req.object_id(), req.ref().truncate_seq(), req.size(),
                               /*for_update=*/false);
}

Status OdsService::remove(const pb::RemoveRequest& req, pb::RemoveReply& resp) {
  InflightGuard g(inflight_);
  SURGE_ASSIGN_OR_RETURN(ChainPlace place, admit(req.ref(), "remove"));
  if (place.ec) {
    SURGE_RETURN_IF_ERROR(ec_served(place, "remove"));
    return ec_->remove(req, place, resp);
  }
  if (place.chain_id != 0) return chained_->remove(req, place, resp);
  const uint64_t seq = req.ref().truncate_seq();
  SURGE_ASSIGN_OR_RETURN(bool existed, seq != 0 ? store_.remove_older_than(req.object_id(), seq)
                                                : store_.remove(req.object_id()));
  resp.set_existed(existed);
  return Status::OK();
}

Status OdsService::stat(net::RpcContext& ctx, const pb::StatRequest& req, pb::StatReply& resp) {
  InflightGuard g(inflight_);
  SURGE_ASSIGN_OR_RETURN(ChainPlace place, admit(req.ref(), "stat", &ctx));
  if (place.chain_id != 0) return chained_->stat(req, place, resp);
  SURGE_ASSIGN_OR_RETURN(uint64_t size, store_.stat(req.object_id()));
  SURGE_ASSIGN_OR_RETURN(const uint64_t end, readable_end(req.ref(), req.object_id()));
  resp.set_size(std::min(size, end));
  return Status::OK();
}

Status OdsService::sync(const pb::SyncRequest& req, pb::SyncReply&) {
  InflightGuard g(inflight_);
  if (static_cast<size_t>(req.object_ids_size()) > options_.max_sync_ids) {
    return Status::InvalidArgument("sync of " + std::to_string(req.object_ids_size()) + " objects, the limit is " +
                                   std::to_string(options_.max_sync_ids));
  }
  if (static_cast<size_t>(req.refs_size()) > options_.max_sync_ids) {
    return Status::InvalidArgument("sync of " + std::to_string(req.refs_size()) +
                                   " chunks, the limit is " + std::to_string(options_.max_sync_ids));
  }
  std::vector<std::pair<const pb::ChunkRef*, ChainPlace>> chunks;
  for (const auto& ref : req.refs()) {
    SURGE_ASSIGN_OR_RETURN(ChainPlace place, admit(ref, "sync"));
    if (place.chain_id != 0) chunks.emplace_back(&ref, place);
  }
  std::vector<uint64_t> ids(req.object_ids().begin(), req.object_ids().end());
  // Legacy objects (all unsynced ones when no id is named and no chunk is).
  if (!ids.empty() || chunks.empty()) SURGE_RETURN_IF_ERROR(store_.sync(ids));
  for (const auto& [ref, place] : chunks) {
    if (place.ec) {
      SURGE_RETURN_IF_ERROR(ec_served(place, "sync"));
      SURGE_RETURN_IF_ERROR(ec_->sync(*ref, place));
    } else {
      SURGE_RETURN_IF_ERROR(chained_->sync(*ref, place));
    }
  }
  return Status::OK();
}

Status OdsService::statfs(const pb::StatFsRequest&, pb::StatFsReply& resp) {
  SURGE_ASSIGN_OR_RETURN(StoreStats s, store_.statfs());
  resp.set_capacity_bytes(s.capacity_bytes);
  resp.set_free_bytes(s.free_bytes);
  resp.set_objects(s.objects);
  return Status::OK();
}

Status OdsService::ec_commit(const pb::EcCommitRequest& req, pb::EcCommitReply&) {
  InflightGuard g(inflight_);
  SURGE_ASSIGN_OR_RETURN(ChainPlace place, admit(req.ref(), "EC commit"));
  if (!place.ec) {
    return Status::InvalidArgument("EC commit of chunk " + std::to_string(req.ref().ino()) + "/" +
                                   std::to_string(req.ref().slot()) + ": chain " +
                                   std::to_string(place.chain_id) + " is not an EC chain");
  }
  SURGE_RETURN_IF_ERROR(ec_served(place, "EC commit"));
  return ec_->commit(req, place);
}

Status OdsService::fallocate(const pb::FallocateRequest& req, pb::FallocateReply& resp) {
  InflightGuard g(inflight_);
  SURGE_ASSIGN_OR_RETURN(ChainPlace place, admit(req.ref(), "fallocate"));
  if (place.ec) {
    // Punching or zeroing a data range would need its parity deltas, and a
    // reservation is of little use on one position: not offered for EC.
    return Status::NotSupported(
        "fallocate of " +
        ChunkKey{req.ref().ino(), req.ref().slot(), req.ref().position()}.describe() +
        " of EC chain " + std::to_string(place.chain_id) + ": EC chunks take no fallocate");
  }
  if (place.chain_id != 0) return chained_->fallocate(req, place, resp);
  SURGE_RETURN_IF_ERROR(catch_up_truncate(req.ref(), req.object_id(), "fallocate"));
  ObjectStore::SpaceOp op;
  switch (req.mode()) {
    case pb::FALLOCATE_RESERVE: op = ObjectStore::SpaceOp::kReserve; break;
    case pb::FALLOCATE_PUNCH: op = ObjectStore::SpaceOp::kPunch; break;
    case pb::FALLOCATE_ZERO: op = ObjectStore::SpaceOp::kZero; break;
    default:
      return Status::NotSupported("fallocate " + obj_name(req.object_id()) + ": unknown mode " +
                                  std::to_string(static_cast<int>(req.mode())));
  }
  SURGE_RETURN_IF_ERROR(store_.fallocate(req.object_id(), req.offset(), req.length(), op, req.keep_size()));
  auto size = store_.stat(req.object_id());
  if (size.ok()) {
    resp.set_object_size(*size);
  } else if (size.status().code() != Code::kNotFound) {
    return size.status();
  }
  return Status::OK();
}

Status OdsService::scrub(const pb::ScrubRequest& req, pb::ScrubReply& resp) {
  InflightGuard g(inflight_);
  if (req.dir_count() == 0 || req.dir_count() > 4096 || req.first_dir() >= ObjectStore::kFanoutDirs) {
    return Status::InvalidArgument("scrub: directories [" + std::to_string(req.first_dir()) + ", +" +
                                   std::to_string(req.dir_count()) + ") out of range (65536 of them, 4096 at most)");
  }
  ObjectStore::ScrubStats stats;
  SURGE_RETURN_IF_ERROR(store_.scrub(req.first_dir(), req.dir_count(), 1024, stats));
  resp.set_objects_checked(stats.objects);
  resp.set_bytes_checked(stats.bytes);
  for (const auto& [id, off] : stats.bad) {
    auto* b = resp.add_bad_blocks();
    b->set_object_id(id);
    b->set_offset(off);
  }
  // The chunks of chained files live in an object store of their own
  // (data_dir/chunks/) with the same fan-out: the same directories of it.
  if (chained_ != nullptr && stats.bad.size() < 1024) {
    ChunkStore& chunks = chained_->chunks();
    ObjectStore::ScrubStats cs;
    SURGE_RETURN_IF_ERROR(chunks.objects().scrub(req.first_dir(), req.dir_count(),
                                                 1024 - stats.bad.size(), cs));
    resp.set_objects_checked(resp.objects_checked() + cs.objects);
    resp.set_bytes_checked(resp.bytes_checked() + cs.bytes);
    for (const auto& [id, off] : cs.bad) {
      SURGE_ASSIGN_OR_RETURN(auto owner, chunks.index().find_object(id));
      if (!owner) {
        // Bytes no record names (a chunk removed as the scrub read it).
        SLOG_WARN("scrub: chunk object {} has a bad block at {} and no chunk record", id, off);
        continue;
      }
      auto* b = resp.add_bad_blocks();
      b->set_offset(off);
      pb::ChunkRef* ref = b->mutable_chunk();
      ref->set_target_id(chains_ != nullptr ? chains_->own_id() : 0);
      ref->set_chain_id(owner->second.chain_id);
      ref->set_ino(owner->first.ino);
      ref->set_slot(owner->first.slot);
      ref->set_position(owner->first.position);
    }
  }
  resp.set_next_dir(std::min<uint32_t>(ObjectStore::kFanoutDirs, req.first_dir() + req.dir_count()));
  return Status::OK();
}

}  // namespace surge::ods
