// EcStandIn: writes to an EC data position whose member is down
// (docs/redundancy.md, "EC degraded writes"). While data position p of a
// chain is neither SERVING nor SYNCING, its writes go to the chain's first
// SERVING parity position, the stand-in. Under its own parity chunk's
// update order the stand-in
//   1. rebuilds p's old bytes of the range from the other data positions
//      (clean copies only) and its own parity (and other parity positions
//      while another data position is down too), the copies read before
//      it takes the order and checked against its parity's applied
//      versions once it holds it (a parity position must wait on nobody:
//      the data positions' deltas need that order);
//   2. applies old ^ new to its own parity as p's next version, marked
//      dirty first, and only then checks that the chain has not moved
//      (the fence below);
//   3. sends the same delta to the other parity positions (as p's update,
//      flagged ec_stand_in: each applies it only while the chain is at the
//      same version), commits and answers.
// The new bytes then live in the parity alone; p's member, back, is
// SYNCING (a new chain version) and rebuilds each chunk from the parity at
// the version it names, stand-in writes included.
//
// Before its first write for p under a chain version, the stand-in has the
// MDS mark p's member stood_in (MdsNoteStandIn, durable): a member whose
// position took writes it does not hold is then never taken back "as it
// is" when fewer than K positions serve; it is rebuilt like any returning
// member.
//
// A truncate the MDS sent while p's member was away stopped there (the
// intent waits for p); a write naming it comes to the stand-in, which
// first cuts p's bytes past the truncate's size on p's behalf, as p
// itself would (EcChunks::cut): each window's delta is the bytes cut, sent
// as p's update under the truncate generation p had applied. The write
// after it records the new generation in the parity.
//
// The fence: p's rebuild reads every serving parity position under the
// new chain version, which makes each learn it before serving the read. A
// parity chunk read clean was read before any stand-in update that could
// still follow, and such an update, dirty first, checks the chain after
// and is refused; one read dirty is read again once the update ends. So
// no stand-in update lands after p's rebuild read the parity without it.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>

#include "net/buffer_pool.h"
#include "net/proto/ods.pb.h"
#include "net/rpc_server.h"
#include "ods/chain/chain_forwarder.h"
#include "ods/chain/chain_view.h"
#include "ods/chain/chained_chunks.h"
#include "ods/ec/lagging_parity.h"

namespace surge::ods {

class EcStandIn {
 public:
  using CodecOf = LaggingParity::CodecOf;
  // Sends a delta of data position as_source.ec_position's chunk (ref) to
  // the parity positions of the write chain not in skip, and waits.
  using SendDeltas =
      std::function<Status(const ChainPlace& as_source, const proto::ods::ChunkRef& ref,
                           uint64_t at, std::span<const std::byte> delta, uint64_t v,
                           uint64_t truncate_seq, bool sync, uint64_t skip)>;
  EcStandIn(ChainedChunks& chained, ChainView& view, ChainForwarder& forwarder,
            net::BufferPool& pool, CodecOf codec, LaggingParity& lagging, SendDeltas send);

  // The position that stands in for data positions that are down in
  // place's chain: its first SERVING parity position (none: nullopt).
  static std::optional<uint32_t> stand_in_of(const ChainPlace& place);
  // Data position p's member neither serves nor is being rebuilt.
  static bool position_down(const ChainPlace& place, uint32_t p);

  // WriteRequest.ec_stand_in at this member (place: its own position).
  // buf: one pool buffer.
  Status write(net::RpcContext& ctx, const proto::ods::WriteRequest& req, const ChainPlace& place,
               net::PoolBuffer buf, proto::ods::WriteReply& resp);

 private:
  // MdsNoteStandIn for p under place's chain version, once.
  Status noted(const ChainPlace& place, uint32_t p, const std::string& what);
  // Brings the parity positions to one version of p (roll forward).
  Status complete_lagging(const ChainPlace& place, const ChainPlace& as_p, const ChunkKey& key_p,
                          const ec::RsCodec& rs, const std::string& what);
  // p's bytes past ref.truncate_size() cut, when ref names a truncate
  // generation p has not applied (see above).
  Status cut(const ChainPlace& place, const proto::ods::ChunkRef& ref, const std::string& what);
  // One window's part [at, at + bytes.size()) of p's chunk; bytes hold the
  // new bytes (in a pool buffer) and are turned into the delta. cutting:
  // bytes are zeros, cutting for ref's truncate generation (nothing done
  // once p is known to have applied it); otherwise a write, after cut().
  Result<uint64_t> write_unit(const ChainPlace& place, const proto::ods::ChunkRef& ref, uint64_t at,
                              std::span<std::byte> bytes, bool cutting, const std::string& what);

  ChainedChunks& chained_;
  ChainView& view_;
  ChainForwarder& forwarder_;
  net::BufferPool& pool_;
  CodecOf codec_;
  LaggingParity& lagging_;
  SendDeltas send_;
  std::mutex mu_;
  std::set<std::tuple<uint32_t, uint64_t, uint32_t>> noted_;  // chain, version, position
};

}  // namespace surge::ods
