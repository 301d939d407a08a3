// EcRebuild: a member SYNCING in an EC chain rebuilds its own position
// from the others (docs/redundancy.md, "EC rebuild"). The MDS makes a
// returning member, or a newcomer in a lost member's place, SYNCING at its
// position; nothing it holds is trusted until rebuilt in this sync (under
// the chain version it was made SYNCING at: a version that moves starts
// the sync again).
//
// * A parity position is the code of the K data positions: each chunk is
//   rebuilt by reading the K data chunks (their bytes as they are, dirty
//   or not, with their versions), under the parity chunk's update order,
//   and encoding; the versions read become its applied ones. Data
//   positions send their deltas to a SYNCING parity position too: one for
//   a chunk rebuilt already is applied as at any parity position (a delta
//   the rebuild's read already held is acknowledged as applied); one for a
//   chunk not rebuilt yet, or one that finds a gap, is acknowledged
//   without being applied and the chunk left to the pass (defer), which
//   rebuilds it from data that holds the update. Not on the delta's own
//   thread: a parity position's lane must wait on nobody, or the data
//   positions forwarding to it and its reads of them wait on each other
//   (a stress run hung a SYNCING member so). Only once the pass is
//   closing (its last look at deferred chunks made, its report on the
//   way) does a delta's thread rebuild the chunk itself.
// * A data position is rebuilt from K other positions at a consistent cut
//   (every parity copy used names as applied the versions of the data
//   copies used), window by window: it takes no writes while SYNCING, so
//   its bytes, at the version every parity position names for it, do not
//   change during the rebuild. Parity positions that disagree on that
//   version (a write of it was under way when it was lost, its delta
//   applied at some of them only) are brought together first: the update
//   is completed (roll forward, LaggingParity) by sending the lagging ones
//   its delta, rebuilt as the XOR of p's bytes at both versions. Cuts are
//   read as group_cut.h says.
// * The pass: list the chunks every SERVING member of the chain holds,
//   rebuild each one not rebuilt yet, drop the local chunks nobody else
//   holds (their file went while this member was away), list again for
//   the chunks made while the pass ran, and report done
//   (MdsReportChainSync, with progress about once a second); the MDS then
//   makes the member SERVING.
//
// One thread for the passes; rebuilds for deltas run on the caller's.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include "common/status.h"
#include "ods/chain/chain_forwarder.h"
#include "ods/chain/chain_view.h"
#include "ods/chain/chained_chunks.h"
#include "ods/chain/poked_loop.h"
#include "ods/ec/lagging_parity.h"

namespace surge::ods {

class EcRebuild {
 public:
  using CodecOf = LaggingParity::CodecOf;
  // codec: the codec of a chain's K+M; rebuilt: called (under the chunk's
  // update order) for each chunk rebuilt, so deltas kept for its old
  // bytes go; lagging: completes an update the parity got in part (roll
  // forward).
  EcRebuild(ChainedChunks& chained, ChainView& view, ChainForwarder& forwarder, CodecOf codec,
            std::function<void(const ChunkKey&)> rebuilt, LaggingParity& lagging);
  ~EcRebuild();
  void start();
  void stop();
  // The map moved: look at the chains again now.
  void poke();

  // Whether key (this member's position) was rebuilt in the current sync
  // of place's chain, where this member is SYNCING.
  bool rebuilt(const ChainPlace& place, const ChunkKey& key);
  // Rebuilds key here from the other positions and marks it rebuilt.
  // The caller holds key's update order.
  Status rebuild(const ChainPlace& place, const ChunkKey& key);
  // Leaves key (not rebuilt, or missing a delta) to the pass: false when
  // the pass is closing and the caller must rebuild it now. The caller
  // holds key's update order.
  bool defer(const ChainPlace& place, const ChunkKey& key);

 private:
  struct Sync {
    uint64_t version = 0;  // the chain version the sync runs under
    std::set<ChunkKey> rebuilt;
    std::set<ChunkKey> deferred;  // left to the pass by deltas
    bool closing = false;         // the pass reports done: deltas rebuild themselves
  };
  struct Progress {
    uint64_t chunks_total = 0;
    uint64_t chunks_done = 0;
    uint64_t bytes_done = 0;  // rebuilt
    uint64_t kept = 0;        // held here already, current
  };
  struct Rebuilt {
    uint64_t bytes = 0;  // written
    bool kept = false;   // the copy here was current: nothing written
  };

  // (ino, slot) of chunks of a chain.
  using Keys = std::set<std::pair<uint64_t, uint32_t>>;
  // Every chain where this member syncs: list, wait, pass.
  void round();
  // One pass over place's chain, keys as listed before; reports done
  // when it finishes.
  Status pass(const ChainPlace& place, const Keys& keys);
  // The chunks of place's chain that the SERVING members other than this
  // one list.
  Result<Keys> list_others(const ChainPlace& place);
  Status report(const ChainPlace& place, const Progress& p, bool done);
  void mark(const ChainPlace& place, const ChunkKey& key);
  // place's sync under its version (syncs_mu_ held).
  Sync& sync_of(const ChainPlace& place);
  // Rebuilds the chunks deltas deferred, until none is left, then marks
  // the sync closing.
  Status rebuild_deferred(const ChainPlace& place);

  // rebuild() and what it did.
  Result<Rebuilt> rebuild_one(const ChainPlace& place, const ChunkKey& key);
  Result<Rebuilt> rebuild_parity(const ChainPlace& place, const ChunkKey& key);
  // rolled: the parity positions were brought together once already.
  Result<Rebuilt> rebuild_data(const ChainPlace& place, const ChunkKey& key, bool rolled = false);

  ChainedChunks& chained_;
  ChainView& view_;
  ChainForwarder& forwarder_;
  CodecOf codec_;
  std::function<void(const ChunkKey&)> on_rebuilt_;
  LaggingParity& lagging_;
  std::mutex syncs_mu_;
  std::map<uint32_t, Sync> syncs_;  // by chain id
  // chain id -> the chain version a pass last finished under.
  std::map<uint32_t, uint64_t> finished_;
  // chain id -> when to try a failed pass again, and the wait after that.
  std::map<uint32_t,
           std::pair<std::chrono::steady_clock::time_point, std::chrono::steady_clock::duration>>
      retry_;
  PokedLoop loop_;  // last: stopped first
};

}  // namespace surge::ods
