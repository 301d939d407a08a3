#include "tests/client/local_cluster.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "net/cluster_key.h"
#include "tests/common/time_scale.h"

namespace surge::test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

bool port_open(int port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = connect(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(s);
  return ok;
}

namespace {

bool is_mounted(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string id, parent, majmin, root, mp;
    ls >> id >> parent >> majmin >> root >> mp;
    if (mp == path) return true;
  }
  return false;
}

// SURGE_TEST_TRANSPORT=rdma (with SURGE_RDMA_HOST, as in the Soft-RoCE VM)
// runs the same cluster over RDMA; the default is TCP on 127.0.0.1.
std::string transport() {
  const char* t = std::getenv("SURGE_TEST_TRANSPORT");
  return t != nullptr && std::string(t) == "rdma" ? "rdma" : "tcp";
}
std::string host() {
  const char* h = std::getenv("SURGE_RDMA_HOST");
  return transport() == "rdma" && h != nullptr ? h : "127.0.0.1";
}
std::string addr(int port) { return transport() + "://" + host() + ":" + std::to_string(port); }
// /metrics is plain HTTP on loopback, whatever the transport.
std::string metrics_addr(int port) { return "127.0.0.1:" + std::to_string(port); }

// Where the cluster's directory goes: SURGE_TEST_TMPDIR, else TMPDIR, else
// /tmp. The Soft-RoCE VM sees the host's /tmp over 9p, which has no
// fallocate and is slow; tests/client/rdma_guest.sh points this at a tmpfs.
std::string test_tmpdir() {
  for (const char* var : {"SURGE_TEST_TMPDIR", "TMPDIR"}) {
    const char* d = std::getenv(var);
    if (d != nullptr && *d != '\0') return d;
  }
  return "/tmp";
}

// Start-up waits: the RDMA runs are in an emulated VM, several times slower;
// sanitized builds are too (tests/common/time_scale.h).
int scaled(int ms) { return sanitizer_scaled(transport() == "rdma" ? ms * 6 : ms); }

// The MDS's heartbeat timeout: in the emulated VM at load 12-14 live data
// servers missed the 3 s one and were taken out of their chains
// (docs/testing.md, "RDMA in the VM"). Not scaled under sanitizers: tests
// there pause data servers past it on purpose. A dead server is found by
// the client's or its chain peer's report well before either.
int target_timeout(int ms) { return transport() == "rdma" ? ms * 6 : ms; }

// How long a data server waits for its chain successor: below the tests'
// io attempts (half of an 8 s io timeout, scaled alike under sanitizers),
// so a stalled successor is its predecessor's to report. In the emulated
// VM healthy forwards are slow; there it stays at the 10 s it always had.
int forward_timeout() {
  return transport() == "rdma" ? 10000 : sanitizer_scaled(3000);
}

// Bytes in a file now: where the new run's log starts.
size_t log_size(const std::string& path) {
  std::error_code ec;
  auto n = fs::file_size(path, ec);
  return ec ? 0 : static_cast<size_t>(n);
}

// The daemons print "surge-X listening on ADDR" once they serve.
bool log_says_listening(const std::string& path, size_t from) {
  std::ifstream in(path);
  in.seekg(static_cast<std::streamoff>(from));
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(" listening on ") != std::string::npos && line.rfind("surge-", 0) == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string LocalCluster::mds_address() const { return addr(mds_port_); }
std::string LocalCluster::ods_dir(int i) const { return dir_ + "/ods" + std::to_string(i); }

Result<pid_t> LocalCluster::spawn(const std::string& name, const std::vector<std::string>& argv) {
  std::string log = dir_ + "/logs/" + name + ".log";
  log_start_ = log_size(log);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return Status::FromErrno(errno, "fork for " + name);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  return pid;
}

Status LocalCluster::wait_port(const std::string& name, pid_t pid, int port, int timeout_ms) {
  std::string log = dir_ + "/logs/" + name + ".log";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      return Status::Internal(name + " exited (status " + std::to_string(st) +
                              ") before listening on port " + std::to_string(port) + "; log:\n" +
                              log_tail(name));
    }
    if (transport() == "tcp" ? port_open(port) : log_says_listening(log, log_start_)) {
      return Status::OK();
    }
    std::this_thread::sleep_for(20ms);
  }
  return Status::TimedOut(name + " not listening on port " + std::to_string(port) + " after " +
                          std::to_string(timeout_ms) + " ms; log:\n" + log_tail(name));
}

void LocalCluster::stop_proc(pid_t& pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  pid = -1;
}

std::string LocalCluster::log_tail(const std::string& name, int lines) const {
  std::string out;
  sh("tail -n " + std::to_string(lines) + " " + dir_ + "/logs/" + name + ".log", &out);
  return out;
}

Status LocalCluster::start_mds() {
  std::string bin = build_ + "/mds/surge-mds";
  // Test timings: orphans collected soon after start and often, so the
  // unlink-while-open test sees reclamation in seconds.
  std::string conf = dir_ + "/mds.toml";
  {
    std::ofstream f(conf);
    f << "[orphans]\ninterval_ms = " << cfg_.background_interval_ms << "\nstartup_grace_ms = 1000\n"
      << "[targets]\nheartbeat_interval_ms = 500\ntimeout_ms = "
      << target_timeout(cfg_.target_timeout_ms) << "\n";
    if (cfg_.default_replicas >= 0) {
      f << "[namespace]\ndefault_replicas = " << cfg_.default_replicas << "\n";
    }
    f << cfg_.mds_toml;
  }
  std::vector<std::string> argv = {bin, "--config", conf, "--data-dir", dir_ + "/mds", "--listen",
                                   addr(mds_port_), "--cluster-key-file", key_file_,
                                   "--log-level", "info"};
  if (mds_metrics_port_ != 0) {
    argv.insert(argv.end(), {"--metrics-listen", metrics_addr(mds_metrics_port_)});
  }
  SURGE_ASSIGN_OR_RETURN(mds_pid_, spawn("mds", argv));
  Status st = wait_port("mds", mds_pid_, mds_port_, scaled(15000));
  if (!st.ok()) stop_proc(mds_pid_);  // as start_ods: never two on one data dir
  return st;
}

Status LocalCluster::kill_mds() {
  stop_proc(mds_pid_);
  return Status::OK();
}

Status LocalCluster::start_ods(int i) {
  std::string bin = build_ + "/ods/surge-ods";
  std::string name = "ods" + std::to_string(i);
  fs::create_directories(ods_dir(i));
  std::vector<std::string> argv = {bin, "--data-dir", ods_dir(i), "--listen", addr(ods_ports_[i]),
                                   "--mds", mds_address(), "--cluster-key-file", key_file_,
                                   "--log-level", "info", "--pool-1m-buffers", "16"};
  argv.insert(argv.end(), {"--forward-timeout-ms", std::to_string(forward_timeout())});
  if (cfg_.ods_worker_threads > 0) {
    argv.insert(argv.end(), {"--worker-threads", std::to_string(cfg_.ods_worker_threads)});
  }
  if (ods_metrics_ports_[i] != 0) {
    argv.insert(argv.end(), {"--metrics-listen", metrics_addr(ods_metrics_ports_[i])});
  }
  argv.insert(argv.end(), cfg_.ods_args.begin(), cfg_.ods_args.end());
  SURGE_ASSIGN_OR_RETURN(ods_pids_[i], spawn(name, argv));
  // A restart after a SIGKILL first re-checks every object written but not
  // synced (thousands after a stress run's writes: 15 s at load 15), so
  // the wait is long; a start that still times out is killed, or a caller
  // that starts it again would race it for the data dir's locks.
  Status st = wait_port(name, ods_pids_[i], ods_ports_[i], scaled(60000));
  if (!st.ok()) stop_proc(ods_pids_[i]);
  return st;
}

std::string LocalCluster::ods_address(int i) const { return addr(ods_ports_[static_cast<size_t>(i)]); }

Status LocalCluster::add_ods(int* index) {
  const int i = static_cast<int>(ods_ports_.size());
  ods_ports_.push_back(free_port());
  ods_metrics_ports_.push_back(cfg_.metrics ? free_port() : 0);
  ods_pids_.push_back(-1);
  SURGE_RETURN_IF_ERROR(start_ods(i));
  *index = i;
  return wait_targets_up(i + 1, scaled(15000));
}

Status LocalCluster::kill_ods(int i) {
  stop_proc(ods_pids_[i]);
  return Status::OK();
}

Result<std::unique_ptr<Client>> LocalCluster::connect(int io_timeout_ms) const {
  return Client::Connect(client_options(io_timeout_ms));
}

ClientOptions LocalCluster::client_options(int io_timeout_ms) const {
  ClientOptions o;
  o.mds_address = mds_address();
  o.cluster_key_file = key_file_;
  o.io_timeout = std::chrono::milliseconds(io_timeout_ms);
  o.mds_timeout = std::chrono::milliseconds(20000);
  o.pool_buffers = 8;
  o.transport = transport();
  return o;
}

Status LocalCluster::wait_targets_up(int n, int timeout_ms) {
  SURGE_ASSIGN_OR_RETURN(auto c, connect());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    auto cs = c->cluster_status();
    if (cs.ok()) {
      int up = 0;
      for (const auto& t : cs->targets) up += t.state == "up";
      if (up >= n) return Status::OK();
      last = std::to_string(up) + " of " + std::to_string(cs->targets.size()) + " up";
    } else {
      last = cs.status().ToString();
    }
    std::this_thread::sleep_for(50ms);
  }
  // Name a data server that is gone, with its log: its port may have been
  // open only because something else held it.
  std::string gone;
  for (size_t i = 0; i < ods_pids_.size(); ++i) {
    int st = 0;
    if (ods_pids_[i] > 0 && waitpid(ods_pids_[i], &st, WNOHANG) == ods_pids_[i]) {
      ods_pids_[i] = -1;
      const std::string name = "ods" + std::to_string(i);
      gone += "; " + name + " exited (status " + std::to_string(st) + "), log:\n" + log_tail(name);
    }
  }
  return Status::TimedOut("data servers not up after " + std::to_string(timeout_ms) + " ms (" +
                          last + ")" + gone);
}

Result<std::unique_ptr<LocalCluster>> LocalCluster::Start(const ClusterConfig& cfg) {
  std::unique_ptr<LocalCluster> c(new LocalCluster());
  c->cfg_ = cfg;
  const char* b = std::getenv("SURGE_BUILD_DIR");
  if (b == nullptr) return Status::InvalidArgument("SURGE_BUILD_DIR is not set");
  c->build_ = b;
  std::string tmpl = test_tmpdir() + "/surge-client-test-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return Status::FromErrno(errno, "mkdtemp " + tmpl);
  c->dir_ = tmpl;
  // Searchable by everyone: mounts live below it and tests run as nobody.
  chmod(c->dir_.c_str(), 0755);
  fs::create_directories(c->dir_ + "/logs");
  fs::create_directories(c->dir_ + "/mds");
  c->key_file_ = c->dir_ + "/cluster.key";
  SURGE_RETURN_IF_ERROR(net::generate_cluster_key(c->key_file_));
  c->mds_port_ = free_port();
  for (int i = 0; i < cfg.ods_count; ++i) c->ods_ports_.push_back(free_port());
  if (cfg.metrics) c->mds_metrics_port_ = free_port();
  for (int i = 0; i < cfg.ods_count; ++i) {
    c->ods_metrics_ports_.push_back(cfg.metrics ? free_port() : 0);
  }
  c->ods_pids_.assign(static_cast<size_t>(cfg.ods_count), -1);
  SURGE_RETURN_IF_ERROR(c->start_mds());
  for (int i = 0; i < cfg.ods_count; ++i) SURGE_RETURN_IF_ERROR(c->start_ods(i));
  SURGE_RETURN_IF_ERROR(c->wait_targets_up(cfg.ods_count, scaled(15000)));
  if (cfg.stripe_size != 0) {
    SURGE_ASSIGN_OR_RETURN(auto cl, c->connect());
    SURGE_RETURN_IF_ERROR(
        cl->set_dir_layout(Client::kRootIno, cfg.stripe_size, cfg.stripe_count, Caller{}));
  }
  return c;
}

Result<std::string> LocalCluster::mount(const std::string& name, const std::string& extra_opts) {
  std::string mp = dir_ + "/" + name;
  fs::create_directories(mp);
  std::string opts = "key_file=" + key_file_ + ",allow_other,auto_unmount,io_timeout_ms=" +
                     cfg_.client_io_timeout_ms + ",transport=" + transport();
  if (!extra_opts.empty()) opts += "," + extra_opts;
  std::string bin = build_ + "/client/fuse/surge-fuse";
  std::string log = "fuse-" + name;
  SURGE_ASSIGN_OR_RETURN(pid_t pid, spawn(log, {bin, "-f", "-o", opts, mds_address(), mp}));
  mounts_.push_back(Mount{mp, pid});
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(scaled(15000));
  while (std::chrono::steady_clock::now() < deadline) {
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      mounts_.back().pid = -1;
      return Status::Internal("surge-fuse exited before mounting " + mp + "; log:\n" +
                              log_tail(log));
    }
    if (is_mounted(mp)) return mp;
    std::this_thread::sleep_for(20ms);
  }
  return Status::TimedOut("mount " + mp + " did not appear; log:\n" + log_tail(log));
}

pid_t LocalCluster::mount_pid(const std::string& mountpoint) const {
  for (const auto& m : mounts_) {
    if (m.path == mountpoint) return m.pid;
  }
  return -1;
}

Status LocalCluster::unmount(const std::string& mountpoint_ref) {
  // A copy: the caller's string may be the very Mount erased below.
  const std::string mountpoint = mountpoint_ref;
  for (auto it = mounts_.begin(); it != mounts_.end(); ++it) {
    if (it->path != mountpoint) continue;
    int rc = sh("umount " + mountpoint + " 2>&1");
    if (rc != 0) sh("umount -l " + mountpoint + " 2>&1");
    // The daemon ends its loop when the kernel unmounts.
    auto deadline = std::chrono::steady_clock::now() + 10s;
    bool exited = false;
    while (it->pid > 0 && std::chrono::steady_clock::now() < deadline) {
      if (waitpid(it->pid, nullptr, WNOHANG) == it->pid) {
        exited = true;
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
    if (!exited) stop_proc(it->pid);
    mounts_.erase(it);
    if (rc != 0) return Status::Busy("umount " + mountpoint + " failed; lazily unmounted");
    if (!exited) return Status::TimedOut("surge-fuse for " + mountpoint + " did not exit");
    return Status::OK();
  }
  return Status::NotFound("no mount at " + mountpoint);
}

LocalCluster::~LocalCluster() {
  while (!mounts_.empty()) (void)unmount(mounts_.back().path);
  for (auto& p : ods_pids_) stop_proc(p);
  stop_proc(mds_pid_);
  if (std::getenv("SURGE_KEEP_TEST_DIR") == nullptr && !dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

std::string random_bytes(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  std::mt19937_64 rng(seed);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = rng();
    std::memcpy(&s[i], &v, 8);
  }
  for (; i < n; ++i) s[i] = static_cast<char>(rng());
  return s;
}

Status write_file(const std::string& path, const std::string& data) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return Status::FromErrno(errno, "open " + path);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      int e = errno;
      close(fd);
      return Status::FromErrno(e, "write " + path);
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0) return Status::FromErrno(errno, "close " + path);
  return Status::OK();
}

Result<std::string> read_file(const std::string& path, size_t chunk) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return Status::FromErrno(errno, "open " + path);
  std::string out;
  std::vector<char> buf(chunk);
  for (;;) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0) {
      int e = errno;
      close(fd);
      return Status::FromErrno(e, "read " + path);
    }
    if (n == 0) break;
    out.append(buf.data(), static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

bool stop_process(pid_t pid) {
  if (kill(pid, SIGSTOP) != 0) return false;
  // Up to 5 s: every thread of a busy process must reach the stop, and the
  // host may be loaded.
  for (int i = 0; i < 2500; ++i) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(in, line);
    auto rp = line.rfind(')');
    if (rp != std::string::npos && rp + 2 < line.size() && line[rp + 2] == 'T') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

int sh(const std::string& cmd, std::string* out) {
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) {
    if (out != nullptr) out->append(buf, n);
  }
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace surge::test
