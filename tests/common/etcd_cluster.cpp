#include "tests/common/etcd_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "mds/kv/etcd/etcd_kv_store.h"
#include "tests/common/loopback.h"

namespace surge::test {

namespace {

// etcd from PATH or Debian's /usr/bin; "" when neither has it.
std::string etcd_binary() {
  if (const char* path = ::getenv("PATH")) {
    std::string p(path);
    size_t pos = 0;
    while (pos <= p.size()) {
      size_t end = p.find(':', pos);
      if (end == std::string::npos) end = p.size();
      std::string cand = p.substr(pos, end - pos) + "/etcd";
      if (::access(cand.c_str(), X_OK) == 0) return cand;
      pos = end + 1;
    }
  }
  return ::access("/usr/bin/etcd", X_OK) == 0 ? "/usr/bin/etcd" : "";
}

}  // namespace

EtcdCluster::EtcdCluster(EtcdClusterOptions o) : o_(std::move(o)), members_(o_.members) {
  token_ = "surge-test-" + std::to_string(::getpid()) + "-" +
           std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  for (auto& m : members_) {
    m.client_port = free_port();
    m.peer_port = free_port();
  }
}

EtcdCluster::~EtcdCluster() {
  for (int i = 0; i < static_cast<int>(members_.size()); i++) (void)kill(i);
}

std::string EtcdCluster::endpoint(int i) const {
  return "127.0.0.1:" + std::to_string(members_[i].client_port);
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (int i = 0; i < static_cast<int>(members_.size()); i++) out.push_back(endpoint(i));
  return out;
}

std::string EtcdCluster::log_path(int i) const {
  return o_.dir + "/etcd-m" + std::to_string(i) + ".log";
}

Status EtcdCluster::spawn(int i) {
  const std::string bin = etcd_binary();
  if (bin.empty())
    return Status::NotFound("etcd test cluster: no etcd binary on PATH or in /usr/bin (install Debian's etcd-server: "
                            "scripts/install-deps.sh)");
  std::string cluster;
  for (int j = 0; j < static_cast<int>(members_.size()); j++) {
    if (j) cluster += ",";
    cluster += "m" + std::to_string(j) + "=http://127.0.0.1:" + std::to_string(members_[j].peer_port);
  }
  const Member& m = members_[i];
  const std::string name = "m" + std::to_string(i);
  const std::string client = "http://127.0.0.1:" + std::to_string(m.client_port);
  const std::string peer = "http://127.0.0.1:" + std::to_string(m.peer_port);
  std::vector<std::string> args = {bin,
                                   "--name", name,
                                   "--data-dir", o_.dir + "/etcd-" + name,
                                   "--listen-client-urls", client,
                                   "--advertise-client-urls", client,
                                   "--listen-peer-urls", peer,
                                   "--initial-advertise-peer-urls", peer,
                                   "--initial-cluster", cluster,
                                   "--initial-cluster-token", token_,
                                   "--initial-cluster-state", "new",
                                   "--max-txn-ops", std::to_string(o_.max_txn_ops),
                                   "--log-outputs", "stderr"};
  const std::string log = log_path(i);
  pid_t pid = ::fork();
  if (pid < 0) return Status::FromErrno(errno, "etcd test cluster: fork for member " + name);
  if (pid == 0) {
    // A test binary that crashes or is killed by ctest's timeout must not
    // leave members running (they would hold ports and disk for the rest
    // of the run): they die with it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  members_[i].pid = pid;
  return Status::OK();
}

Status EtcdCluster::start() {
  for (int i = 0; i < static_cast<int>(members_.size()); i++) SURGE_RETURN_IF_ERROR(spawn(i));
  for (int i = 0; i < static_cast<int>(members_.size()); i++) SURGE_RETURN_IF_ERROR(wait_healthy(i));
  return Status::OK();
}

Status EtcdCluster::kill(int i) {
  pid_t pid = members_[i].pid;
  if (pid <= 0) return Status::OK();
  ::kill(pid, SIGKILL);
  int st = 0;
  ::waitpid(pid, &st, 0);
  members_[i].pid = -1;
  return Status::OK();
}

Status EtcdCluster::restart(int i) {
  SURGE_RETURN_IF_ERROR(kill(i));
  return spawn(i);
}

Status EtcdCluster::wait_healthy(int i, int timeout_ms) {
  mds::EtcdKvOptions ko;
  ko.endpoints = {endpoint(i)};
  ko.prefix = "surge-test-health/";
  ko.deadline = std::chrono::milliseconds(1000);
  auto kv = mds::EtcdKvStore::Open(ko);
  if (!kv.ok()) return kv.status();
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  Status last;
  while (std::chrono::steady_clock::now() < until) {
    if (members_[i].pid > 0) {
      int st = 0;
      if (::waitpid(members_[i].pid, &st, WNOHANG) == members_[i].pid) {
        members_[i].pid = -1;
        return Status::Unavailable("etcd test cluster: member m" + std::to_string(i) + " at " + endpoint(i) +
                                   " exited at start; see " + log_path(i));
      }
    }
    auto r = (*kv)->get(mds::Space::kSystem, "health");
    if (r.ok()) return Status::OK();
    last = r.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Status::TimedOut("etcd test cluster: member m" + std::to_string(i) + " not healthy within " +
                          std::to_string(timeout_ms) + " ms (" + last.ToString() + "); see " + log_path(i));
}

}  // namespace surge::test
