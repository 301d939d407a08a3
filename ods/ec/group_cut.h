// A consistent cut of an EC group: one window of this member's position
// rebuilt from K other positions whose copies agree on what the group
// holds (docs/redundancy.md, "EC rebuild"). Every parity copy used names
// as applied the versions of the data copies used, and for a data
// position p the version of p asked for. EcRebuild rebuilds positions
// from cuts; LaggingParity (lagging_parity.h) rebuilds a data position's
// bytes at two versions to send the difference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "common/ec/rs_codec.h"
#include "common/status.h"
#include "ods/chain/chain_forwarder.h"
#include "ods/ec/position_reads.h"

namespace surge::ods {

// Windows a chunk is read and rebuilt in.
inline constexpr uint64_t kCutWindow = 1 << 20;

// One window per position of a group (kCutWindow bytes each).
using PositionBuffers = std::vector<std::vector<std::byte>>;

PositionBuffers position_buffers(const ChainPlace& place);

// One window of this member's position p rebuilt from K others.
struct GroupCut {
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

// Window `off` of this member's position p of key, into bufs[p], from the
// positions in sources: the data copies read, then parity copies naming
// the data copies' versions (and, for a data p, p at of_p; nullopt: the
// newest version any names). Waits for a cut while copies are dirty or
// mid-write; Unavailable when none comes, or when of_p is no longer named.
Result<GroupCut> read_cut(ChainForwarder& forwarder, const ChainPlace& place, const ChunkKey& key,
                          const ec::RsCodec& rs, const std::vector<uint32_t>& sources, uint64_t off,
                          std::optional<uint64_t> of_p, PositionBuffers& bufs);

// The first window of key at parity position `position`, for the data
// versions it names as applied (read again while a delta being applied
// there leaves it dirty).
Result<PositionWindow> probe_parity(ChainForwarder& forwarder, const ChainPlace& place,
                                    const ChunkKey& key, uint32_t position);

}  // namespace surge::ods
