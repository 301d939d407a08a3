// KeptDeltas: the parity deltas a data position has not yet got to every
// parity position, per chunk and version (EcChunks' memory of them):
// failed ones, kept for the chunk's next write (or the sweeper) to send
// again, and held ones, waiting for a full-group write's OdsEcCommit. Counts what it holds
// as it changes, so the limits are checked without walking it on every
// write. Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "net/proto/ods.pb.h"
#include "ods/store/chunk_index.h"

namespace surge::ods {

struct KeptDelta {
  uint64_t version = 0;
  uint64_t at = 0;
  uint64_t truncate_seq = 0;
  std::unique_ptr<std::byte[]> delta;  // null: none kept (a marker of a failed one)
  uint64_t length = 0;
  bool held = false;
  std::chrono::steady_clock::time_point since;
  proto::ods::ChunkRef ref;  // for the sweeper
};

class KeptDeltas {
 public:
  // max_failed: failed deltas kept at most (held ones are limited by the
  // caller, through held_bytes).
  explicit KeptDeltas(size_t max_failed) : max_failed_(max_failed) {}

  // Keeps d as key's update d.version (replacing one of that version);
  // false when d failed and max_failed are kept already: then only a
  // marker without the delta is kept (take() returns it without one, and
  // due() lists it for the sweeper, which has the delta rebuilt).
  bool put(const ChunkKey& key, KeptDelta d);
  // Keeps d (without its delta) only when nothing is kept for key: a
  // chunk found dirty by a scan, whose update may as well be on its way
  // or held for a commit. Whether it was kept.
  bool mark_if_none(const ChunkKey& key, KeptDelta d);
  // Takes key's update v, or a KeptDelta without delta when none is kept;
  // drops any older one of key (sent already).
  KeptDelta take(const ChunkKey& key, uint64_t v);
  // Drops every update of key.
  void erase(const ChunkKey& key);

  // Whether key's updates first .. last are all kept and all held.
  bool all_held(const ChunkKey& key, uint64_t first, uint64_t last);
  uint64_t held_bytes();
  // The chunks with an update held since before now - held_timeout, or
  // failed since before now - failed_timeout, with the ref it was kept
  // under: the sweeper's to send.
  std::vector<std::pair<ChunkKey, proto::ods::ChunkRef>> due(
      std::chrono::steady_clock::time_point now, std::chrono::steady_clock::duration held_timeout,
      std::chrono::steady_clock::duration failed_timeout);

 private:
  void count(const KeptDelta& d, int sign);

  const size_t max_failed_;
  std::mutex mu_;
  std::map<ChunkKey, std::map<uint64_t, KeptDelta>> by_key_;  // by version
  size_t failed_ = 0;
  uint64_t held_bytes_ = 0;
};

}  // namespace surge::ods
