#include "client/fuse/mount_options.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace surge::fuse {

namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s) {
    if (ch == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(ch);
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

Result<double> to_double(const std::string& key, const std::string& v) {
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || d < 0) {
    return Status::InvalidArgument("mount option " + key + "=" + v + ": not a number >= 0");
  }
  return d;
}

// Decimal digits only (strtoull alone would take "-1" or " 5").
bool parse_digits(const std::string& v, uint64_t* out) {
  if (v.empty() || v[0] < '0' || v[0] > '9') return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE) return false;
  *out = n;
  return true;
}

Result<uint64_t> to_uint(const std::string& key, const std::string& v) {
  uint64_t n = 0;
  if (!parse_digits(v, &n)) {
    return Status::InvalidArgument("mount option " + key + "=" + v + ": not an integer");
  }
  return n;
}

// N, or N with a k/m/g suffix (KiB, MiB, GiB).
Result<uint64_t> to_bytes(const std::string& key, const std::string& v) {
  static const std::string kUnits = "kmg";  // 2^10, 2^20, 2^30
  std::string digits = v;
  unsigned shift = 0;
  if (!v.empty()) {
    auto u = kUnits.find(static_cast<char>(std::tolower(static_cast<unsigned char>(v.back()))));
    if (u != std::string::npos) {
      shift = 10 * static_cast<unsigned>(u + 1);
      digits.pop_back();
    }
  }
  uint64_t n = 0;
  if (!parse_digits(digits, &n) || (n << shift >> shift) != n) {
    return Status::InvalidArgument("mount option " + key + "=" + v +
                                   ": not a size (N, Nk, Nm or Ng)");
  }
  return n << shift;
}

Status apply_option(MountConfig& m, const std::string& opt) {
  auto eq = opt.find('=');
  std::string key = opt.substr(0, eq);
  std::string val = eq == std::string::npos ? "" : opt.substr(eq + 1);
  // fstab / mount(8) words with no meaning for a FUSE file system
  static const char* kDropped[] = {"defaults", "auto",    "noauto", "user", "nouser",
                                   "users",    "_netdev", "nofail", "rw"};
  for (const char* d : kDropped) {
    if (key == d) return Status::OK();
  }
  if (key.rfind("x-", 0) == 0 || key.rfind("comment=", 0) == 0) return Status::OK();

  if (key == "key_file" || key == "keyfile") {
    m.client.cluster_key_file = val;
  } else if (key == "transport") {
    if (val != "tcp" && val != "rdma") {
      return Status::InvalidArgument("mount option transport=" + val + ": tcp or rdma");
    }
    m.client.transport = val;
  } else if (key == "entry_timeout") {
    SURGE_ASSIGN_OR_RETURN(m.fs.entry_timeout, to_double(key, val));
  } else if (key == "attr_timeout") {
    SURGE_ASSIGN_OR_RETURN(m.fs.attr_timeout, to_double(key, val));
  } else if (key == "negative_timeout") {
    SURGE_ASSIGN_OR_RETURN(m.fs.negative_timeout, to_double(key, val));
  } else if (key == "io_timeout_ms") {
    SURGE_ASSIGN_OR_RETURN(uint64_t ms, to_uint(key, val));
    m.client.io_timeout = std::chrono::milliseconds(ms);
  } else if (key == "io_attempt_timeout_ms") {
    SURGE_ASSIGN_OR_RETURN(uint64_t ms, to_uint(key, val));
    m.client.io_attempt_timeout = std::chrono::milliseconds(ms);
  } else if (key == "mds_timeout_ms") {
    SURGE_ASSIGN_OR_RETURN(uint64_t ms, to_uint(key, val));
    m.client.mds_timeout = std::chrono::milliseconds(ms);
  } else if (key == "readahead_kb") {
    SURGE_ASSIGN_OR_RETURN(uint64_t kb, to_uint(key, val));
    m.readahead_kb = static_cast<uint32_t>(kb);
  } else if (key == "dir_leases") {
    if (val != "0" && val != "1") {
      return Status::InvalidArgument("mount option dir_leases=" + val + ": 0 or 1");
    }
    m.client.dir_leases = val == "1";
  } else if (key == "stat_ahead") {
    if (val != "0" && val != "1") {
      return Status::InvalidArgument("mount option stat_ahead=" + val + ": 0 or 1");
    }
    m.client.stat_ahead = val == "1";
  } else if (key == "wronly_direct" || key == "rdwr_direct" || key == "rdonly_direct") {
    if (val != "0" && val != "1") {
      return Status::InvalidArgument("mount option " + key + "=" + val + ": 0 or 1");
    }
    bool& flag = key == "wronly_direct" ? m.fs.wronly_direct
                 : key == "rdwr_direct" ? m.fs.rdwr_direct
                                        : m.fs.rdonly_direct;
    flag = val == "1";
  } else if (key == "max_read") {
    // Ours, not passed through as is: libfuse refuses an INIT whose
    // max_read differs from the mount's.
    SURGE_ASSIGN_OR_RETURN(uint64_t n, to_bytes(key, val));
    if (n < 4096 || n > (1u << 20)) {
      return Status::InvalidArgument("mount option max_read=" + val +
                                     ": from 4k to 1m (a request's bytes)");
    }
    m.fs.max_read = static_cast<uint32_t>(n);
  } else if (key == "rdonly_direct_min") {
    SURGE_ASSIGN_OR_RETURN(m.fs.rdonly_direct_min, to_bytes(key, val));
  } else if (key == "max_threads") {
    SURGE_ASSIGN_OR_RETURN(uint64_t n, to_uint(key, val));
    m.max_threads = static_cast<unsigned>(std::max<uint64_t>(n, 1));
  } else if (key == "log_level") {
    m.log_level = val;
  } else if (key == "log_file") {
    m.log_file = val;
  } else if (key == "pid_file") {
    m.pid_file = val;
  } else if (key == "metrics_listen") {
    m.metrics_listen = val;
  } else if (key == "default_permissions") {
    // Always on (surge_fuse_main): the word is accepted for old fstabs.
  } else {
    m.fuse_options.push_back(opt);  // allow_other, ro, nosuid, ...: libfuse's
  }
  return Status::OK();
}

}  // namespace

std::string usage() {
  return "usage: surge-fuse [-f] [-d] [--metrics-listen HOST:PORT] [-o opt[,opt...]] MDS-ADDR "
         "MOUNTPOINT\n"
         "  MDS-ADDR           tcp://HOST:PORT (or HOST:PORT); several MDS of one file\n"
         "                     system comma-separated: tcp://a:7100,tcp://b:7100\n"
         "  -f                 stay in the foreground\n"
         "  -d                 foreground, with libfuse request tracing\n"
         "  --metrics-listen HOST:PORT  serve Prometheus metrics (GET /metrics) there\n"
         "                     (also -o metrics_listen=HOST:PORT, e.g. in fstab)\n"
         "surge options (-o):\n"
         "  key_file=PATH      cluster key file (default /etc/surge/cluster.key)\n"
         "  transport=tcp|rdma data-server transport (default tcp)\n"
         "  entry_timeout=S    kernel name cache, seconds (default 1)\n"
         "  attr_timeout=S     kernel attribute cache, seconds (default 1)\n"
         "  negative_timeout=S kernel cache of names that do not exist, seconds (default 1)\n"
         "  io_timeout_ms=N    an IO to the data servers, retries included, fails\n"
         "                     with EIO after N ms (10000)\n"
         "  io_attempt_timeout_ms=N  one request of it is retried after N ms\n"
         "                     (default half of io_timeout_ms)\n"
         "  mds_timeout_ms=N   how long an unreachable MDS is retried (30000)\n"
         "  readahead_kb=N     read-ahead of the mount (default 4096)\n"
         "  max_threads=N      FUSE worker threads (default 16)\n"
         "  dir_leases=0|1     lookups of new names in directories this mount made\n"
         "                     are answered without the MDS (default 1)\n"
         "  stat_ahead=0|1     a run of lookups in one directory fetches its entries\n"
         "                     in bulk and answers the rest of the run (default 1)\n"
         "  wronly_direct=0|1  write-only opens bypass the page cache (default 1)\n"
         "  rdwr_direct=0|1    read-write opens too, where the kernel can still\n"
         "                     mmap such files (Linux 6.6+; default 1)\n"
         "  rdonly_direct=0|1  read-only opens of large files too, where the\n"
         "                     kernel can still mmap such files (default 1)\n"
         "  rdonly_direct_min=SIZE  what is large (default 16m; k/m/g suffixes)\n"
         "  max_read=SIZE      bytes per read request (4k..1m, default 1m)\n"
         "  log_level=L, log_file=PATH, pid_file=PATH\n"
         "libfuse options: allow_other, ro, nosuid, nodev, ... (default_permissions: always)\n"
         "fstab words ignored: defaults, auto, noauto, user, _netdev, nofail, x-*\n";
}

Result<MountConfig> parse_mount_args(int argc, char** argv) {
  MountConfig m;
  m.client.cluster_key_file = "/etc/surge/cluster.key";
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-f") {
      m.foreground = true;
    } else if (a == "-d") {
      m.foreground = true;
      m.fuse_debug = true;
    } else if (a == "-o") {
      if (i + 1 >= argc) return Status::InvalidArgument("-o needs an argument");
      for (const auto& o : split_commas(argv[++i])) SURGE_RETURN_IF_ERROR(apply_option(m, o));
    } else if (a.rfind("-o", 0) == 0 && a.size() > 2) {
      for (const auto& o : split_commas(a.substr(2))) SURGE_RETURN_IF_ERROR(apply_option(m, o));
    } else if (a == "--metrics-listen") {
      if (i + 1 >= argc) return Status::InvalidArgument("--metrics-listen needs HOST:PORT");
      m.metrics_listen = argv[++i];
    } else if (a.rfind("--metrics-listen=", 0) == 0) {
      m.metrics_listen = a.substr(std::string("--metrics-listen=").size());
    } else if (a == "-s" || a == "-n" || a == "-v") {
      // mount(8) helper flags (sloppy, no mtab, verbose): nothing to do.
    } else if (a == "-h" || a == "--help") {
      return Status::InvalidArgument("help");
    } else if (!a.empty() && a[0] == '-') {
      return Status::InvalidArgument("unknown flag " + a);
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 2) {
    return Status::InvalidArgument("expected MDS-ADDR and MOUNTPOINT, got " +
                                   std::to_string(positional.size()) + " arguments");
  }
  m.mds_address = positional[0];
  m.mountpoint = positional[1];
  m.client.mds_address = m.mds_address;
  return m;
}

}  // namespace surge::fuse
