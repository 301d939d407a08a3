#include "client/lib/cluster_map_cache.h"

#include "common/log.h"

namespace surge::client {

ClusterMapCache::ClusterMapCache(Fetch fetch, std::string default_scheme)
    : fetch_(std::move(fetch)), scheme_(std::move(default_scheme)) {}

Status ClusterMapCache::refresh() {
  auto m = fetch_();
  if (!m.ok()) return m.status().WithContext("fetching the cluster map");
  std::lock_guard lk(mu_);
  if (m->version() != map_.version()) {
    SLOG_DEBUG("client: cluster map version {} -> {} ({} targets)", map_.version(), m->version(),
               m->targets_size());
  }
  map_ = std::move(*m);
  targets_.clear();
  for (const auto& t : map_.targets()) targets_[t.target_id()] = t;
  chains_.clear();
  for (const auto& c : map_.chains().chains()) chains_[c.chain_id()] = c;
  stale_ = false;
  return Status::OK();
}

void ClusterMapCache::note_version(uint64_t version) {
  {
    std::lock_guard lk(mu_);
    if (version == map_.version() && !stale_) return;
  }
  Status st = refresh();
  if (!st.ok()) SLOG_WARN("client: {}", st.ToString());
}

void ClusterMapCache::mark_stale() {
  std::lock_guard lk(mu_);
  stale_ = true;
}

Result<std::string> ClusterMapCache::address_of(uint32_t target_id) {
  bool stale;
  {
    std::lock_guard lk(mu_);
    stale = stale_ || targets_.count(target_id) == 0;
  }
  if (stale) {
    Status st = refresh();
    if (!st.ok()) return Status::IOError(st.ToString());
  }
  std::lock_guard lk(mu_);
  auto it = targets_.find(target_id);
  if (it == targets_.end()) {
    return Status::IOError("data server target " + std::to_string(target_id) +
                           " is not in the cluster map (version " +
                           std::to_string(map_.version()) + ")");
  }
  // A target marked down is still tried: it may be back before the MDS
  // noticed, and a dead one fails fast on connect anyway.
  std::string addr = it->second.address();
  if (addr.find("://") == std::string::npos) addr = scheme_ + "://" + addr;
  return addr;
}

Result<proto::mds::Chain> ClusterMapCache::chain(uint32_t chain_id) {
  bool stale;
  {
    std::lock_guard lk(mu_);
    stale = stale_ || chains_.count(chain_id) == 0;
  }
  if (stale) {
    Status st = refresh();
    if (!st.ok()) return Status::IOError(st.ToString());
  }
  std::lock_guard lk(mu_);
  auto it = chains_.find(chain_id);
  if (it == chains_.end()) {
    return Status::IOError("chain " + std::to_string(chain_id) +
                           " is not in the cluster map (version " +
                           std::to_string(map_.version()) + ")");
  }
  return it->second;
}

uint64_t ClusterMapCache::version() const {
  std::lock_guard lk(mu_);
  return map_.version();
}

proto::mds::ClusterMap ClusterMapCache::snapshot() const {
  std::lock_guard lk(mu_);
  return map_;
}

}  // namespace surge::client
