// Reading another position of an EC group from its member, for a rebuild
// on this one (ods/ec/ec_rebuild.h): one window of one chunk per call, as
// OdsRead serves it to clients (a data position: its bytes and their
// version, dirty or not; a parity position: its bytes and the versions of
// the data they are the code of, or ChunkDirty while a delta is being
// applied). The bytes' CRC is checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "ods/chain/chain_forwarder.h"
#include "ods/chain/chain_view.h"
#include "ods/store/chunk_index.h"

namespace surge::ods {

struct PositionWindow {
  uint64_t length = 0;            // bytes read: short at the chunk's end, 0 past it or in a hole
  uint64_t version = 0;           // the chunk version served (0: never written)
  std::vector<uint64_t> applied;  // parity: per data position (empty: nothing applied)
  // A data chunk: the truncate generation it applied. Parity: per data
  // position, the generation it had applied at its applied version.
  uint64_t truncate_seq = 0;
  std::vector<uint64_t> applied_truncate;
  // The version of data position p as a parity copy names it (0 when none).
  uint64_t applied_of(uint32_t p) const { return p < applied.size() ? applied[p] : 0; }
  uint64_t applied_truncate_of(uint32_t p) const {
    return p < applied_truncate.size() ? applied_truncate[p] : 0;
  }
};

// The ref of chunk key of place's chain, under place's version, as a
// member of the chain names it to another (no target, no truncate
// generation).
proto::ods::ChunkRef ref_in_chain(const ChainPlace& place, const ChunkKey& key);

// Reads [off, off + dst.size()) of chunk {key.ino, key.slot, position}
// from the member of `position` in place's chain, under place's version.
// Errors name the position, its target and address.
// clean_only: a data position's chunk with an update under way answers
// ChunkDirty (ReadRequest.clean_only).
Result<PositionWindow> read_position(ChainForwarder& forwarder, const ChainPlace& place,
                                     uint32_t position, const ChunkKey& key, uint64_t off,
                                     std::span<std::byte> dst, bool clean_only = false);

}  // namespace surge::ods
