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
// * A write of one unit that is not a sync write pulls and checks its bytes
//   before it takes the update order (so the connection's next request is
//   read meanwhile), and lets the order go once its forward is on the lane
//   connection, waiting for the reply after: the next update of the chunk
//   is stored and sent meanwhile (docs/redundancy.md, "Pipelining one
//   chunk's updates"). Other updates hold the order until the successor
//   replied.
// * A forwarded update is applied in version order: one that arrives
//   before the update it follows waits for it briefly (kTurnWait), then
//   answers ChunkVersionGap; a resend of the latest version is forwarded
//   again if it is not committed yet; an older one answers OK at the tail
//   and, before it, once it is committed here (Unavailable if it is not
//   within kTurnWait).
// * A version is committed (the chunk clean) when the successor replied;
//   at the tail at once. Replies can come out of order at a pipelining
//   head: committed_version moves up to the highest version replied (the
//   successor applies in order, so that reply covers every version below).
// * Reads: a SYNCING member answers NotServing; a dirty chunk ChunkDirty
//   except at the last SERVING member.
// * Sync of a chunk travels the chain (update version 0); fallocate is an
//   update like a truncate (UPDATE_FALLOCATE).
// * Truncate generations (ChunkRef.truncate_seq, docs/redundancy.md): an
//   update at the head whose ref knows a newer truncate than the chunk
//   applied first cuts the chunk (an update of its own); a read or stat
//   with one answers nothing past the truncate's size; a truncate of a
//   generation already applied changes nothing. A copy records a
//   generation only after its bytes are cut.
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
#include "ods/chain/version_waits.h"
#include "ods/store/block_checksum.h"
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
  VersionWaits& waits() { return waits_; }

  // The record of the ref's chunk (made when create), checked against the
  // ref's chain (a chunk under another chain: see the .cpp on setstripe).
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

 private:
  // Marks rec committed at version v (if it still is at v) and stores it.
  Status commit(const ChunkKey& key, ChunkRecord& rec, uint64_t v, bool sync);
  // A write of one unit, not sync: see the comment at the top.
  Status write_one_unit(net::RpcContext& ctx, const proto::ods::WriteRequest& req,
                        const ChainPlace& place, net::PoolBuffer& buf, proto::ods::WriteReply& resp,
                        const std::string& what);
  // After the successor's reply for version v of key (object object_id):
  // committed_version up to v, unless it is there or the chunk moved on to
  // another object.
  Status commit_through(const ChunkKey& key, const proto::ods::ChunkRef& ref, uint64_t v,
                        uint64_t object_id, proto::ods::WriteReply& resp);
  // A pipelined forward of version v met a gap at the successor: under the
  // update order, unless v is committed by now, a no-op update (as
  // roll_forward) goes down the chain held, bringing the successor whole.
  Status recover_gap(const ChainPlace& place, const ChunkKey& key, uint64_t v,
                     const std::string& what);
  // Under key's update order at the head, before an update of rec (or as
  // a truncate of generation seq): if seq is newer than rec's, the chunk
  // is cut to size (cut) when longer, and rec takes the generation.
  Status catch_up_generation(const ChainPlace& place, const ChunkKey& key, ChunkRecord& rec,
                             uint64_t seq, uint64_t size, const std::string& what);
  // Under key's update order at the head: rec truncated to size as an
  // update of its own (stored, forwarded, committed), recording
  // generation seq (when newer; 0: none) once the bytes are cut.
  Status cut(const ChainPlace& place, const ChunkKey& key, ChunkRecord& rec, uint64_t size,
             uint64_t seq, const std::string& what);
  // Under key's update order: a no-op update down the chain (see
  // roll_forward) of the dirty rec.
  Status forward_noop(const ChainPlace& place, const ChunkKey& key, ChunkRecord rec,
                      const std::string& what);

  ChunkStore& chunks_;
  ChainView& view_;
  ChainForwarder& forwarder_;
  UpdateOrder order_;
  VersionWaits waits_;
  ResyncSends sends_;  // whose whole-chunk pieces are taken, per chunk
};

// Checks a payload's piece structure: piece_bytes valid and one CRC per
// piece, or no pieces and one CRC (fits a buffer of cap bytes).
Status check_pieces(uint64_t off, uint64_t len, uint32_t piece_bytes, int ncrcs, size_t cap,
                    const std::string& what);
// Checks that a request brings one bulk region of kind `want` of at least
// len bytes.
Status check_region(net::RpcContext& ctx, net::BulkAccess want, uint64_t len,
                    const std::string& what);

// The checks of a chained write before anything is pulled: a range that
// is not empty and ends within max_size, one pull region of exactly its
// length, and pieces that fit a buffer of cap bytes.
Status check_write_request(net::RpcContext& ctx, const proto::ods::WriteRequest& req,
                           uint64_t max_size, size_t cap, const std::string& what);

// Pulls [at, at + len) of a request's bulk region 0 (from region offset
// base) into dst and checks each piece's CRC as pull_checked does, storing
// nothing; store_pulled stores the pieces afterwards.
struct PulledPiece {
  uint64_t done = 0;  // offset in dst and past `at`
  uint64_t length = 0;
  PayloadChecksums sums;
};
Result<std::vector<PulledPiece>> pull_verified(net::RpcContext& ctx, uint64_t base, uint64_t at,
                                               uint64_t len, uint32_t piece_bytes,
                                               std::span<const uint32_t> crcs, std::byte* dst,
                                               const std::string& what);
Status store_pulled(ObjectStore& store, uint64_t id, uint64_t at, std::byte* src,
                    const std::vector<PulledPiece>& pieces, const std::string& what);

// Checks a payload's piece structure: piece_bytes valid and one CRC per
// piece, or no pieces and one CRC (fits a buffer of cap bytes).
Status check_pieces(uint64_t off, uint64_t len, uint32_t piece_bytes, int ncrcs, size_t cap,
                    const std::string& what);
// Checks that a request brings one bulk region of kind `want` of at least
// len bytes.
Status check_region(net::RpcContext& ctx, net::BulkAccess want, uint64_t len,
                    const std::string& what);

// The checks of a chained write before anything is pulled: a range that
// is not empty and ends within max_size, one pull region of exactly its
// length, and pieces that fit a buffer of cap bytes.
Status check_write_request(net::RpcContext& ctx, const proto::ods::WriteRequest& req,
                           uint64_t max_size, size_t cap, const std::string& what);

// Pulls [at, at + len) of a request's bulk region 0 (from region offset
// base) into dst, checking each piece's CRC (piece_bytes > 0: crcs has one
// per piece; else crcs[0] covers it all), and stores each checked piece
// at its object offset in object id of store. Nothing of a piece that fails
// its check is stored.
Status pull_checked(net::RpcContext& ctx, uint64_t base, uint64_t at, uint64_t len,
                    uint32_t piece_bytes, std::span<const uint32_t> crcs, std::byte* dst,
                    ObjectStore& store, uint64_t id, const std::string& what);

}  // namespace surge::ods
