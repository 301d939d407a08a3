// LaggingParity: completes an update of a data position that reached only
// some of its group's parity positions (docs/redundancy.md, "EC rebuild"):
// the lagging ones are sent the update's delta, the XOR of the data
// position's bytes at the version they applied and at the newer one, the
// older bytes rebuilt from K other positions at a cut naming them.
// * roll forward: a data position being rebuilt finds the parity naming
//   two versions of it (its write was under way when it was lost); both
//   versions are rebuilt from the group.
// * resend: a SERVING data position lost the kept delta of its last update
//   (more failed than are kept); the newer bytes are its own.
// The caller holds the chunk's update order.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <vector>

#include "common/ec/rs_codec.h"
#include "common/status.h"
#include "ods/chain/chain_forwarder.h"
#include "ods/chain/chain_view.h"
#include "ods/chain/chained_chunks.h"

namespace surge::ods {

class LaggingParity {
 public:
  using CodecOf = std::function<Result<const ec::RsCodec*>(const ChainPlace&)>;
  // Sends a delta of this member's data chunk key (bytes at `at`, the
  // chunk's version v, its truncate generation) to the parity positions
  // of place's write chain not in skip (a mask of positions), and waits.
  using SendDelta = std::function<Status(const ChainPlace& place, const ChunkKey& key, uint64_t at,
                                         std::span<const std::byte> delta, uint64_t v,
                                         uint64_t truncate_seq, uint64_t skip)>;
  LaggingParity(ChainedChunks& chained, ChainView& view, ChainForwarder& forwarder, CodecOf codec,
                SendDelta send_delta);

  // names (two versions of this member's data position p, with the parity
  // positions naming each, read from sources): sends the positions naming
  // the older one the delta to the newer, both rebuilt from sources.
  Status roll_forward(const ChainPlace& place, const ChunkKey& key,
                      const std::vector<uint32_t>& sources,
                      const std::map<uint64_t, ec::ChunkSet>& names);
  // At a SERVING data position: key's last update (rec, its version v,
  // not known applied at every parity position) has no kept delta any
  // more. Sends the parity positions that applied the one before it the
  // delta, the XOR of the bytes held here and of the chunk at that version
  // rebuilt from K others; OK when every parity position has v then.
  Status resend_lost(const ChainPlace& place, const ChunkKey& key, const ChunkRecord& rec);

 private:
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

  ChainedChunks& chained_;
  ChainView& view_;
  ChainForwarder& forwarder_;
  CodecOf codec_;
  SendDelta send_delta_;
};

}  // namespace surge::ods
