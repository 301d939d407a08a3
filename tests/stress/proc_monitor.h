// ProcMonitor: every daemon's resident memory and open descriptors over
// time, read from /proc/PID/status (VmRSS) and /proc/PID/fd, one series
// per incarnation (a restarted daemon starts a new one), and the daemons
// that died without being killed by the run.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace surge::stress {

struct Sample {
  double t = 0;  // seconds since the run began
  uint64_t rss_kib = 0;
  int fds = 0;
};

struct Incarnation {
  std::string name;  // "mds", "ods2", "mount"
  pid_t pid = -1;
  std::vector<Sample> samples;
};

class ProcMonitor {
 public:
  // One sample of every daemon in `daemons` (name -> pid; -1 when down on
  // purpose) at time t. A pid whose process exited is named in the return
  // value (the caller knows whether it killed it).
  std::vector<std::string> sample(double t, const std::map<std::string, pid_t>& daemons);
  const std::vector<Incarnation>& incarnations() const { return all_; }
  // A table of every incarnation: first, min, max and last RSS and
  // descriptors, and up to `points` RSS samples spread over its life.
  std::string table(int points) const;
  // Incarnations alive at the last sample whose descriptors grew without
  // bound: over a life of at least 6 samples after its first 10 s
  // (connections coming in), the fewest open in its last third exceeds
  // the most open in its first third by more than `slack`. "" when none.
  std::string fd_growth(int slack) const;
  // Every sample as CSV (name,pid,t,rss_kib,fds).
  std::string csv() const;

 private:
  std::vector<Incarnation> all_;
  std::map<std::string, size_t> current_;  // name -> index in all_
};

// ProcMonitor::fd_growth over the incarnations in `all`.
std::string descriptor_growth(const std::vector<Incarnation>& all, int slack);

// VmRSS of pid in KiB and its open descriptors; false when it is gone.
bool read_proc(pid_t pid, uint64_t* rss_kib, int* fds);
// True when pid (a child) has exited; does not reap it.
bool exited(pid_t pid);

}  // namespace surge::stress
