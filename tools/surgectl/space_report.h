// SpaceReport: surgectl df's view of where the space is: the cluster's
// totals (the MDS's statfs, which counts each file system once) and the
// local file systems of the data servers, each with the targets on it
// (TargetInfo.filesystem_id; targets that report none stand alone), and
// what that raw space holds under each redundancy scheme in use.
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

// What the raw space holds of file bytes under one redundancy scheme:
// replicas N keep 1/N of it, EC K+M K/(K+M). A planning figure: the
// placement and the targets' own imbalance decide when a file finds no
// room first.
struct SchemeSpace {
  std::string scheme;  // "replicas 2", "ec 4+2"
  uint64_t usable_bytes = 0;
  uint64_t usable_free_bytes = 0;
};

// One entry per scheme the chain table has chains of (ascending: replicas
// by width, then EC by K, M), from the raw totals.
std::vector<SchemeSpace> usable_space(const proto::mds::ClusterMap& m, uint64_t raw_bytes,
                                      uint64_t raw_free_bytes);

}  // namespace surge::tools
