// Scrubbing data servers from surgectl: walks one target's 65536 object
// fan-out directories in OdsScrub slices (4096 at a time) and gathers what
// the data server found: objects and bytes checked and every block whose
// stored CRC32C does not match its data (object id, offset). Read-only: it
// repairs nothing; a corrupt block stays an error for readers until the
// file is rewritten.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "net/proto/mds.pb.h"

namespace surge::tools {

struct BadBlock {
  uint64_t object_id = 0;  // = the file's inode number (chunks: 0)
  uint64_t offset = 0;     // of the 4 KiB block in the object or chunk
  // Chained chunks (object_id 0): which chunk.
  uint32_t chain_id = 0;
  uint64_t ino = 0;
  uint32_t slot = 0, position = 0;
};

struct TargetScrubResult {
  uint32_t target_id = 0;
  std::string address;
  std::string state;      // in the cluster map when the scrub began
  bool scrubbed = false;  // every slice answered
  std::string error;      // why not, when !scrubbed
  uint64_t objects_checked = 0;
  uint64_t bytes_checked = 0;
  std::vector<BadBlock> bad_blocks;
};

// Scrubs one target (any state: a target marked down may be back already).
// slice_timeout bounds each OdsScrub call.
TargetScrubResult scrub_target(const proto::mds::TargetInfo& target, const std::string& cluster_key,
                               std::chrono::milliseconds slice_timeout);

}  // namespace surge::tools
