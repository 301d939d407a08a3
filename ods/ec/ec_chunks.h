// EcChunks: the chunks of erasure-coded (EC K+M) chains as one member
// serves them (docs/redundancy.md, "EC writes: the design"). Member i of an
// EC chain holds position i of every stripe group: data chunks at 0 .. K-1,
// parity chunks at K .. K+M-1. OdsService hands a request here when its
// ref names an EC chain; a request for a position this member does not
// hold is WrongTarget.
//
// * A write goes to its data position only. Under the chunk's update order
//   (UpdateOrder, shared with ChainedChunks) the member reads the old bytes
//   of the range, stores the new ones at the chunk's next version (the
//   record dirty meanwhile), turns its buffer into delta = old ^ new and
//   sends it (OdsChainForward UPDATE_EC_DELTA, hop 1) to every parity
//   position in the write chain at once; the reply comes when every one
//   applied it, and the version is committed then. A write is one update
//   per pool buffer, as in replicated chains. When a delta does not reach
//   every parity position (one failed, or the chain moved), the chunk
//   stays dirty and the delta is kept in memory: the chunk's next write
//   (the client's retry) sends it again first, under the chain as it is
//   then, and a sweeper after kResendAfter when nothing did. Past
//   kept_deltas failed ones, only a marker is kept, and the delta is
//   rebuilt when sent: the XOR of the bytes held and of the chunk at the
//   version the lagging parity positions applied, read from K others
//   (LaggingParity::resend_lost). A data server that restarts is rebuilt
//   instead (EcRebuild), which completes such an update itself.
// * A parity position applies a delta from source p under its chunk's
//   update order, in p's version order: its record keeps, per data
//   position, the version whose delta it applied last (ChunkRecord.applied).
//   A delta already applied is acknowledged again without applying it (a
//   resend: deltas are not idempotent, the versions make them so); one
//   that comes before its turn waits briefly, then answers
//   ChunkVersionGap. Deltas of different sources may interleave in any
//   order: XOR deltas commute, so the parity ends as the code of the final
//   data of every position.
// * Reads go to the position's member. A data position serves what it
//   holds with its version; a parity position serves its bytes with the
//   applied versions, and answers ChunkDirty while a delta is being
//   applied (a reader combines parity with data only when the versions
//   agree). A bytes' version is checked again after they are read, so an
//   answer's bytes are exactly those of the version it names.
//
// * Full-group writes, encoded by the client (WriteRequest.ec_hold, three
//   steps, docs/redundancy.md "EC writes: full groups"): a data position
//   stores the bytes and keeps the delta instead of sending it (held); a
//   parity position stores the client's parity bytes when its applied
//   versions are those the data positions answered or the ones before;
//   OdsEcCommit then sends the held delta only to the parity positions
//   that did not. A held delta whose commit does not come (the client
//   died) is sent by a sweeper after kHoldTimeout. Each byte crosses the
//   network once (K + M chunks for K of data) instead of M + 1 times.
//
// Rebuild of a position from K others is EcRebuild's (ec_rebuild.h): a
// member back from a crash is SYNCING and rebuilds what it holds, parity
// left dirty in the middle of an apply included, and completes an update
// whose delta reached some parity positions only.
//
// * A data position whose member is down takes its writes through a
//   stand-in, its chain's first SERVING parity position (stand_in.h).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>

#include "common/ec/rs_codec.h"
#include "net/buffer_pool.h"
#include "net/proto/ods.pb.h"
#include "net/rpc_server.h"
#include "ods/chain/chain_forwarder.h"
#include "ods/chain/chain_view.h"
#include "ods/chain/chained_chunks.h"
#include "ods/ec/ec_rebuild.h"
#include "ods/ec/kept_deltas.h"
#include "ods/ec/lagging_parity.h"
#include "ods/ec/stand_in.h"

namespace surge::ods {

class EcChunks {
 public:
  // pool: the server's, for resending a kept delta from registered memory.
  // kept_deltas: failed deltas kept for a resend at most (each up to one
  // pool buffer; [ec] kept_deltas); past it one is rebuilt when sent.
  EcChunks(ChainedChunks& chained, ChainView& view, ChainForwarder& forwarder,
           net::BufferPool& pool, size_t kept_deltas = kMaxPending);

  // The default of kept_deltas.
  static constexpr size_t kMaxPending = 16;
  // Bytes of deltas held for an OdsEcCommit at most; past it a hold sends
  // at once.
  static constexpr uint64_t kMaxHeldBytes = 64 << 20;
  // A held delta whose commit did not come in this long is sent anyway.
  static constexpr auto kHoldTimeout = std::chrono::seconds(3);
  static constexpr auto kResendAfter = std::chrono::seconds(1);
  // Local index entries listed per page by note_unsent().
  static constexpr size_t kNotePage = 1024;

  // At a data position (ec_hold: held for a commit), or the client's
  // parity bytes of a full group at a parity position (ec_group_versions).
  // buf: one pool buffer.
  Status write(net::RpcContext& ctx, const proto::ods::WriteRequest& req, const ChainPlace& place,
               net::PoolBuffer buf, proto::ods::WriteReply& resp);
  // At any position.
  Status read(net::RpcContext& ctx, const proto::ods::ReadRequest& req, const ChainPlace& place,
              net::PoolBuffer buf, proto::ods::ReadReply& resp);
  // At the position's member. A data position cut shorter sends what it
  // cut as a delta first (the parity of zeros is zero, so the parity stays
  // the code of the data with no cut of its own); a parity position only
  // records the truncate generation. Longer: no byte changes.
  Status truncate(const proto::ods::TruncateRequest& req, const ChainPlace& place,
                  proto::ods::TruncateReply& resp);
  // Drops the position's own chunk (idempotent; a generation check as in
  // replicated chains). Nothing is forwarded: each position is removed at
  // its own member.
  Status remove(const proto::ods::RemoveRequest& req, const ChainPlace& place,
                proto::ods::RemoveReply& resp);
  // OdsEcCommit at a data position: sends each held delta named to the
  // parity positions in the write chain (SERVING or SYNCING) not in its
  // parity_applied, in version order, and commits it.
  Status commit(const proto::ods::EcCommitRequest& req, const ChainPlace& place);
  // Makes the position's own chunk durable.
  Status sync(const proto::ods::ChunkRef& ref, const ChainPlace& place);
  // The rebuild of this member's positions where it is SYNCING.
  EcRebuild& rebuild() { return rebuild_; }
  // UPDATE_EC_DELTA at a parity position. SYNCING (being rebuilt): a chunk
  // not rebuilt yet is rebuilt first, or, when it cannot be now, the delta
  // is acknowledged unapplied (ec_rebuild.h).
  Status apply_delta(net::RpcContext& ctx, const proto::ods::ChainForwardRequest& req,
                     const ChainPlace& place, net::PoolBuffer buf,
                     proto::ods::ChainForwardReply& resp);

 private:
  // Under key's update order at a data position: a member SYNCING in
  // place's chain rebuilds the chunk before it changes it (once per sync).
  Status rebuilt_first(const ChainPlace& place, const ChunkKey& key, const std::string& what);
  // The codec of place's K+M (made once per shape).
  Result<const ec::RsCodec*> codec(const ChainPlace& place);

  // Where an update stands at a parity chunk: applied already, next in
  // its source's order, or come before its turn.
  enum class Turn { kDone, kNow, kEarly };
  // Version v of a data position at a parity chunk that applied a of it.
  static Turn turn_of(uint64_t a, uint64_t v);
  using Judge = std::function<Turn(const ChunkRecord&)>;
  // Under key's update order (order, released while waiting): the parity
  // chunk's record (made when missing) and judge's verdict on it, once that
  // is not kEarly or `wait` has passed.
  Result<std::pair<ChunkRecord, Turn>> await_turn(const ChainPlace& place,
                                                  const proto::ods::ChunkRef& ref,
                                                  std::optional<UpdateOrder::Guard>& order,
                                                  const Judge& judge, const std::string& what,
                                                  std::chrono::milliseconds wait);
  // One update of [at, at + n) of a data chunk whose new bytes are in buf.
  // sync: the parity positions make the delta durable before replying.
  // hold: keep the delta for a commit instead (held says whether it was).
  // rec: the chunk's record as the update left it.
  Status write_unit(const ChainPlace& place, const proto::ods::ChunkRef& ref, uint64_t at,
                    uint64_t n, net::PoolBuffer& buf, const std::vector<PulledPiece>& pieces,
                    bool sync, bool hold, const std::string& what, ChunkRecord& rec, bool& held);
  // Step 2 of a full-group write at a parity position, once write() has
  // checked the member serves and the request is well formed.
  Status write_parity(net::RpcContext& ctx, const proto::ods::WriteRequest& req,
                      const ChainPlace& place, net::PoolBuffer buf, proto::ods::WriteReply& resp);
  // Under the update order of ref's chunk, once update v (the one after
  // rec.committed_version; its truncate generation truncate_seq) is
  // stored: sends its delta (at `at`, in registered memory) to the parity
  // positions and commits it, or keeps it for a resend (always while fewer
  // than K positions serve: a parity position away may return as it is).
  // skip: bit p set for each parity position p known to hold it already.
  Status deliver(const ChainPlace& place, const proto::ods::ChunkRef& ref, ChunkRecord& rec,
                 uint64_t v, uint64_t truncate_seq, uint64_t at, std::span<const std::byte> delta,
                 bool sync, const std::string& what, uint64_t skip = 0);
  // LaggingParity's: sends the delta of an update some parity positions
  // missed (rebuilt from both versions) from a pool buffer.
  Status send_lost_delta(const ChainPlace& place, const ChunkKey& key, uint64_t at,
                         std::span<const std::byte> delta, uint64_t v, uint64_t truncate_seq,
                         uint64_t skip);
  // Sends delta (buf[0, n), the data chunk's version v) to every parity
  // position of place's write chain not in skip and waits for all of them.
  Status send_deltas(const ChainPlace& place, const proto::ods::ChunkRef& ref, uint64_t at,
                     std::span<const std::byte> delta, uint64_t v, uint64_t truncate_seq, bool sync,
                     const std::string& what, uint64_t skip, bool stand_in = false);

  // Under key's update order, at a data position: cuts rec to size (when
  // longer), from its end backwards one buffer at a time, each cut an
  // update whose delta (the bytes cut) goes to the parity positions, and
  // records generation seq (0: none) once cut.
  Status cut(const ChainPlace& place, const proto::ods::ChunkRef& ref, ChunkRecord& rec,
             uint64_t size, uint64_t seq, const std::string& what);
  // Under key's update order: sends the kept (failed or held) deltas of
  // rec's updates after its committed version up to `upto`, oldest first,
  // upto's skipping the parity positions in skip, and commits each; or
  // Unavailable when one is not kept, or fewer than K positions serve.
  Status send_kept(const ChainPlace& place, const proto::ods::ChunkRef& ref, ChunkRecord& rec,
                   uint64_t upto, uint64_t skip, const std::string& what);

  // Keeps the delta of ref's update v (at `at`) for a resend.
  void keep_pending(const proto::ods::ChunkRef& ref, uint64_t v, uint64_t at, uint64_t truncate_seq,
                    std::span<const std::byte> delta);
  // Sends the held deltas older than kHoldTimeout (their commit is lost)
  // and the failed ones older than kResendAfter (the client that would
  // have sent them with its retry may have given up: without them the
  // parity stays behind the data for good, and no degraded read or
  // rebuild of another position of the group finds a consistent cut).
  void send_expired();
  // Once per EC chain where this server is a SERVING data position (from
  // its start): its chunks left dirty (an update whose delta was under way
  // when the server stopped, or it was taken back serving as it is) get a
  // marker, so the sweeper completes them without waiting for a write.
  void note_unsent();

  ChainedChunks& chained_;
  ChainView& view_;
  ChainForwarder& forwarder_;
  net::BufferPool& pool_;
  KeptDeltas kept_;
  std::mutex codecs_mu_;
  std::map<std::pair<uint32_t, uint32_t>, std::unique_ptr<ec::RsCodec>> codecs_;
  LaggingParity lagging_;            // uses codec()
  EcRebuild rebuild_;                // uses codec() and lagging_: stopped before codecs_ go
  EcStandIn stand_in_;               // uses codec(), lagging_ and send_deltas()
  std::set<uint32_t> noted_chains_;  // note_unsent()'s, on the sweeper thread
  std::jthread sweeper_;             // last: stopped and joined first
};

// WrongTarget unless ref names the position this member holds in place's
// EC chain; `what` names the request.
Status check_ec_position(const proto::ods::ChunkRef& ref, const ChainPlace& place, uint32_t own_id,
                         const std::string& what);

}  // namespace surge::ods
