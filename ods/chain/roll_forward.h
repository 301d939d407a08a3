// RollForward: after a chain change, this data server as the head of a
// chain brings every chunk it holds dirty (an update stored here, and
// maybe further down, whose commit never came back: the successor died
// under it) to every member and commits it (docs/redundancy.md, "Gaps and
// roll-forward"). Without it such a chunk stayed dirty until its next
// update, and reads at every member but the last SERVING one answered
// ChunkDirty meanwhile.
//
// Dirtiness is a prefix of the chain (a member commits only after its
// successor did), so the head holds every dirty chunk of its chain; it
// rolls each forward with a new version that changes no byte (a truncate
// to the chunk's own size, ChainedChunks::roll_forward), which travels
// the chain as any update: a member that missed the pending update gets
// the chunk whole (ChunkVersionGap), every member commits. Incomplete
// chunks (a resync into us was cut) are left to the resync.
//
// One thread; a pass over the chains this server heads whenever the map
// moves (and at start), again a second later while a pass left a chain
// not done (its successor unreachable, the chain moved meanwhile).
#pragma once

#include <cstdint>
#include <map>

#include "common/status.h"
#include "ods/chain/chain_view.h"
#include "ods/chain/chained_chunks.h"
#include "ods/chain/poked_loop.h"
#include "ods/store/chunk_store.h"

namespace surge::ods {

class RollForward {
 public:
  RollForward(ChunkStore& chunks, ChainView& view, ChainedChunks& chained);
  ~RollForward();
  void start();
  void stop();
  // The map moved: look at the chains again now.
  void poke();

 private:
  // Rolls forward every dirty chunk of the chain place heads; the number
  // rolled in *rolled.
  Status pass(const ChainPlace& place, uint64_t* rolled);

  ChunkStore& chunks_;
  ChainView& view_;
  ChainedChunks& chained_;
  // chain id -> the chain version its last complete pass ran under.
  std::map<uint32_t, uint64_t> done_;
  PokedLoop loop_;  // last: stopped first
};

}  // namespace surge::ods
