// ChainedChunks: the chunks of format 2 files as one chain member serves
// them (docs/redundancy.md: "Chunk versions", "Writes", "Reads (CRAQ)",
// "Return and resync"). OdsService judges a request's ref (ChainView),
// takes its IO buffer and hands chained requests here:
//
// * At the head, a write, truncate or remove takes the chunk's update order
//   (UpdateOrder), gets the chunk's next version, is stored (the record is
//   marked dirty before the bytes change, so a reader that saw it clean and
//   still sees the same version read no torn update) and is forwarded to
//   the successor; the reply waits for the successor's. A write is one
//   update per pool buffer (units cut at multiples of the buffer size), so
//   the head never holds more than one buffer of a request.
// * A forwarded update is applied in version order: a resend of the
//   latest version is forwarded again if it is not committed yet, older
//   ones answer OK, a gap answers ChunkVersionGap.
// * A version is committed (the chunk clean) when the successor replied;
//   at the tail at once.
// * Reads: a SYNCING member answers NotServing; a dirty chunk ChunkDirty
//   except at the last SERVING member.
// * Sync of a chunk travels the chain (update version 0); fallocate is an
//   update like a truncate (UPDATE_FALLOCATE).
// * OdsListChunks and OdsResyncChunk are the receiving side of a resync;
//   pieces of a send cut short that arrive after a later send of the chunk
//   began are refused (ResyncSends). A read of a copy left incomplete
//   answers Unavailable (the client waits and retries), never the part
//   that came.
#pragma once

#include <chrono>

#include "net/buffer_pool.h"
#include "net/proto/ods.pb.h"
#include "net/rpc_server.h"
#include "ods/chain/chain_forwarder.h"
#include "ods/chain/chain_view.h"
#include "ods/chain/resync_sends.h"
#include "ods/chain/update_order.h"
#include "ods/store/chunk_store.h"

namespace surge::ods {

class ChainedChunks {
 public:
  ChainedChunks(ChunkStore& chunks, ChainView& view, ChainForwarder& forwarder);

  // buf: one pool buffer (of the size that cuts a write into updates).
  Status write(net::RpcContext& ctx, const proto::ods::WriteRequest& req, const ChainPlace& place,
               net::PoolBuffer buf, proto::ods::WriteReply& resp);
  Status read(net::RpcContext& ctx, const proto::ods::ReadRequest& req, const ChainPlace& place,
              net::PoolBuffer buf, proto::ods::ReadReply& resp);
  Status truncate(const proto::ods::TruncateRequest& req, const ChainPlace& place,
                  proto::ods::TruncateReply& resp);
  Status remove(const proto::ods::RemoveRequest& req, const ChainPlace& place,
                proto::ods::RemoveReply& resp);
  Status stat(const proto::ods::StatRequest& req, const ChainPlace& place,
              proto::ods::StatReply& resp);
  Status sync(const proto::ods::ChunkRef& ref, const ChainPlace& place);
  Status fallocate(const proto::ods::FallocateRequest& req, const ChainPlace& place,
                   proto::ods::FallocateReply& resp);

  Status forward(net::RpcContext& ctx, const proto::ods::ChainForwardRequest& req,
                 const ChainPlace& place, net::PoolBuffer buf,
                 proto::ods::ChainForwardReply& resp);
  Status list(const proto::ods::ListChunksRequest& req, const ChainPlace& place,
              proto::ods::ListChunksReply& resp);
  Status resync(net::RpcContext& ctx, const proto::ods::ResyncChunkRequest& req,
                const ChainPlace& place, net::PoolBuffer buf,
                proto::ods::ResyncChunkReply& resp);

  // At the head of place's chain: if key is still dirty (and complete)
  // under its update order, gives it a new version that changes no byte
  // (a truncate to its own size), forwards that down the chain (a member
  // that missed the pending update gets the chunk whole) and commits it.
  // True when it rolled the chunk forward, false when it was clean.
  Result<bool> roll_forward(const ChainPlace& place, const ChunkKey& key);

  UpdateOrder& order() { return order_; }
  ChunkStore& chunks() { return chunks_; }

 private:
  // The record of the ref's chunk (made when create), checked against the
  // ref's chain.
  Result<std::optional<ChunkRecord>> record(const ChunkKey& key, const proto::ods::ChunkRef& ref,
                                            bool create);
  // rec as the head takes it for an update: a chunk not held yet starts a
  // new life (chunk_lives.h).
  ChunkRecord begin_life(ChunkRecord rec) const;
  // Under a chunk's update order: StaleChain unless place's chain is still
  // at the version the request was admitted under. An update may wait for
  // buffers and for the update order long after its ref was judged; were it
  // applied under a chain that moved meanwhile, a resync source could have
  // compared the chunk already (it compares under the update order, once it
  // knows the new version) and the update would reach neither the syncing
  // member nor the comparison, or a member no longer head would take it.
  Status still_current(const ChainPlace& place, const std::string& what);
  // Marks rec committed at version v (if it still is at v) and stores it.
  Status commit(const ChunkKey& key, ChunkRecord& rec, uint64_t v, bool sync);

  ChunkStore& chunks_;
  ChainView& view_;
  ChainForwarder& forwarder_;
  UpdateOrder order_;
  ResyncSends sends_;  // whose whole-chunk pieces are taken, per chunk
};

// Pulls [at, at + len) of a request's bulk region 0 (from region offset
// base) into dst, checking each piece's CRC (piece_bytes > 0: crcs has one
// per piece; else crcs[0] covers it all), and stores each checked piece
// at its object offset in object id of store. Nothing of a piece that fails
// its check is stored.
Status pull_checked(net::RpcContext& ctx, uint64_t base, uint64_t at, uint64_t len,
                    uint32_t piece_bytes, std::span<const uint32_t> crcs, std::byte* dst,
                    ObjectStore& store, uint64_t id, const std::string& what);

}  // namespace surge::ods
