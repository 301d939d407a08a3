// SpaceReport: surgectl df's view of where the space is: the cluster's
// totals (the MDS's statfs, which counts each file system once) and the
// local file systems of the data servers, each with the targets on it
// (TargetInfo.filesystem_id; targets that report none stand alone).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "net/proto/mds.pb.h"

namespace surge::tools {

struct FileSystemSpace {
  std::string filesystem_id;      // "" for a target that reports none
  std::vector<uint32_t> targets;  // ascending
  uint64_t capacity_bytes = 0;    // as the lowest up target on it reports
  uint64_t free_bytes = 0;
  bool up = false;                // some target on it is not down (counted in the totals)
};

// One entry per file system, in order of their lowest target id.
std::vector<FileSystemSpace> file_systems(const proto::mds::ClusterMap& m);

}  // namespace surge::tools
