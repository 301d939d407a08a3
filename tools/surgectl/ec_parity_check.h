// Checking EC parity from surgectl scrub (issue 16; docs/redundancy.md,
// "Erasure coding"): for one EC chain whose members all serve, lists the
// chunks each position holds (OdsListChunks), and for every stripe group
// of every (ino, slot) reads all K+M positions' bytes (OdsRead naming each
// member, 1 MiB windows), encodes the K data windows and compares the
// result with each parity window byte for byte; each parity window must
// also name as applied exactly the versions the data positions answered
// with. Read-only, meant for a quiet cluster: a window that differs is read
// again once before it is reported (a write may have landed between two
// reads). Data blocks that fail their own CRCs are the target scrub's to
// report (the read fails here too, and the chain is reported corrupt).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "net/proto/mds.pb.h"

namespace surge::tools {

struct EcParityMismatch {
  uint64_t ino = 0;
  uint32_t slot = 0;
  uint32_t parity = 0;        // j: position K + j
  uint64_t chunk_offset = 0;  // where the window starts in the chunks
  // "bytes": parity j differs from the code of the data at
  // first_differing_byte (a chunk offset); "versions": it names as applied
  // version `applied` of data position `data_position`, which holds
  // `data_version`; "dirty": it answered ChunkDirty twice (a delta whose
  // apply never ended).
  std::string what;
  uint64_t first_differing_byte = 0;
  uint32_t data_position = 0;
  uint64_t applied = 0;
  uint64_t data_version = 0;
};

struct EcChainCheckResult {
  uint32_t chain_id = 0;
  uint64_t chain_version = 0;
  uint32_t k = 0, m = 0;
  bool checked = false;         // every position listed and read
  std::string error;            // why not, when !checked
  uint64_t groups_checked = 0;  // (ino, slot) chunk sets
  uint64_t bytes_checked = 0;   // read from every position together
  std::vector<EcParityMismatch> mismatches;
};

// Checks the parity of every chunk set of EC chain (addresses from map).
// Not checked (error says why) when a position's member does not serve.
EcChainCheckResult check_ec_chain(const proto::mds::Chain& chain, const proto::mds::ClusterMap& map,
                                  const std::string& cluster_key,
                                  std::chrono::milliseconds call_timeout);

// surgectl scrub's lines for one EC chain (each ends in a newline).
std::string ec_chain_text(const EcChainCheckResult& r);

}  // namespace surge::tools
