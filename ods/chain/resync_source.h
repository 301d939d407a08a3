// ResyncSource: this data server as the resync source of its chains
// (docs/redundancy.md, "Return and resync"): for every chain where it is
// the last SERVING member and its successor is SYNCING, it lists the
// successor's chunks of that chain (OdsListChunks, paged), sends every
// chunk whose version differs, that is incomplete there or missing there
// whole (OdsResyncChunk), removes the ones it no longer holds (it first
// measures what differs, so its reports carry bytes left), reports
// progress to the MDS about once a second (MdsReportChainSync) and finally
// done under the chain version it synced with, once a last listing shows
// no chunk incomplete there; the MDS then makes the member SERVING. Each chunk is compared and sent under its update order,
// so no forward of a newer version overtakes it. A chain that moves
// meanwhile (StaleChain anywhere) starts again under its new version;
// chunks already sent compare equal then and are skipped.
//
// One thread; it wakes when the map moves and once a second.
#pragma once

#include <cstdint>
#include <map>

#include "common/status.h"
#include "ods/chain/chain_forwarder.h"
#include "ods/chain/chain_view.h"
#include "ods/chain/poked_loop.h"
#include "ods/chain/update_order.h"
#include "ods/store/chunk_store.h"

namespace surge::ods {

class ResyncSource {
 public:
  ResyncSource(ChunkStore& chunks, ChainView& view, ChainForwarder& forwarder, UpdateOrder& order);
  ~ResyncSource();
  void start();
  void stop();
  // The map moved: look at the chains again now.
  void poke();

  // What one resync did (for its log line and the MDS report).
  struct Progress {
    uint64_t chunks_total = 0;  // differing or extra chunks found
    uint64_t chunks_done = 0;
    uint64_t bytes_total = 0;
    uint64_t bytes_done = 0;
    uint64_t unchanged = 0;     // compared equal: not sent
  };

 private:
  // Brings the SYNCING successor of place up to date and reports done.
  Status resync(const ChainPlace& place);
  Status report(const ChainPlace& place, const Progress& p, bool done);
  // The syncing successor's chunks of place's chain (OdsListChunks, paged).
  Result<std::map<ChunkKey, proto::ods::ChunkState>> list_theirs(const ChainPlace& place);

  ChunkStore& chunks_;
  ChainView& view_;
  ChainForwarder& forwarder_;
  UpdateOrder& order_;
  // chain id -> the chain version a resync last finished under.
  std::map<uint32_t, uint64_t> finished_;
  PokedLoop loop_;  // last: stopped first
};

}  // namespace surge::ods
