// Chaos: the kill schedule of a stress run. Every tick (a random time
// around the kill interval) it SIGKILLs a data server, restarts one it
// killed, or SIGKILLs the MDS (sometimes with a data server at the same
// moment) and restarts it a moment later. It never takes away more than
// max_down data servers from the chains: a target counts as away from
// the moment it is killed until it serves again in every chain (a
// restarted target that is still resyncing is away), so a kill is allowed
// only while fewer than max_down are away, or when its victim is one of
// them already (the victim killed again during its own resync).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "tests/client/local_cluster.h"

namespace surge::stress {

struct ChaosOptions {
  double kill_interval_s = 6;
  int max_down = 1;            // data servers away at once
  int mds_kill_percent = 20;   // of the ticks
  bool kill_ods = true;
};

class Chaos {
 public:
  // cluster_mu guards every call on cluster (the monitor holds it while
  // it reads the daemons' pids).
  Chaos(test::LocalCluster* cluster, std::mutex* cluster_mu, ChaosOptions opt, uint64_t seed,
        double (*now)());
  // The target id of every data server (by index), before the first tick.
  Status init(int ods_count);
  // Ticks until stop; a failed restart ends it (in error()).
  void run(const std::atomic<bool>& stop);
  // run() has returned.
  bool stopped() const { return stopped_.load(); }
  // Everything restarted, every target up and every chain healthy again
  // (within timeout_s; a wait for convergence, not a timed assertion).
  Status heal(double timeout_s);

  // Was pid killed by the schedule (so its exit is no crash)?
  bool killed(pid_t pid);
  const std::vector<std::string>& events() const { return events_; }
  std::string error();
  int ods_kills() const { return ods_kills_; }
  int mds_kills() const { return mds_kills_; }
  int resync_kills() const { return resync_kills_; }

 private:
  // Targets not serving in some chain (offline or syncing) and those
  // syncing; false when the MDS did not answer.
  bool chain_state(std::set<uint32_t>* away, std::set<uint32_t>* syncing);
  void tick();
  // A kill that keeps within max_down; only_syncing: of a target that is
  // resyncing, or none. False when none was allowed.
  bool kill_one_ods(bool prefer_syncing, bool only_syncing);
  void event(const std::string& what);

  test::LocalCluster* cluster_;
  std::mutex* mu_;
  ChaosOptions opt_;
  std::mt19937_64 rng_;
  double (*now_)();
  std::vector<uint32_t> target_;  // by ods index
  std::set<int> down_;            // ods indices killed and not restarted
  std::mutex state_mu_;
  std::set<pid_t> killed_;
  std::vector<std::string> events_;
  std::string error_;
  std::atomic<bool> stopped_{false};
  bool quick_ = false;  // the next tick comes soon after a restart
  int ods_kills_ = 0, mds_kills_ = 0, resync_kills_ = 0;
};

}  // namespace surge::stress
