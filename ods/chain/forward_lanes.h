// ForwardLanes: which worker lane (net::ServerOptions::lane_threads) serves
// each request between chain members, so that waits along chains can never
// form a cycle (docs/redundancy.md, "Why forwarding cannot deadlock").
//
// A member waits only on its successor. Client requests (lane 0, the main
// pool) wait on the update forwarded to hop 1 (the head's successor); an
// update forwarded to hop h (OdsChainForward.hop) runs in lane h and waits
// only on hop h + 1. Every lane has threads and connections (ChainForwarder
// keeps one per lane and peer) of its own, so a hop-h request never waits
// for a thread or a paused connection of a lower hop: the waits follow
// hops upward and end at the tail, which waits on nobody. Whole-chunk
// sends and chunk lists (resync, the sender after a ChunkVersionGap) wait
// on nobody and run in the last lane. Hops past the last lane share it:
// chains of up to lanes + 1 members cannot deadlock, longer ones can only
// wait out the forward's call timeout (then Unavailable, and a retry).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace surge::ods {

struct ForwardLanes {
  uint32_t lanes = 2;    // forward lanes (lanes 1..lanes); 0: none, all in lane 0
  uint32_t threads = 4;  // threads of each

  // The lane of an update forwarded to hop `hop` (1: the head's successor).
  size_t of_hop(uint32_t hop) const {
    return lanes == 0 ? 0 : std::clamp<uint32_t>(hop, 1, lanes);
  }
  // The lane of OdsResyncChunk and OdsListChunks.
  size_t of_resync() const { return lanes; }
  // The channel a sender uses for a request served in lane `lane` of its
  // peer (one per lane, so a paused connection holds up one lane only).
  size_t channel_of_lane(size_t lane) const { return lane; }

  // 1 MiB pool buffers the lanes need on top of the client's
  // (pool.buffers_1m): one per lane thread for the update it receives, and
  // one per thread that forwards (the main pool's workers and the lanes')
  // for a whole-chunk send after a gap, plus one for the resync source.
  size_t extra_buffers(int worker_threads) const {
    const size_t lane_threads = size_t{lanes} * threads;
    return lanes == 0 ? 0 : lane_threads + (static_cast<size_t>(worker_threads) + lane_threads) + 1;
  }
};

}  // namespace surge::ods
