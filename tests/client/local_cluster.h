// LocalCluster: a real Surge cluster for the client tests: one surge-mds and
// N surge-ods processes on 127.0.0.1 (free ports; over RDMA on
// SURGE_RDMA_HOST when SURGE_TEST_TRANSPORT=rdma), their data and logs in a
// fresh temp dir (under SURGE_TEST_TMPDIR, else TMPDIR, else /tmp), a generated cluster key, and
// any number of real FUSE mounts (surge-fuse in the foreground, as a child). Everything it started
// is killed and unmounted in the destructor, on every exit path; children
// also die with the test process (PR_SET_PDEATHSIG: with the thread that
// started them, so a thread that restarts daemons must outlive them), and mounts use
// auto_unmount, so a crashed test leaves no daemon or dead mount behind.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "surge/client.h"
#include "tests/common/loopback.h"  // free_port

namespace surge::test {

struct ClusterConfig {
  int ods_count = 3;
  // Default layout of the root directory for new files (0: the MDS's).
  uint32_t stripe_size = 0;
  uint32_t stripe_count = 0;
  std::string client_io_timeout_ms = "3000";
  // [targets] timeout_ms of the MDS: a data server silent this long is
  // marked down by the heartbeat check alone.
  int target_timeout_ms = 3000;
  // Appended to the MDS's config file (TOML sections of its own, e.g.
  // "[chains]\nreplace_after_ms = 4000\n").
  std::string mds_toml;
  // [namespace] default_replicas of the MDS (-1: its shipped default, 2;
  // 0: one copy on plain targets, what a test of one-copy failures needs).
  int default_replicas = -1;
  // [orphans] interval_ms of the MDS: its background pass (orphans,
  // truncate intents, session expiry) runs this often.
  int background_interval_ms = 200;
  // surge-ods --worker-threads (0: its default).
  int ods_worker_threads = 0;
  // More surge-ods arguments (e.g. {"--ec-kept-deltas", "0"}).
  std::vector<std::string> ods_args;
  // Every daemon serves its Prometheus page on a free port of its own
  // (--metrics-listen; mds_metrics_port(), ods_metrics_port(i)).
  bool metrics = false;
};

// The layout most client suites use: 64 KiB stripes over 3 data servers,
// so ordinary file sizes cross many stripe and object boundaries.
constexpr uint32_t kSmallStripe = 64 * 1024;
inline ClusterConfig small_stripes() {
  ClusterConfig cfg;
  cfg.stripe_size = kSmallStripe;
  cfg.stripe_count = 3;
  return cfg;
}

// cfg with one copy of every file (format 1 layouts): what the tests of a
// lost data server's EIO, and of what a client retries without chains, need.
inline ClusterConfig one_copy(ClusterConfig cfg) {
  cfg.default_replicas = 0;
  return cfg;
}

class LocalCluster {
 public:
  // Starts MDS + ODS, waits until every data server is up in the map.
  static Result<std::unique_ptr<LocalCluster>> Start(const ClusterConfig& cfg);
  ~LocalCluster();

  const std::string& dir() const { return dir_; }
  const std::string& key_file() const { return key_file_; }
  std::string mds_address() const;
  std::string ods_dir(int i) const;
  pid_t ods_pid(int i) const { return ods_pids_[static_cast<size_t>(i)]; }
  // The address data server i listens on (as it registers with the MDS).
  std::string ods_address(int i) const;
  pid_t mds_pid() const { return mds_pid_; }
  // The daemons' /metrics ports (ClusterConfig::metrics; 0 without).
  int mds_metrics_port() const { return mds_metrics_port_; }
  int ods_metrics_port(int i) const { return ods_metrics_ports_[static_cast<size_t>(i)]; }
  // The surge-fuse of a mount made by mount(); -1 if none.
  pid_t mount_pid(const std::string& mountpoint) const;

  // A native client on this cluster, with client_options().
  Result<std::unique_ptr<Client>> connect(int io_timeout_ms = 3000) const;
  ClientOptions client_options(int io_timeout_ms = 3000) const;

  // Mounts at dir()/<name> (created) and waits until it is live.
  Result<std::string> mount(const std::string& name, const std::string& extra_opts = "");
  Status unmount(const std::string& mountpoint);

  // Fault injection.
  Status kill_ods(int i);   // SIGKILL, waits for the exit
  Status start_ods(int i);  // same data dir and port as before
  // A new data server (the next index, a fresh data dir and port), up in
  // the map when it returns; its index in *index.
  Status add_ods(int* index);
  Status kill_mds();
  Status start_mds();
  // The config the next start_mds() writes.
  ClusterConfig& config() { return cfg_; }
  Status wait_targets_up(int n, int timeout_ms);

  // Last lines of a log, for failure messages.
  std::string log_tail(const std::string& name, int lines = 30) const;

 private:
  struct Proc {
    std::string name;
    pid_t pid = -1;
  };
  LocalCluster() = default;
  Result<pid_t> spawn(const std::string& name, const std::vector<std::string>& argv);
  Status wait_port(const std::string& name, pid_t pid, int port, int timeout_ms);
  void stop_proc(pid_t& pid);

  ClusterConfig cfg_;
  std::string dir_;
  std::string build_;
  std::string key_file_;
  size_t log_start_ = 0;  // offset of the latest spawn's output in its log
  int mds_port_ = 0;
  pid_t mds_pid_ = -1;
  std::vector<int> ods_ports_;
  int mds_metrics_port_ = 0;
  std::vector<int> ods_metrics_ports_;  // 0 each without ClusterConfig::metrics
  std::vector<pid_t> ods_pids_;
  struct Mount {
    std::string path;
    pid_t pid;
  };
  std::vector<Mount> mounts_;
};

// Helpers shared by the tests.
std::string random_bytes(size_t n, uint64_t seed);
Status write_file(const std::string& path, const std::string& data);
// Reads the whole file through one descriptor, `chunk` bytes per read(2).
Result<std::string> read_file(const std::string& path, size_t chunk = 64 << 10);
// SIGSTOPs pid and waits until the kernel shows it stopped (a signal to a
// busy multi-threaded process takes effect a little later).
bool stop_process(pid_t pid);
// True when something accepts connections on 127.0.0.1:port.
bool port_open(int port);
// Runs a shell command; its exit status (output appended to *out if given).
int sh(const std::string& cmd, std::string* out = nullptr);

}  // namespace surge::test
