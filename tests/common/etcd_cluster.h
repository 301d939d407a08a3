// A real 3-member etcd cluster on loopback for tests: free ports, data dirs
// under the test's tmp dir, fsync on (no --unsafe-no-fsync: the tests judge
// durability). start() waits until a quorum answers; kill(i) SIGKILLs a
// member and restart(i) brings it back on its ports and data dir. A missing
// etcd binary is an error, never a skip (install-deps installs etcd-server).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace surge::test {

struct EtcdClusterOptions {
  std::string dir;               // data dirs and logs go here (must exist)
  int members = 3;
  uint32_t max_txn_ops = 128;    // etcd's --max-txn-ops (its default)
};

class EtcdCluster {
 public:
  explicit EtcdCluster(EtcdClusterOptions o);
  ~EtcdCluster();  // SIGKILLs every member left running
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  [[nodiscard]] Status start();
  [[nodiscard]] Status kill(int i);     // SIGKILL, reaped
  [[nodiscard]] Status restart(int i);  // same name, ports and data dir
  // Waits until a linearizable read through member i succeeds (it has a
  // leader and a quorum) or timeout_ms passes.
  [[nodiscard]] Status wait_healthy(int i, int timeout_ms = 30000);

  // host:port of every member's client URL, and of member i.
  std::vector<std::string> endpoints() const;
  std::string endpoint(int i) const;
  bool running(int i) const { return members_[i].pid > 0; }
  std::string log_path(int i) const;

 private:
  struct Member {
    uint16_t client_port = 0;
    uint16_t peer_port = 0;
    pid_t pid = -1;
  };
  Status spawn(int i);
  EtcdClusterOptions o_;
  std::string token_;
  std::vector<Member> members_;
};

}  // namespace surge::test
