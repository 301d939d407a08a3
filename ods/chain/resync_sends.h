// ResyncSends: which whole-chunk send (OdsResyncChunk) a member accepts
// pieces of, per chunk (docs/redundancy.md, "Return and resync").
//
// Every piece of one send carries the same send id, and a later send from
// the same source a greater one. A piece of a send that was cut short (its
// call timed out at the source, which then sent the chunk again under the
// same chain version) may still arrive after the later send ended; applied,
// its first piece would empty the finished copy and mark it incomplete on a
// member about to serve. So a member takes, per chunk and chain version,
// only pieces of the newest send it has seen begin: an older send's piece,
// or a later piece of a send whose first piece it never took, is refused.
// Pieces under an older chain version never get here (still_current).
//
// In memory: a restarted member has no late pieces to fear (they came on
// connections that died with it), and a member starts every resync over on
// return. Entries of a chain version that has moved on are dropped once the
// ledger grows past a bound (then past twice what it kept). Thread-safe; callers hold the chunk's update
// order, so pieces of one chunk are judged one at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "common/status.h"
#include "ods/store/chunk_index.h"

namespace surge::ods {

class ResyncSends {
 public:
  // current_version(chain): the version of chain this member holds now, 0
  // when it holds none; used only to drop entries that can no longer match.
  explicit ResyncSends(std::function<uint64_t(uint32_t chain_id)> current_version,
                       size_t prune_above = 65536);

  // OK when a piece of send `send_id` of key under (chain_id,
  // chain_version) is to be applied; `begin` marks a send's first piece.
  // Send id 0 (a sender from before send ids) is always admitted.
  Status admit(const ChunkKey& key, uint32_t chain_id, uint64_t chain_version, uint64_t send_id,
               bool begin, const std::string& what);

  size_t size() const;

 private:
  struct Entry {
    uint32_t chain_id = 0;
    uint64_t chain_version = 0;
    uint64_t send_id = 0;
  };
  void prune_locked();

  std::function<uint64_t(uint32_t)> current_version_;
  const size_t prune_above_;
  mutable std::mutex mu_;
  size_t next_prune_;  // prune when the ledger reaches this size
  std::map<ChunkKey, Entry> sends_;
};

// A new send id, greater than every one this process handed out before and
// (from the wall clock) than those of an earlier run of it.
uint64_t next_resync_send_id();

}  // namespace surge::ods
