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
//   is completed (roll forward) by sending the lagging ones its delta,
//   rebuilt as the XOR of p's bytes at both versions.
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
#include <optional>
#include <set>
#include <span>
#include <vector>

#include "common/ec/rs_codec.h"
#include "common/status.h"
#include "ods/chain/chain_forwarder.h"
#include "ods/chain/chain_view.h"
#include "ods/chain/chained_chunks.h"
#include "ods/chain/poked_loop.h"

namespace surge::ods {

class EcRebuild {
 public:
  using CodecOf = std::function<Result<const ec::RsCodec*>(const ChainPlace&)>;
  // Sends a delta of this member's data chunk key (bytes at `at`, the
  // chunk's version v, its truncate generation) to the parity positions
  // of place's write chain not in skip (a mask of positions), and waits.
  using SendDelta = std::function<Status(const ChainPlace& place, const ChunkKey& key, uint64_t at,
                                         std::span<const std::byte> delta, uint64_t v,
                                         uint64_t truncate_seq, uint64_t skip)>;
  // codec: the codec of a chain's K+M; rebuilt: called (under the chunk's
  // update order) for each chunk rebuilt, so deltas kept for its old
  // bytes go; send_delta: how a lost update's delta is sent (roll forward).
  EcRebuild(ChainedChunks& chained, ChainView& view, ChainForwarder& forwarder, CodecOf codec,
            std::function<void(const ChunkKey&)> rebuilt, SendDelta send_delta);
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
  // At a SERVING data position: key's last update (rec, its version
  // v, not known applied at every parity position) has no kept delta any
  // more. Sends the parity positions that applied the one before it the
  // delta, the XOR of the bytes held here and of the chunk at that version
  // rebuilt from K others; OK when every parity position has v then. The
  // caller holds key's update order.
  Status resend_lost(const ChainPlace& place, const ChunkKey& key, const ChunkRecord& rec);
  // Leaves key (not rebuilt, or missing a delta) to the pass: false when
  // the pass is closing and the caller must rebuild it now. The caller
  // holds key's update order.
  bool defer(const ChainPlace& place, const ChunkKey& key);

  // Windows a chunk is read and rebuilt in.
  static constexpr uint64_t kWindow = 1 << 20;

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
  // One window per position.
  using Buffers = std::vector<std::vector<std::byte>>;
  // One window of this member's position p rebuilt from K others.
  struct Cut {
    uint64_t length = 0;  // bytes of p's window (0: past the end of every copy used)
    // A data p: its version and truncate generation as the parity copies
    // used name them, and every version of p the parity copies read named,
    // with who named it.
    uint64_t version = 0;
    uint64_t truncated = 0;
    std::map<uint64_t, ec::ChunkSet> names;
    // Per data position (p's own: 0), the version and truncate generation
    // of the cut: as read, or as the parity copies used name them.
    std::vector<uint64_t> versions;
    std::vector<uint64_t> truncates;
  };

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
  // Window `off` of this member's position p, into bufs[p], from the
  // positions in sources at a consistent cut: the data copies read, then
  // parity copies naming the data copies' versions (and, for a data p, p
  // at of_p; nullopt: the newest version any names). Waits for a cut while
  // copies are dirty or mid-write.
  Result<Cut> cut_window(const ChainPlace& place, const ChunkKey& key, const ec::RsCodec& rs,
                         const std::vector<uint32_t>& sources, uint64_t off,
                         std::optional<uint64_t> of_p, Buffers& bufs);
  // p's bytes at the newer of two versions, one window (valid until the
  // next call), with p's truncate generation at that version.
  struct NewerBytes {
    std::span<const std::byte> bytes;
    uint64_t truncated = 0;
  };
  using NewerWindow = std::function<Result<NewerBytes>(uint64_t off)>;
  // Sends the parity positions not in skip the delta taking p from
  // `older` (its bytes rebuilt from sources at a cut naming older) to
  // `newer` (newer_window's bytes), as p's update at newer.
  Status send_difference(const ChainPlace& place, const ChunkKey& key, const ec::RsCodec& rs,
                         const std::vector<uint32_t>& sources, uint64_t older, uint64_t newer,
                         uint64_t skip, const NewerWindow& newer_window);
  // The mask of parity positions to skip when only `lagging` need a delta.
  static uint64_t skip_all_but(const ChainPlace& place, const ec::ChunkSet& lagging);
  // names (two versions of p, as parity positions name them): sends the
  // positions naming the older one the delta to the newer.
  Status roll_forward(const ChainPlace& place, const ChunkKey& key, const ec::RsCodec& rs,
                      const std::vector<uint32_t>& sources,
                      const std::map<uint64_t, ec::ChunkSet>& names);

  ChainedChunks& chained_;
  ChainView& view_;
  ChainForwarder& forwarder_;
  CodecOf codec_;
  std::function<void(const ChunkKey&)> on_rebuilt_;
  SendDelta send_delta_;
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
