// ClusterMap implementation; see cluster_map.h.
#include "mds/cluster/cluster_map.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "common/log.h"
#include "mds/namespace/keys.h"

namespace surge::mds {

using proto::mds::TargetInfo;

uint64_t ClusterMap::now_ms() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

Result<std::unique_ptr<ClusterMap>> ClusterMap::Load(KvStore* kv, uint64_t fs_id,
                                                     ClusterMapOptions options) {
  std::unique_ptr<ClusterMap> m(new ClusterMap(kv, fs_id, options));
  std::lock_guard lk(m->mu_);
  SURGE_RETURN_IF_ERROR(m->reload_locked());
  // A restart counts as a change: clients refetch.
  SURGE_RETURN_IF_ERROR(m->retry_stale_locked([&] {
    ++m->version_;
    return m->persist_locked(nullptr);
  }));
  return m;
}

std::string ClusterMap::stored_part(const TargetInfo& t) {
  TargetInfo p = t;
  p.clear_capacity_bytes();
  p.clear_free_bytes();
  p.clear_last_heartbeat_ms();
  p.clear_chain_memberships();
  p.clear_drained();
  return p.SerializeAsString();
}

Status ClusterMap::reload_locked() {
  // The version is read first and last: a change by another MDS between
  // the reads makes them differ, and the map is read again.
  for (int attempt = 1;; ++attempt) {
    SURGE_ASSIGN_OR_RETURN(auto ver, kv_->get(Space::kSystem, keys::kMapVersion));
    SURGE_ASSIGN_OR_RETURN(auto hwm, kv_->get(Space::kSystem, keys::kTargetHwm));
    std::map<uint32_t, TargetInfo> targets;
    std::map<uint32_t, std::string> stored;
    Status bad;
    const uint64_t now = now_ms();
    SURGE_RETURN_IF_ERROR(kv_->scan(
        Space::kSystem, keys::kTargetPrefix, keys::kTargetEnd,
        [&](std::string_view k, std::string_view v) {
          TargetInfo t;
          if (!t.ParseFromArray(v.data(), static_cast<int>(v.size())) || t.target_id() == 0) {
            bad = Status::Corruption("unreadable target record under key '" + std::string(k) + "'");
            return false;
          }
          stored[t.target_id()] = stored_part(t);
          auto heard = targets_.find(t.target_id());
          if (heard != targets_.end()) {
            t.set_capacity_bytes(heard->second.capacity_bytes());
            t.set_free_bytes(heard->second.free_bytes());
            t.set_last_heartbeat_ms(heard->second.last_heartbeat_ms());
          } else {
            // Alive as stored until the timeout says otherwise, so a
            // restarted MDS serves creates at once.
            t.set_last_heartbeat_ms(now);
          }
          targets[t.target_id()] = std::move(t);
          return true;
        }));
    SURGE_RETURN_IF_ERROR(bad);
    SURGE_RETURN_IF_ERROR_CTX(chains_.load(kv_), "loading the chain table");
    SURGE_ASSIGN_OR_RETURN(auto ver_after, kv_->get(Space::kSystem, keys::kMapVersion));
    if (ver_after != ver && attempt < 5) continue;
    stored_version_ = ver && ver->size() == 8 ? keys::get_be64(*ver) : 0;
    version_ = std::max<uint64_t>(1, stored_version_);
    next_id_ = hwm && hwm->size() == 4 ? keys::get_be32(*hwm) : 1;
    if (!targets.empty()) next_id_ = std::max(next_id_, targets.rbegin()->first + 1);
    targets_ = std::move(targets);
    stored_ = std::move(stored);
    return Status::OK();
  }
}

Status ClusterMap::refresh() {
  SURGE_ASSIGN_OR_RETURN(auto ver, kv_->get(Space::kSystem, keys::kMapVersion));
  const uint64_t v = ver && ver->size() == 8 ? keys::get_be64(*ver) : 0;
  std::lock_guard lk(mu_);
  if (v == stored_version_) return Status::OK();
  return reload_locked();
}

Status ClusterMap::persist_locked(const TargetInfo* t) {
  KvBatch b;
  std::optional<std::string> seen;
  if (stored_version_ != 0) {
    seen.emplace();
    keys::put_be64(*seen, stored_version_);
  }
  b.check(Space::kSystem, std::string(keys::kMapVersion), seen);
  std::string v;
  keys::put_be64(v, version_);
  b.put(Space::kSystem, std::string(keys::kMapVersion), v);
  std::string h;
  keys::put_be32(h, next_id_);
  b.put(Space::kSystem, std::string(keys::kTargetHwm), h);
  std::map<uint32_t, std::string> written;
  auto put_target = [&](const TargetInfo& x) {
    b.put(Space::kSystem, keys::target(x.target_id()), x.SerializeAsString());
    written[x.target_id()] = stored_part(x);
  };
  for (const auto& [id, x] : targets_) {
    if (t != nullptr && id == t->target_id()) continue;
    auto it = stored_.find(id);
    if (it == stored_.end() || it->second != stored_part(x)) put_target(x);
  }
  if (t != nullptr) put_target(*t);
  if (chains_.dirty()) chains_.persist(b);
  Status st = kv_->commit(b);
  if (st.ok()) {
    stored_version_ = version_;
    for (auto& [id, part] : written) stored_[id] = std::move(part);
    return st;
  }
  // Memory must not keep a change the store refused.
  if (Status rs = reload_locked(); !rs.ok()) {
    SLOG_WARN("reading the cluster map again after a change failed ({}): {}", st.ToString(),
              rs.ToString());
  }
  if (st.code() == Code::kBusy) {
    return Status::Busy("cluster map version " + std::to_string(stored_version_) +
                        " changed in the store (another MDS): " + st.message());
  }
  return st;
}

Result<proto::mds::RegisterTargetReply> ClusterMap::register_target(
    const proto::mds::RegisterTargetRequest& req) {
  if (req.address().empty()) {
    return Status::InvalidArgument("RegisterTarget: empty address for target " +
                                   std::to_string(req.target_id()));
  }
  std::lock_guard lk(mu_);
  return retry_stale_locked([&]() -> Result<proto::mds::RegisterTargetReply> {
    uint32_t id = req.target_id();
    const bool first_time = id == 0 || targets_.count(id) == 0;
    if (id == 0) {
      id = next_id_++;
    } else if (id >= next_id_) {
      next_id_ = id + 1;  // a target keeps the id it has, even one we forgot
    }
    TargetInfo& t = targets_[id];
    // A known target that is DOWN comes back UP only through the leader
    // (which it registers with too): see leads().
    const bool stays_down = !first_time && t.state() == proto::mds::TARGET_DOWN && !leads();
    const proto::mds::TargetState state = stays_down ? proto::mds::TARGET_DOWN : alive_state(t);
    const bool changed = t.target_id() != id || t.address() != req.address() || t.state() != state;
    t.set_target_id(id);
    t.set_address(req.address());
    t.set_capacity_bytes(req.capacity_bytes());
    t.set_free_bytes(req.free_bytes());
    t.set_filesystem_id(req.filesystem_id());
    t.set_state(state);
    t.set_last_heartbeat_ms(now_ms());
    heard_.insert(id);
    if (stays_down) heard_while_down_.insert(id);
    if (changed) ++version_;
    if (first_time) {
      std::vector<uint32_t> ids;
      for (const auto& [tid, info] : targets_) ids.push_back(tid);
      if (chains_.reform_all(ids, now_ms())) ++version_;
    }
    reconcile_chains_locked(now_ms());
    SURGE_RETURN_IF_ERROR(persist_locked(&t));
    SLOG_INFO("target {} registered at {} ({} of {} bytes free), map version {}", id, req.address(),
              req.free_bytes(), req.capacity_bytes(), version_);
    proto::mds::RegisterTargetReply r;
    r.set_target_id(id);
    r.set_fs_id(fs_id_);
    r.set_heartbeat_interval_ms(opts_.heartbeat_interval_ms);
    return r;
  });
}

Result<proto::mds::TargetHeartbeatReply> ClusterMap::heartbeat(
    const proto::mds::TargetHeartbeatRequest& req) {
  std::lock_guard lk(mu_);
  if (targets_.count(req.target_id()) == 0) {
    // It may have registered with another MDS since this one read the map.
    if (Status rs = reload_locked(); !rs.ok()) return rs.WithContext("reading the cluster map");
  }
  return retry_stale_locked([&]() -> Result<proto::mds::TargetHeartbeatReply> {
    auto it = targets_.find(req.target_id());
    if (it == targets_.end()) {
      return Status::NotFound("target " + std::to_string(req.target_id()) +
                              " is not registered: register again");
    }
    TargetInfo& t = it->second;
    if (!req.address().empty() && req.address() != t.address()) {
      return Status::NotFound("target " + std::to_string(req.target_id()) + " moved from " +
                              t.address() + " to " + req.address() + ": register again");
    }
    t.set_capacity_bytes(req.capacity_bytes());
    t.set_free_bytes(req.free_bytes());
    if (!req.filesystem_id().empty()) t.set_filesystem_id(req.filesystem_id());
    t.set_last_heartbeat_ms(now_ms());
    const bool first_heard = heard_.insert(t.target_id()).second;
    if (t.state() == proto::mds::TARGET_DOWN && !leads()) {
      heard_while_down_.insert(t.target_id());  // the leader's pass decides, if this one leads then
    } else if (t.state() == proto::mds::TARGET_DOWN) {
      t.set_state(alive_state(t));
      ++version_;
      SLOG_INFO("target {} at {} is up again, map version {}", t.target_id(), t.address(),
                version_);
      reconcile_chains_locked(now_ms());
      SURGE_RETURN_IF_ERROR(persist_locked(nullptr));
    } else if (first_heard && reconcile_chains_locked(now_ms())) {
      // First word from it since the MDS started: chains waiting for it may
      // take it back now.
      SURGE_RETURN_IF_ERROR(persist_locked(nullptr));
    }
    proto::mds::TargetHeartbeatReply r;
    r.set_map_version(version_);
    return r;
  });
}

proto::mds::ClusterMap ClusterMap::snapshot() const {
  std::lock_guard lk(mu_);
  proto::mds::ClusterMap m;
  m.set_version(version_);
  m.set_fs_id(fs_id_);
  for (const auto& [id, t] : targets_) {
    TargetInfo* out = m.add_targets();
    *out = t;
    out->set_chain_memberships(chains_.memberships(id));
    out->set_drained(t.draining() && out->chain_memberships() == 0);
  }
  chains_.fill(m.mutable_chains());
  return m;
}

uint64_t ClusterMap::version() const {
  std::lock_guard lk(mu_);
  return version_;
}

Result<TargetInfo> ClusterMap::set_draining(uint32_t target_id, bool draining) {
  std::lock_guard lk(mu_);
  return retry_stale_locked([&]() -> Result<TargetInfo> {
    auto it = targets_.find(target_id);
    if (it == targets_.end()) {
      std::string known;
      for (const auto& [id, t] : targets_) {
        known += (known.empty() ? "" : ", ") + std::to_string(id);
      }
      return Status::NotFound(
          "target " + std::to_string(target_id) +
          " is not in the cluster map (known targets: " + (known.empty() ? "none" : known) + ")");
    }
    TargetInfo& t = it->second;
    if (t.draining() == draining) return t;
    TargetInfo next = t;
    next.set_draining(draining);
    if (next.state() != proto::mds::TARGET_DOWN) next.set_state(alive_state(next));
    ++version_;
    // On failure the map is read again: nothing of this change stays.
    SURGE_RETURN_IF_ERROR(persist_locked(&next));
    t = next;
    SLOG_INFO("target {} at {} {}, map version {}", target_id, t.address(),
              draining ? "draining: no new layouts, its chains move off it" : "no longer draining",
              version_);
    if (reconcile_chains_locked(now_ms())) {
      Status ps = persist_locked(nullptr);
      if (!ps.ok()) SLOG_ERROR("persisting the chain table: {}", ps.ToString());
    }
    auto now = targets_.find(target_id);
    if (now == targets_.end()) return next;
    TargetInfo shown = now->second;
    shown.set_chain_memberships(chains_.memberships(target_id));
    shown.set_drained(shown.draining() && shown.chain_memberships() == 0);
    return shown;
  });
}

ClusterMap::StateCounts ClusterMap::state_counts() const {
  std::lock_guard lk(mu_);
  StateCounts c;
  for (const auto& [id, t] : targets_) {
    if (t.state() == proto::mds::TARGET_DOWN) {
      ++c.down;
    } else if (t.state() == proto::mds::TARGET_DRAINING) {
      ++c.draining;
    } else {
      ++c.up;
    }
  }
  return c;
}

int ClusterMap::check_liveness(uint64_t now) {
  std::lock_guard lk(mu_);
  int n = 0;
  Status st = retry_stale_locked([&]() -> Status {
    n = 0;
    for (auto& [id, t] : targets_) {
      const bool silent = now > t.last_heartbeat_ms() + opts_.target_timeout_ms;
      if (t.state() == proto::mds::TARGET_DOWN) {
        // Heard by this MDS since it was marked down, while it did not lead.
        if (silent) heard_while_down_.erase(id);
        if (!silent && heard_while_down_.erase(id) != 0) {
          t.set_state(alive_state(t));
          ++n;
          SLOG_INFO("target {} at {} heard {} ms ago: up again", id, t.address(),
                    now > t.last_heartbeat_ms() ? now - t.last_heartbeat_ms() : 0);
        }
        continue;
      }
      if (silent) {
        t.set_state(proto::mds::TARGET_DOWN);
        ++n;
        SLOG_WARN("target {} at {} silent for {} ms: marked down", id, t.address(),
                  now - t.last_heartbeat_ms());
      }
    }
    if (n > 0) ++version_;
    // Every pass also lets the chains catch up: members of dead targets go
    // offline, absent ones are replaced when their time is up.
    const bool chains_changed = reconcile_chains_locked(now);
    if (n > 0 || chains_changed) return persist_locked(nullptr);
    return Status::OK();
  });
  if (!st.ok()) {
    SLOG_ERROR("persisting the cluster map after marking targets down: {}", st.ToString());
    return 0;
  }
  return n;
}

Result<proto::mds::Layout> ClusterMap::pick_layout(uint32_t stripe_size, uint32_t stripe_count) {
  std::lock_guard lk(mu_);
  std::vector<const TargetInfo*> up;
  size_t full = 0;
  for (const auto& [id, t] : targets_) {
    if (t.state() != proto::mds::TARGET_UP) continue;
    if (t.free_bytes() < opts_.min_free_bytes) {
      ++full;
      continue;
    }
    up.push_back(&t);
  }
  if (up.empty()) {
    size_t draining = 0;
    for (const auto& [id, t] : targets_) draining += t.state() == proto::mds::TARGET_DRAINING;
    if (full == 0) {
      return Status::NoSpace("no data server is up: cannot place a new file (" +
                             std::to_string(targets_.size()) + " known, none up, " +
                             std::to_string(draining) + " draining)");
    }
    return Status::NoSpace("no data server can take a new file: " + std::to_string(full) +
                           " up but full (free below " + std::to_string(opts_.min_free_bytes) +
                           " bytes), " + std::to_string(draining) + " draining, of " +
                           std::to_string(targets_.size()) + " known");
  }
  const uint32_t count = std::clamp<uint32_t>(stripe_count, 1, static_cast<uint32_t>(up.size()));
  // The first slot by smooth weighted round robin (weight = free MiB, at
  // least 1: every pick credits each candidate its weight and takes the
  // richest, which then pays the total), the others the next targets in id
  // order after it. So consecutive files start on consecutive targets, and
  // a small file's one stripe lands on every target in turn, in proportion
  // to its free space.
  int64_t total = 0;
  size_t first = 0;
  for (size_t i = 0; i < up.size(); ++i) {
    const int64_t w = std::max<int64_t>(1, static_cast<int64_t>(up[i]->free_bytes() >> 20));
    int64_t& c = rr_credit_[up[i]->target_id()];
    c += w;
    total += w;
    if (c > rr_credit_[up[first]->target_id()]) first = i;
  }
  rr_credit_[up[first]->target_id()] -= total;
  proto::mds::Layout l;
  l.set_stripe_size(stripe_size);
  l.set_stripe_count(count);
  for (uint32_t k = 0; k < count; ++k) l.add_targets(up[(first + k) % up.size()]->target_id());
  return l;
}

std::optional<std::string> ClusterMap::live_address(uint32_t target_id) const {
  std::lock_guard lk(mu_);
  auto it = targets_.find(target_id);
  if (it == targets_.end() || it->second.state() == proto::mds::TARGET_DOWN) return std::nullopt;
  return it->second.address();
}

bool ClusterMap::known(uint32_t target_id) const {
  std::lock_guard lk(mu_);
  return targets_.count(target_id) != 0;
}

void ClusterMap::space(uint64_t* capacity, uint64_t* free) const {
  std::lock_guard lk(mu_);
  *capacity = 0;
  *free = 0;
  // Targets on one disk report the same file system: count it once (as
  // the lowest such target reports it).
  std::set<std::string> counted;
  for (const auto& [id, t] : targets_) {
    if (t.state() == proto::mds::TARGET_DOWN) continue;
    if (!t.filesystem_id().empty() && !counted.insert(t.filesystem_id()).second) continue;
    *capacity += t.capacity_bytes();
    *free += t.free_bytes();
  }
}

}  // namespace surge::mds
