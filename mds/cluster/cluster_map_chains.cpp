// ClusterMap: the parts that concern chains (placement of format 2
// layouts, failure reports, resync reports); see cluster_map.h and
// docs/redundancy.md.
#include <algorithm>

#include "common/log.h"
#include "mds/cluster/chain_usage.h"
#include "mds/cluster/cluster_map.h"

namespace surge::mds {

namespace pb = proto::mds;

std::vector<TargetView> ClusterMap::views_locked() const {
  std::vector<TargetView> v;
  for (const auto& [id, t] : targets_) {
    TargetView tv;
    tv.id = id;
    tv.alive = t.state() != pb::TARGET_DOWN;
    tv.draining = t.draining();
    tv.full = t.free_bytes() < opts_.min_free_bytes;
    tv.free_bytes = t.free_bytes();
    tv.heard = heard_.count(id) != 0;
    v.push_back(tv);
  }
  return v;
}

bool ClusterMap::reconcile_chains_locked(uint64_t now) {
  if (!chains_.reconcile(views_locked(), now)) return false;
  ++version_;
  return true;
}

uint32_t ClusterMap::target_count() const {
  std::lock_guard lk(mu_);
  return static_cast<uint32_t>(targets_.size());
}

Result<pb::Layout> ClusterMap::pick_chain_layout(uint32_t stripe_size, uint32_t stripe_count,
                                                 const ChainShape& shape) {
  std::lock_guard lk(mu_);
  if (targets_.empty()) {
    return Status::NoSpace("no data server is up: cannot place a new file of " + shape.describe() +
                           " (none registered)");
  }
  if (!chains_.has_shape(shape)) {
    SURGE_RETURN_IF_ERROR(retry_stale_locked([&]() -> Status {
      if (chains_.has_shape(shape)) return Status::OK();  // another MDS formed them
      std::vector<uint32_t> ids;
      for (const auto& [id, t] : targets_) ids.push_back(id);
      SURGE_ASSIGN_OR_RETURN(bool changed, chains_.form(shape, ids, now_ms()));
      if (!changed) return Status::OK();
      ++version_;
      SURGE_RETURN_IF_ERROR_CTX(persist_locked(nullptr), "persisting new chains");
      return Status::OK();
    }));
  }
  std::vector<uint32_t> picked = chains_.pick(shape, std::max<uint32_t>(1, stripe_count), views_locked());
  if (picked.empty()) {
    const std::string ec_rule =
        shape.scheme == pb::SCHEME_EC
            ? ", or fewer than " + std::to_string(shape.ec_data + 1) + " positions serving"
            : "";
    return Status::NoSpace("no chain of " + shape.describe() +
                           " can take a new file: every one has a member that is down, full "
                           "or draining" +
                           ec_rule + " (" + std::to_string(targets_.size()) +
                           " data servers known)");
  }
  pb::Layout l;
  l.set_format(2);
  l.set_stripe_size(stripe_size);
  l.set_stripe_count(static_cast<uint32_t>(picked.size()));
  l.set_scheme(shape.scheme);
  if (shape.scheme == pb::SCHEME_EC) {
    l.set_ec_data(shape.ec_data);
    l.set_ec_parity(shape.ec_parity);
  } else {
    l.set_replicas(shape.replicas);
  }
  for (uint32_t id : picked) l.add_chains(id);
  return l;
}

Result<pb::ReportTargetFailureReply> ClusterMap::report_target_failure(
    const pb::ReportTargetFailureRequest& req, const Probe& probe) {
  std::string address;
  {
    std::lock_guard lk(mu_);
    auto it = targets_.find(req.target_id());
    if (it == targets_.end()) {
      return Status::NotFound("failure report from " + req.reporter() + " names target " +
                              std::to_string(req.target_id()) + ", which is not in the map");
    }
    if (it->second.state() == pb::TARGET_DOWN) {
      pb::ReportTargetFailureReply r;
      r.set_state(pb::TARGET_DOWN);
      r.set_map_version(version_);
      return r;
    }
    address = it->second.address();
  }
  // The probe runs without the lock: it waits on the network.
  const Status alive = probe(address);
  std::lock_guard lk(mu_);
  return retry_stale_locked([&]() -> Result<pb::ReportTargetFailureReply> {
    auto it = targets_.find(req.target_id());
    if (it == targets_.end()) {
      return Status::NotFound("failure report from " + req.reporter() + " names target " +
                              std::to_string(req.target_id()) + ", which is not in the map");
    }
    pb::ReportTargetFailureReply r;
    if (alive.ok()) {
      SLOG_INFO("{} reported target {} at {} failed ({}), but it answers: kept", req.reporter(),
                req.target_id(), address, req.message());
    } else if (it->second.state() != pb::TARGET_DOWN) {
      it->second.set_state(pb::TARGET_DOWN);
      ++version_;
      SLOG_WARN("{} reported target {} at {} failed ({}); the MDS's probe failed too ({}): down",
                req.reporter(), req.target_id(), address, req.message(), alive.ToString());
      reconcile_chains_locked(now_ms());
      SURGE_RETURN_IF_ERROR_CTX(persist_locked(nullptr), "persisting a failed target");
      it = targets_.find(req.target_id());
    }
    r.set_state(it->second.state());
    r.set_map_version(version_);
    return r;
  });
}

Result<pb::ReportChainSyncReply> ClusterMap::report_chain_sync(
    const pb::ReportChainSyncRequest& req) {
  std::lock_guard lk(mu_);
  return retry_stale_locked([&]() -> Result<pb::ReportChainSyncReply> {
    const uint64_t before = chains_.version();
    SURGE_ASSIGN_OR_RETURN(pb::Chain c, chains_.sync_report(req, now_ms()));
    if (chains_.version() != before) ++version_;
    // A member that now serves may complete a move or let the next one sync.
    reconcile_chains_locked(now_ms());
    if (chains_.dirty()) {
      SURGE_RETURN_IF_ERROR_CTX(persist_locked(nullptr), "persisting the chain table");
    }
    pb::ReportChainSyncReply r;
    const pb::Chain* now = chains_.find(req.chain_id());
    *r.mutable_chain() = now != nullptr ? chains_.shipped(*now) : c;
    r.set_map_version(version_);
    return r;
  });
}

Status ClusterMap::note_stand_in(const pb::NoteStandInRequest& req) {
  std::lock_guard lk(mu_);
  return retry_stale_locked([&]() -> Status {
    SURGE_RETURN_IF_ERROR(chains_.note_stand_in(req));
    if (chains_.dirty()) {
      SURGE_RETURN_IF_ERROR_CTX(persist_locked(nullptr), "persisting the chain table");
    }
    return Status::OK();
  });
}

Result<ChainHead> ClusterMap::chain_head(uint32_t chain_id) const {
  std::lock_guard lk(mu_);
  const pb::Chain* c = chains_.find(chain_id);
  if (c == nullptr) return Status::NotFound("chain " + std::to_string(chain_id) + " is not in the map");
  for (const auto& m : c->members()) {
    if (m.state() != pb::MEMBER_SERVING) continue;
    auto it = targets_.find(m.target_id());
    if (it == targets_.end() || it->second.state() == pb::TARGET_DOWN) continue;
    ChainHead h;
    h.target_id = m.target_id();
    h.address = it->second.address();
    h.chain_version = c->version();
    return h;
  }
  return Status::Unavailable("chain " + std::to_string(chain_id) + " has no serving member");
}

Result<ChainHead> ClusterMap::chunk_holder(uint32_t chain_id, uint32_t position) const {
  {
    std::lock_guard lk(mu_);
    const pb::Chain* c = chains_.find(chain_id);
    if (c != nullptr && c->scheme() == pb::SCHEME_EC) {
      const std::string what = "position " + std::to_string(position) + " of EC chain " +
                               std::to_string(chain_id) + " (version " +
                               std::to_string(c->version()) + ")";
      if (position >= static_cast<uint32_t>(c->members_size())) {
        return Status::NotFound(what + ": the chain has " + std::to_string(c->members_size()) +
                                " members");
      }
      const pb::ChainMember& m = c->members(static_cast<int>(position));
      auto it = targets_.find(m.target_id());
      // A SYNCING member takes them too: a removal it did not take would
      // leave the other positions' chunks of a removed file, from which
      // its own rebuild finds no consistent cut, and it would never serve.
      if ((m.state() != pb::MEMBER_SERVING && m.state() != pb::MEMBER_SYNCING) ||
          it == targets_.end() || it->second.state() == pb::TARGET_DOWN) {
        return Status::Unavailable(what + ": its member, target " + std::to_string(m.target_id()) +
                                   ", does not serve");
      }
      ChainHead h;
      h.target_id = m.target_id();
      h.address = it->second.address();
      h.chain_version = c->version();
      h.syncing = m.state() == pb::MEMBER_SYNCING;
      return h;
    }
  }
  return chain_head(chain_id);
}

std::vector<pb::Chain> ClusterMap::chains_named(const pb::Layout& layout) const {
  std::lock_guard lk(mu_);
  std::vector<pb::Chain> out;
  std::vector<uint32_t> seen;
  for (uint32_t id : layout.chains()) {
    if (std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
    seen.push_back(id);
    const pb::Chain* c = chains_.find(id);
    if (c != nullptr) out.push_back(chains_.shipped(*c));
  }
  return out;
}

}  // namespace surge::mds

namespace surge::mds {

Result<pb::RebalanceReply> ClusterMap::rebalance(const pb::RebalanceRequest& req) {
  // The scan runs without the lock: it reads every inode.
  SURGE_ASSIGN_OR_RETURN(auto bytes, chain_bytes(kv_));
  std::lock_guard lk(mu_);
  const uint32_t bound = req.max_moves() != 0 ? req.max_moves() : opts_.chains.rebalance_max_moves;
  return retry_stale_locked([&]() -> Result<pb::RebalanceReply> {
    const uint64_t before = chains_.version();
    pb::RebalanceReply r;
    for (auto& mv : chains_.rebalance(views_locked(), bytes, bound, req.dry_run(), now_ms())) {
      *r.add_moves() = std::move(mv);
    }
    if (chains_.version() != before) {
      ++version_;
      SURGE_RETURN_IF_ERROR_CTX(persist_locked(nullptr), "persisting the rebalance moves");
    }
    r.set_map_version(version_);
    return r;
  });
}

}  // namespace surge::mds
