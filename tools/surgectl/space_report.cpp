// file_systems: see space_report.h.
#include "tools/surgectl/space_report.h"

#include <map>
#include <tuple>

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

namespace {

// raw * num / den without overflowing for any raw below 2^64.
uint64_t scaled(uint64_t raw, uint64_t num, uint64_t den) {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(raw) * num / den);
}

}  // namespace

std::vector<SchemeSpace> usable_space(const proto::mds::ClusterMap& m, uint64_t raw_bytes,
                                      uint64_t raw_free_bytes) {
  namespace pb = ::surge::proto::mds;
  // (EC?, K or N, M) -> the scheme, sorted
  std::map<std::tuple<bool, uint32_t, uint32_t>, SchemeSpace> schemes;
  for (const auto& c : m.chains().chains()) {
    const bool ec = c.scheme() == pb::SCHEME_EC;
    const uint32_t a = ec ? c.ec_data() : c.replicas();
    const uint32_t b = ec ? c.ec_parity() : 0;
    if (a == 0 || (ec && b == 0)) continue;  // not a valid shape: nothing to say
    auto [it, fresh] = schemes.try_emplace({ec, a, b});
    if (!fresh) continue;
    // EC K+M keeps K of every K+M bytes; replicas N one of every N.
    const uint64_t num = ec ? a : 1, den = ec ? uint64_t{a} + b : a;
    it->second.scheme = ec ? "ec " + std::to_string(a) + "+" + std::to_string(b)
                           : "replicas " + std::to_string(a);
    it->second.usable_bytes = scaled(raw_bytes, num, den);
    it->second.usable_free_bytes = scaled(raw_free_bytes, num, den);
  }
  std::vector<SchemeSpace> out;
  for (auto& [key, s] : schemes) out.push_back(std::move(s));
  return out;
}

}  // namespace surge::tools
