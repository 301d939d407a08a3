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
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/status.h"
#include "mds/kv/kv_store.h"
#include "net/proto/mds.pb.h"

namespace surge::mds {

struct ClusterMapOptions {
  uint32_t heartbeat_interval_ms = 1000;  // told to data servers
  uint32_t target_timeout_ms = 10000;     // silent this long: DOWN
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

  // Sets or clears the draining mark of a target (admin); NotFound for an
  // unknown id. Persisted; bumps the version when it changes anything.
  Result<proto::mds::TargetInfo> set_draining(uint32_t target_id, bool draining);

  // Marks targets silent past the timeout DOWN; returns how many changed.
  int mark_silent_down(uint64_t now_ms);

  // stripe_count distinct UP targets (clamped to how many are UP), chosen
  // round robin weighted by free space; DOWN and DRAINING targets never.
  // NoSpace when none is UP.
  Result<proto::mds::Layout> pick_layout(uint32_t stripe_size, uint32_t stripe_count);

  // Address of a target that is not DOWN; nullopt otherwise.
  std::optional<std::string> live_address(uint32_t target_id) const;
  bool known(uint32_t target_id) const;
  // Capacity and free bytes over targets that are not DOWN.
  void space(uint64_t* capacity, uint64_t* free) const;

  struct StateCounts {
    uint32_t up = 0, down = 0, draining = 0;
  };
  StateCounts state_counts() const;

  static uint64_t now_ms();

 private:
  ClusterMap(KvStore* kv, uint64_t fs_id, ClusterMapOptions o) : kv_(kv), fs_id_(fs_id), opts_(o) {}
  Status persist_locked(const proto::mds::TargetInfo* t);  // plus version (and hwm)
  // The state of a target that is alive: UP, or DRAINING when marked so.
  static proto::mds::TargetState alive_state(const proto::mds::TargetInfo& t) {
    return t.draining() ? proto::mds::TARGET_DRAINING : proto::mds::TARGET_UP;
  }

  KvStore* kv_;
  uint64_t fs_id_;
  ClusterMapOptions opts_;
  mutable std::mutex mu_;
  std::map<uint32_t, proto::mds::TargetInfo> targets_;
  std::map<uint32_t, int64_t> rr_credit_;  // smooth weighted round robin state
  uint32_t next_id_ = 1;
  uint64_t version_ = 1;
};

}  // namespace surge::mds
