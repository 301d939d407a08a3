// ChainForwarder: what a chain member sends its successor
// (docs/redundancy.md, "Writes"): one update (OdsChainForward, the bytes as
// bulk region 0 from this server's pool buffer: pulled by the successor
// with RDMA READ, streamed over TCP), a chunk whole (OdsResyncChunk) when
// the successor answers ChunkVersionGap, then the update again.
//
// A successor that cannot be reached (no address, connection refused or
// dropped, timeout) is reported to the MDS (MdsReportTargetFailure, which
// probes it); then StaleChain when the map moved (the MDS took it out: the
// sender retries on the new chain), Unavailable naming it when the MDS
// kept it. StaleChain from the successor (it holds a newer map) makes us
// fetch the map and answer StaleChain too. The caller holds the chunk's
// update order (UpdateOrder) throughout forward(), and while it calls
// send_forward().
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "net/buffer_pool.h"
#include "net/proto/ods.pb.h"
#include "net/rpc_channel.h"
#include "ods/chain/chain_view.h"
#include "ods/chain/forward_lanes.h"
#include "ods/store/chunk_store.h"

namespace surge::ods {

// One update of a chunk as it travels down the chain.
struct ChunkUpdate {
  proto::ods::UpdateKind kind = proto::ods::UPDATE_WRITE;
  uint64_t version = 0;             // 0: a sync only
  uint64_t offset = 0;              // WRITE
  std::span<const std::byte> data;  // WRITE: in a pool buffer
  uint32_t piece_bytes = 0;         // WRITE: piece CRCs of data (as WriteRequest)
  std::vector<uint32_t> piece_crcs;
  uint64_t size = 0;                // TRUNCATE
  uint64_t length = 0;              // FALLOCATE (with offset)
  proto::ods::FallocateMode fallocate_mode = proto::ods::FALLOCATE_RESERVE;
  bool keep_size = false;           // FALLOCATE
  bool sync = false;
  uint64_t truncate_seq = 0;  // the sender's truncate generation after it
  uint32_t source_position = 0;  // EC_DELTA: the data position it is from
  bool ec_stand_in = false;      // EC_DELTA: sent by that position's stand-in
};

struct ChainForwarderOptions {
  std::string cluster_key;
  // Whole-chunk sends and lists (resync), per piece.
  std::chrono::milliseconds call_timeout{10000};
  // One update forwarded to the successor, its reply included. Below the
  // clients' io attempt timeout: a stalled successor is reported by its
  // predecessor (and taken out by the MDS) before the client gives up on
  // the head, which only waits (OdsConfig::forward_timeout_ms).
  std::chrono::milliseconds forward_timeout{3000};
  std::chrono::milliseconds buffer_wait{30000};
  // The peer's lanes: a forward to hop h goes on a connection of lane
  // of_hop(h), whole-chunk sends and lists on one of of_resync().
  ForwardLanes lanes;
};

class ChainForwarder {
 public:
  ChainForwarder(ChunkStore& chunks, ChainView& view, net::BufferPool& pool,
                 ChainForwarderOptions options);

  // Sends u for key to place.successor under place.version; on
  // ChunkVersionGap sends the chunk whole (rec, as stored here) and u again.
  Status forward(const ChainPlace& place, const ChunkKey& key, const ChunkRecord& rec,
                 const ChunkUpdate& u);

  // forward() in two halves, for a head that lets the chunk's update order
  // go while the successor works (ChainedChunks::write_one_unit): send_forward puts
  // u on the lane connection (so a chunk's updates leave in the order they
  // were sent); finish_forward waits for the reply and judges it as
  // forward does, without the whole-chunk send on ChunkVersionGap (the
  // caller recovers under the update order). u's bytes must stay put
  // until finish_forward returned: the successor may pull them late.
  struct SentForward {
    net::PendingCall call;
    std::shared_ptr<net::RpcChannel> channel;
    size_t lane_channel = 0;
    uint32_t chain_id = 0;
    uint64_t chain_version = 0;
    uint32_t to = 0;  // the receiver's target id and address
    std::string address;
    ChunkKey key;  // as the receiver names it
  };
  Result<SentForward> send_forward(const ChainPlace& place, const ChunkKey& key,
                                   const ChunkUpdate& u);
  // send_forward to any member of place's chain: `to` at `address`, as
  // hop `hop` (its lane), for its chunk `key` (an EC position's delta goes
  // to each parity position, whose keys differ from the sender's).
  Result<SentForward> send_to(const ChainPlace& place, uint32_t to, const std::string& address,
                              uint32_t hop, const ChunkKey& key, const ChunkUpdate& u);
  Status finish_forward(SentForward& sent);

  // Brings key to `to` (at address) whole, as stored here under rec, in
  // OdsResyncChunk pieces; rec == nullopt: removes it there.
  Status send_whole(uint32_t chain_id, uint64_t chain_version, uint32_t to,
                    const std::string& address, const ChunkKey& key,
                    const std::optional<ChunkRecord>& rec);

  // A channel to a peer data server (reconnecting) for the requests it
  // serves in its resync lane (OdsListChunks, OdsResyncChunk).
  Result<std::shared_ptr<net::RpcChannel>> channel(const std::string& address);
  void drop(const std::string& address) { resync_channels().drop(address); }
  // Status seen reaching target `to` in chain_id: report it, judge again.
  Status unreachable(uint32_t to, uint32_t chain_id, uint64_t chain_version, const Status& seen);

 private:
  Status call_forward(const ChainPlace& place, const ChunkKey& key, const ChunkUpdate& u);
  net::ChannelPool& resync_channels() { return *channels_[options_.lanes.of_resync()]; }

  ChunkStore& chunks_;
  ChainView& view_;
  net::BufferPool& pool_;
  ChainForwarderOptions options_;
  // Connections by the lane that serves them at the peer
  // (ForwardLanes::channel_of_lane): a connection paused by a request
  // waiting for a thread of its lane holds up that lane only.
  std::vector<std::unique_ptr<net::ChannelPool>> channels_;
};

// Whether a call's status means the peer was not reached (report it).
bool peer_unreachable(const Status& st);

// Piece CRCs of data written at offset (as set_piece_crcs does).
std::vector<uint32_t> piece_crcs_of(std::span<const std::byte> data, uint64_t offset,
                                    uint32_t piece_bytes);

}  // namespace surge::ods
