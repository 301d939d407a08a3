// file_systems: see space_report.h.
#include "tools/surgectl/space_report.h"

#include <map>

namespace surge::tools {

std::vector<FileSystemSpace> file_systems(const proto::mds::ClusterMap& m) {
  std::map<uint32_t, const proto::mds::TargetInfo*> by_id;  // the map's order is not promised
  for (const auto& t : m.targets()) by_id[t.target_id()] = &t;
  std::vector<FileSystemSpace> out;
  std::map<std::string, size_t> index;
  for (const auto& [id, t] : by_id) {
    size_t i = out.size();
    auto it = t->filesystem_id().empty() ? index.end() : index.find(t->filesystem_id());
    if (it == index.end()) {
      out.push_back(FileSystemSpace{t->filesystem_id(), {}, 0, 0, false});
      if (!t->filesystem_id().empty()) index[t->filesystem_id()] = i;
    } else {
      i = it->second;
    }
    FileSystemSpace& fs = out[i];
    fs.targets.push_back(id);
    if (t->state() != proto::mds::TARGET_DOWN && !fs.up) {
      fs.up = true;
      fs.capacity_bytes = t->capacity_bytes();
      fs.free_bytes = t->free_bytes();
    } else if (!fs.up && fs.targets.size() == 1) {
      fs.capacity_bytes = t->capacity_bytes();  // last known, for a file system all down
      fs.free_bytes = t->free_bytes();
    }
  }
  return out;
}

}  // namespace surge::tools
