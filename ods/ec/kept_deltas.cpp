// KeptDeltas: see kept_deltas.h.
#include "ods/ec/kept_deltas.h"

namespace surge::ods {

void KeptDeltas::count(const KeptDelta& d, int sign) {
  if (d.held) {
    held_bytes_ = sign > 0 ? held_bytes_ + d.length : held_bytes_ - d.length;
  } else if (d.delta) {
    failed_ = sign > 0 ? failed_ + 1 : failed_ - 1;
  }
}

bool KeptDeltas::put(const ChunkKey& key, KeptDelta d) {
  std::lock_guard lk(mu_);
  auto& versions = by_key_[key];
  auto it = versions.find(d.version);
  const bool replaces_failed = it != versions.end() && !it->second.held && it->second.delta;
  if (!d.held && !replaces_failed && failed_ >= max_failed_) {
    // Too many kept: only that the update was not sent everywhere is
    // kept, so the sweeper has its delta rebuilt from the group.
    d.delta.reset();
    d.length = 0;
    if (it == versions.end()) versions.emplace(d.version, std::move(d));
    return false;
  }
  if (it != versions.end()) {
    count(it->second, -1);
    versions.erase(it);
  }
  count(d, +1);
  const uint64_t v = d.version;
  versions.emplace(v, std::move(d));
  return true;
}

bool KeptDeltas::mark_if_none(const ChunkKey& key, KeptDelta d) {
  std::lock_guard lk(mu_);
  auto& versions = by_key_[key];
  if (!versions.empty()) return false;
  d.delta.reset();
  d.length = 0;
  d.held = false;
  const uint64_t v = d.version;
  versions.emplace(v, std::move(d));  // a marker: not counted
  return true;
}

KeptDelta KeptDeltas::take(const ChunkKey& key, uint64_t v) {
  std::lock_guard lk(mu_);
  KeptDelta out;
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return out;
  auto& versions = it->second;
  auto end = versions.upper_bound(v);
  for (auto q = versions.begin(); q != end; ++q) {
    count(q->second, -1);
    if (q->first == v) out = std::move(q->second);
  }
  versions.erase(versions.begin(), end);
  if (versions.empty()) by_key_.erase(it);
  return out;
}

void KeptDeltas::erase(const ChunkKey& key) {
  std::lock_guard lk(mu_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return;
  for (const auto& [v, d] : it->second) count(d, -1);
  by_key_.erase(it);
}

bool KeptDeltas::all_held(const ChunkKey& key, uint64_t first, uint64_t last) {
  std::lock_guard lk(mu_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return false;
  for (uint64_t v = first; v <= last; ++v) {
    auto q = it->second.find(v);
    if (q == it->second.end() || !q->second.held) return false;
  }
  return true;
}

uint64_t KeptDeltas::held_bytes() {
  std::lock_guard lk(mu_);
  return held_bytes_;
}

std::vector<std::pair<ChunkKey, proto::ods::ChunkRef>> KeptDeltas::due(
    std::chrono::steady_clock::time_point now, std::chrono::steady_clock::duration held_timeout,
    std::chrono::steady_clock::duration failed_timeout) {
  std::lock_guard lk(mu_);
  std::vector<std::pair<ChunkKey, proto::ods::ChunkRef>> out;
  for (const auto& [key, versions] : by_key_) {
    for (const auto& [v, d] : versions) {
      if (now - d.since >= (d.held ? held_timeout : failed_timeout)) {
        out.emplace_back(key, d.ref);
        break;
      }
    }
  }
  return out;
}

}  // namespace surge::ods
