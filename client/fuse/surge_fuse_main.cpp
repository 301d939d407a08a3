// surge-fuse: mounts a Surge file system with libfuse3's low-level API and
// its own multi-threaded loop (fuse_loop.h).
//
// Start-up order matters: the process forks into the background first
// (before any thread exists), and the child reports "mounted" or the error
// back through a pipe, so `mount -t surge` fails with the real reason and
// succeeds only once the mount is usable. SIGTERM/SIGINT/SIGHUP end the loop
// and unmount cleanly. If the daemon is killed hard the kernel keeps a dead
// mount ("Transport endpoint is not connected"): `fusermount3 -u MOUNTPOINT`
// (or `umount -l`) removes it.


#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "client/fuse/fuse_loop.h"
#include "client/fuse/fuse_metrics.h"
#include "client/fuse/init_extensions.h"
#include "client/fuse/mount_options.h"
#include "client/fuse/surge_fs.h"
#include "common/daemon/daemon_process.h"
#include "common/daemon/malloc_bounds.h"
#include "common/log.h"

namespace {

using surge::Status;
using surge::fuse::MountConfig;

// The bdi of our mount is named after its anonymous device (major:minor),
// found in /proc/self/mountinfo; no stat() of the mount point, which would
// wait for our own (not yet running) loop.
Status set_readahead(const std::string& mountpoint, uint32_t kb) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line, dev;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string id, parent, majmin, root, mp;
    ls >> id >> parent >> majmin >> root >> mp;
    if (mp == mountpoint) dev = majmin;  // the last one is on top
  }
  if (dev.empty()) return Status::NotFound("mount point " + mountpoint + " not in mountinfo");
  std::string path = "/sys/class/bdi/" + dev + "/read_ahead_kb";
  std::ofstream out(path);
  out << kb << "\n";
  out.close();
  if (!out) return Status::IOError("cannot write " + path);
  SLOG_INFO("fuse: read-ahead of {} set to {} KiB ({})", mountpoint, kb, path);
  return Status::OK();
}

void report(int fd, const std::string& msg) {
  if (fd < 0) return;
  ssize_t n = write(fd, msg.data(), msg.size());
  (void)n;
  close(fd);
}

int run(MountConfig& cfg, int status_fd) {
  // Before any thread, the MDS's bounds (common/daemon/malloc_bounds.h):
  // each of the FUSE workers would get an arena of its own, and what one
  // allocates (a stat-ahead fetch, a reply) is often freed by another
  // thread, so freed memory spread over up to 8 arenas a core and stayed.
  const Status malloc_bounds = surge::daemon::bound_malloc("surge-fuse", 2, 128 << 10);
  Status ls = surge::init_logging(cfg.log_level, cfg.log_file, "surge-fuse");
  if (!ls.ok()) {
    report(status_fd, "logging: " + ls.ToString());
    return 1;
  }
  // They tune memory, not correctness: an allocator that ignores mallopt
  // (a sanitizer's, or one preloaded) keeps its own policy.
  if (!malloc_bounds.ok()) SLOG_WARN("{}; allocator bounds not applied", malloc_bounds.message());
  // In the mount daemon (after the fork), before connecting: a bad address
  // fails the mount at once, naming it.
  surge::fuse::declare_fuse_metrics();
  auto metrics = surge::daemon::start_metrics("surge-fuse", cfg.metrics_listen);
  if (!metrics.ok()) {
    SLOG_ERROR("{}", metrics.status().ToString());
    report(status_fd, metrics.status().ToString());
    return 1;
  }
  cfg.client.kill_suidgid_on_write = false;  // kill_privs.h: the kernel says when
  cfg.client.read_ahead_bytes = 0;  // the kernel reads ahead (read_ahead_kb)...
  cfg.fs.direct_read_ahead = size_t{cfg.readahead_kb} << 10;  // ...but not for direct opens
  // Every FUSE worker receives requests into a registered buffer; a write
  // going behind keeps its buffer until the data servers have the bytes, so
  // allow for the write-behind window of a few files being written at once.
  cfg.client.request_buffer_size = surge::fuse::receive_buffer_size();
  cfg.client.request_buffers =
      cfg.max_threads + 4 * std::max<size_t>(cfg.client.write_behind_bytes >> 20, 1);
  auto client = surge::Client::Connect(cfg.client);
  if (!client.ok()) {
    std::string msg = "cannot connect to " + cfg.mds_address + ": " + client.status().ToString();
    SLOG_ERROR("{}", msg);
    report(status_fd, msg);
    return 1;
  }
  surge::fuse::SurgeFs fs(std::move(*client), cfg.fs);

  std::vector<std::string> args = {"surge-fuse"};
  if (cfg.fuse_debug) args.push_back("-d");
  // default_permissions always: without it the kernel checks no mode
  // itself, and serves cached names beneath a directory the caller may
  // not search, and opens of FIFOs and device nodes, without asking us.
  // Several MDS addresses are comma-separated: escaped, as libfuse's
  // option parser reads "\," as a comma inside a value.
  std::string fsname;
  for (char ch : cfg.mds_address) {
    if (ch == ',' || ch == '\\') fsname += '\\';
    fsname += ch;
  }
  std::string opts = "fsname=surge:" + fsname + ",subtype=surge" +
                     ",default_permissions,max_read=" + std::to_string(cfg.fs.max_read);
  for (const auto& o : cfg.fuse_options) opts += "," + o;
  args.push_back("-o");
  args.push_back(opts);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  fuse_args fargs = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());

  fuse_session* se =
      fuse_session_new(&fargs, surge::fuse::SurgeFs::ops(), sizeof(fuse_lowlevel_ops), &fs);
  if (se == nullptr) {
    report(status_fd, "fuse_session_new failed (bad -o option?): " + opts);
    return 1;
  }
  fs.set_session(se);
  surge::fuse::install_exit_signals(se);
  if (fuse_session_mount(se, cfg.mountpoint.c_str()) != 0) {
    surge::fuse::remove_exit_signals();
    fuse_session_destroy(se);
    report(status_fd, "cannot mount on " + cfg.mountpoint);
    return 1;
  }
  surge::fuse::install_init_extensions(se);
  if (cfg.readahead_kb > 0) {
    Status rs = set_readahead(cfg.mountpoint, cfg.readahead_kb);
    if (!rs.ok()) SLOG_WARN("fuse: read-ahead not set: {}", rs.ToString());
  }
  SLOG_INFO("fuse: {} mounted on {}", cfg.mds_address, cfg.mountpoint);
  if (!cfg.pid_file.empty()) {
    std::ofstream pf(cfg.pid_file);
    pf << getpid() << "\n";
  }
  report(status_fd, "mounted");  // the parent exits 0 now
  if (!cfg.foreground) {
    // Fully detached: stdio to /dev/null (logs go to log_file).
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      if (!cfg.log_file.empty()) dup2(null, 2);
      if (null > 2) close(null);
    }
  }

  int rc = surge::fuse::run_fuse_loop(se, fs.client(), cfg.max_threads);
  SLOG_INFO("fuse: loop ended ({}); unmounting {} ({} inodes still referenced)", rc,
            cfg.mountpoint, fs.remembered());
  fuse_session_unmount(se);
  surge::fuse::remove_exit_signals();
  fuse_session_destroy(se);
  fuse_opt_free_args(&fargs);
  if (!cfg.pid_file.empty()) unlink(cfg.pid_file.c_str());
  return rc == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto cfg = surge::fuse::parse_mount_args(argc, argv);
  if (!cfg.ok()) {
    std::fputs(surge::fuse::usage().c_str(), stderr);
    // The error last, below the usage: what a terminal (or a log's tail) shows.
    if (cfg.status().message() != "help") {
      std::fprintf(stderr, "surge-fuse: %s\n", cfg.status().ToString().c_str());
    }
    return cfg.status().message() == "help" ? 0 : 2;
  }
  char real[PATH_MAX];
  if (realpath(cfg->mountpoint.c_str(), real) == nullptr) {
    std::fprintf(stderr, "surge-fuse: mount point %s: %s\n", cfg->mountpoint.c_str(),
                 std::strerror(errno));
    return 1;
  }
  cfg->mountpoint = real;
  if (cfg->foreground) return run(*cfg, -1);

  int fds[2];
  if (pipe(fds) != 0) {
    std::perror("surge-fuse: pipe");
    return 1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("surge-fuse: fork");
    return 1;
  }
  if (pid == 0) {
    close(fds[0]);
    setsid();
    if (chdir("/") != 0) {
      // harmless: we only use absolute paths
    }
    _exit(run(*cfg, fds[1]));
  }
  close(fds[1]);
  std::string msg;
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) msg.append(buf, static_cast<size_t>(n));
  if (msg == "mounted") return 0;
  if (msg.empty()) {
    int st = 0;
    waitpid(pid, &st, 0);
    std::fprintf(stderr, "surge-fuse: mount daemon died before mounting (wait status %d)\n", st);
    return 1;
  }
  std::fprintf(stderr, "surge-fuse: %s\n", msg.c_str());
  return 1;
}
