// ClusterMap: the data servers (targets) the MDS knows, their addresses,
// space and state, persisted in the KvStore's system space. Hands out
// layouts over UP targets and the versioned map to clients.
//
// Invariants: target ids are never reused (a persisted high-water mark);
// the version only grows and bumps whenever a target is added, changes
// address or changes state (space reports alone do not bump it); a target
// silent for longer than the timeout is DOWN and gets no new layouts. A
// target an administrator drains (TargetInfo.draining, persisted) is
// DRAINING while alive and DOWN when silent; only UP targets get layouts.
// The chain table (ChainTable, docs/redundancy.md) lives here too, under
// the same lock, so a target's state and its chains change together, in
// one persisted batch, and every chain change bumps the map version.
//
// Several MDS on one store (etcd) share the map through the store: every
// change is a batch checked against the map version this MDS last read or
// wrote, so a change made from a stale copy is refused (Busy); the map is
// then read again and the change decided again on it. Every MDS reads the
// map again when the stored version moves (refresh(), each background
// pass and before handing the map out). A target's address, state and
// draining mark are stored; its space and last heartbeat are what this MDS
// heard (data servers heartbeat to every MDS).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "mds/cluster/chain_table.h"
#include "mds/cluster/leadership.h"
#include "mds/kv/kv_store.h"
#include "net/proto/mds.pb.h"

namespace surge::mds {

struct ClusterMapOptions {
  uint32_t heartbeat_interval_ms = 1000;  // told to data servers
  uint32_t target_timeout_ms = 10000;     // silent this long: DOWN
  uint64_t min_free_bytes = 256ull << 20;  // below: full, no new placement
  ChainTableOptions chains;
};

struct ChainHead {
  uint32_t target_id = 0;
  std::string address;
  uint64_t chain_version = 0;
  bool syncing = false;  // an EC member being rebuilt (chunk_holder)
};

class ClusterMap {
 public:
  static Result<std::unique_ptr<ClusterMap>> Load(KvStore* kv, uint64_t fs_id,
                                                  ClusterMapOptions options);

  Result<proto::mds::RegisterTargetReply> register_target(
      const proto::mds::RegisterTargetRequest& req);
  // NotFound for an unknown id (the data server then registers again).
  Result<proto::mds::TargetHeartbeatReply> heartbeat(const proto::mds::TargetHeartbeatRequest& req);
  proto::mds::ClusterMap snapshot() const;
  uint64_t version() const;
  // Reads the map again when another MDS changed it in the store.
  Status refresh();

  // Sets or clears the draining mark of a target (admin); NotFound for an
  // unknown id. Persisted; bumps the version when it changes anything.
  Result<proto::mds::TargetInfo> set_draining(uint32_t target_id, bool draining);

  // Who decides liveness (cluster/leadership.h); none: this MDS always
  // does. Set before serving.
  void set_leadership(const Leadership* leadership) { leadership_ = leadership; }

  // The leader's pass: marks targets silent past the timeout DOWN, and
  // DOWN targets this MDS heard from since (while it did not lead yet)
  // UP again. Returns how many targets changed state.
  int check_liveness(uint64_t now_ms);

  // A format 1 layout: stripe_count distinct UP targets (clamped to how
  // many can take it), the first chosen round robin weighted by free space,
  // the rest following it in id order; DOWN, DRAINING and full targets
  // (free below min_free_bytes) never. NoSpace when none can take it.
  Result<proto::mds::Layout> pick_layout(uint32_t stripe_size, uint32_t stripe_count);

  // ---- chains (cluster_map_chains.cpp) ----

  // Placement of a format 2 layout: stripe_count chains of shape (fewer
  // when fewer are placeable), forming the chains of that shape first if
  // the table has none. NoSpace when no chain can take a new file.
  Result<proto::mds::Layout> pick_chain_layout(uint32_t stripe_size, uint32_t stripe_count,
                                               const ChainShape& shape);
  // A client or data server could not reach target_id. probe asks the
  // target itself (outside the lock); when it fails too, the target is
  // DOWN at once and leaves its chains. Returns the target's state after.
  using Probe = std::function<Status(const std::string& address)>;
  Result<proto::mds::ReportTargetFailureReply> report_target_failure(
      const proto::mds::ReportTargetFailureRequest& req, const Probe& probe);
  // A resync source's progress or end (ChainTable::sync_report).
  Result<proto::mds::ReportChainSyncReply> report_chain_sync(
      const proto::mds::ReportChainSyncRequest& req);
  // MdsNoteStandIn: ChainTable::note_stand_in, persisted before the reply.
  Status note_stand_in(const proto::mds::NoteStandInRequest& req);
  // surgectl rebalance (ChainTable::rebalance); max_moves 0: the
  // configured bound. Persisted before it answers.
  Result<proto::mds::RebalanceReply> rebalance(const proto::mds::RebalanceRequest& req);
  // The chains a layout names, as the map holds them now (getstripe).
  std::vector<proto::mds::Chain> chains_named(const proto::mds::Layout& layout) const;
  // The head of a chain (its first SERVING member) with its address and
  // the chain's version: where the MDS sends a chunk's truncate or removal.
  // NotFound for an unknown chain, Unavailable when no member serves.
  Result<ChainHead> chain_head(uint32_t chain_id) const;
  // Where an update of chunk position `position` of chain_id goes: a
  // replicated chain's head; an EC chain's member of that position (member
  // i holds position i), SERVING or SYNCING, Unavailable naming it when it
  // is offline.
  Result<ChainHead> chunk_holder(uint32_t chain_id, uint32_t position) const;
  // Registered target ids, for formation and admin checks.
  uint32_t target_count() const;

  // Address of a target that is not DOWN; nullopt otherwise.
  std::optional<std::string> live_address(uint32_t target_id) const;
  bool known(uint32_t target_id) const;
  // Capacity and free bytes over targets that are not DOWN, each file
  // system once (targets reporting the same filesystem_id share a disk).
  void space(uint64_t* capacity, uint64_t* free) const;

  struct StateCounts {
    uint32_t up = 0, down = 0, draining = 0;
  };
  StateCounts state_counts() const;

  static uint64_t now_ms();

 private:
  ClusterMap(KvStore* kv, uint64_t fs_id, ClusterMapOptions o)
      : kv_(kv), fs_id_(fs_id), opts_(o), chains_(o.chains) {}
  // Writes the version, the id high-water mark, every target whose stored
  // part changed (and t, not yet in targets_, when given) and the changed
  // chains, checked against stored_version_. On Busy (another MDS changed
  // the map) or any other failure, reads the map again, so memory never
  // holds a change the store refused, and returns the error.
  Status persist_locked(const proto::mds::TargetInfo* t);
  // Replaces the map with the store's; keeps what this MDS heard of each
  // target (space, last heartbeat).
  Status reload_locked();
  // Runs change (under mu_) again while its persist is refused as stale.
  template <typename Fn>
  auto retry_stale_locked(Fn&& change) -> decltype(change());
  static std::string stored_part(const proto::mds::TargetInfo& t);
  // The targets as the chain table sees them.
  std::vector<TargetView> views_locked() const;
  // Runs the chain table's reconcile; bumps the map version when chains
  // changed. Callers persist.
  bool reconcile_chains_locked(uint64_t now);
  // The state of a target that is alive: UP, or DRAINING when marked so.
  static proto::mds::TargetState alive_state(const proto::mds::TargetInfo& t) {
    return t.draining() ? proto::mds::TARGET_DRAINING : proto::mds::TARGET_UP;
  }
  // Only the leader turns a DOWN target UP on what it hears: a data server
  // that reaches some MDS but not the leader would otherwise flap.
  bool leads() const { return leadership_ == nullptr || leadership_->is_leader(); }

  KvStore* kv_;
  uint64_t fs_id_;
  ClusterMapOptions opts_;
  mutable std::mutex mu_;
  std::map<uint32_t, proto::mds::TargetInfo> targets_;
  std::map<uint32_t, int64_t> rr_credit_;  // smooth weighted round robin state
  std::set<uint32_t> heard_;  // targets that registered or heartbeated since start
  std::set<uint32_t> heard_while_down_;  // DOWN targets heard while this MDS did not lead
  uint32_t next_id_ = 1;
  uint64_t version_ = 1;
  uint64_t stored_version_ = 0;             // the version in the store as this MDS last saw it
  std::map<uint32_t, std::string> stored_;  // stored_part of each target, as in the store
  ChainTable chains_;
  const Leadership* leadership_ = nullptr;
};

namespace detail {
inline const Status& status_of(const Status& s) {
  return s;
}
template <typename T>
const Status& status_of(const Result<T>& r) {
  return r.status();
}
}  // namespace detail

template <typename Fn>
auto ClusterMap::retry_stale_locked(Fn&& change) -> decltype(change()) {
  // Each refusal means another MDS changed the map in between; a few in a
  // row mean a storm of changes, which the caller's caller retries.
  constexpr int kAttempts = 8;
  for (int attempt = 1;; ++attempt) {
    auto r = change();
    if (detail::status_of(r).code() != Code::kBusy || attempt == kAttempts) return r;
  }
}

}  // namespace surge::mds
