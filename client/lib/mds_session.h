// MdsSession: this client's session with the MDS, which records its opens
// (so an unlinked file stays readable while open here). Opened at start and
// kept alive by heartbeat(); the heartbeat reply also carries the cluster
// map version, which the map cache refetches on. An MDS that restarted no
// longer knows the session: the first thread that notices opens a new one
// (once, however many notice) and records every open of this client again.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "client/lib/cluster_map_cache.h"
#include "client/lib/inode_table.h"
#include "client/lib/mds_link.h"
#include "common/status.h"

namespace surge::client {

class MdsSession {
 public:
  MdsSession(MdsLink* mds, InodeTable* inodes, ClusterMapCache* map, std::string client_name)
      : mds_(mds), inodes_(inodes), map_(map), client_name_(std::move(client_name)) {}

  // Opens a session and re-records the opens this client holds.
  Status open();
  uint64_t id() const { return id_.load(); }
  // After an MDS call failed with `failed` under session `used`: when the
  // MDS no longer knows that session, opens a new one (unless another
  // thread has). True when the caller should retry.
  bool renew_after(const Status& failed, uint64_t used);
  // Keeps the session alive; a newer map version refreshes the map cache.
  void heartbeat();
  std::chrono::milliseconds heartbeat_interval() const {
    return std::chrono::milliseconds(heartbeat_interval_ms_.load());
  }
  // Ends the session (at shutdown; its opens die with it).
  void close();
  // Whether the MDS applies a size report sent with a setattr
  // (SetAttrRequest.report_size): as it said when the session opened.
  bool setattr_reports_size() const { return setattr_reports_size_.load(); }

 private:
  MdsLink* mds_;
  InodeTable* inodes_;
  ClusterMapCache* map_;
  std::string client_name_;
  std::mutex renew_mu_;
  std::atomic<uint64_t> id_{0};
  std::atomic<int64_t> heartbeat_interval_ms_{2000};
  std::atomic<bool> setattr_reports_size_{false};
};

}  // namespace surge::client
