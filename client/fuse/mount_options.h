// Command line and -o options of surge-fuse (and so of mount.surge and
// /etc/fstab lines). Surge's own options are taken out of the -o list;
// fstab-only words (defaults, _netdev, nofail, x-*) are dropped; the rest
// (allow_other, default_permissions, ro, nosuid...) go to libfuse.
#pragma once

#include <string>
#include <vector>

#include "client/fuse/surge_fs.h"
#include "common/status.h"
#include "surge/client.h"

namespace surge::fuse {

struct MountConfig {
  std::string mds_address;
  std::string mountpoint;
  bool foreground = false;
  bool fuse_debug = false;
  std::string log_level = "info";
  std::string log_file;
  std::string pid_file;  // the daemon writes its pid here once mounted
  // "HOST:PORT": serve the Prometheus page (GET /metrics) there; "": none.
  std::string metrics_listen;
  uint32_t readahead_kb = 4096;  // bdi read_ahead_kb of the mount
  unsigned max_threads = 16;
  ClientOptions client;
  FsOptions fs;
  std::vector<std::string> fuse_options;  // for libfuse's -o
};

// argv as given to surge-fuse / mount.surge:
//   surge-fuse [-f] [-d] [--metrics-listen HOST:PORT] [-o opt[,opt...]]... MDS-ADDR MOUNTPOINT
Result<MountConfig> parse_mount_args(int argc, char** argv);
std::string usage();

}  // namespace surge::fuse
