// One 3-member etcd cluster shared by every test of a process (started on
// first use, SIGKILLed at exit), and a fresh key prefix per store so tests
// never see each other's keys. A cluster that cannot start fails the test
// that asked for it, with etcd's log path.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>

#include "tests/common/etcd_cluster.h"

namespace surge::test {

struct SharedEtcd {
  std::string dir;
  std::unique_ptr<EtcdCluster> cluster;
  Status started;
};

inline SharedEtcd*& shared_etcd_slot() {
  static SharedEtcd* s = nullptr;
  return s;
}

inline SharedEtcd& shared_etcd(uint32_t max_txn_ops = 128) {
  static SharedEtcd* s = [max_txn_ops] {
    auto* e = new SharedEtcd;
    char tmpl[] = "/tmp/surge-etcd-test-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      e->started = Status::IOError("etcd test cluster: mkdtemp under /tmp failed");
      return e;
    }
    e->dir = tmpl;
    EtcdClusterOptions o;
    o.dir = e->dir;
    o.max_txn_ops = max_txn_ops;
    e->cluster = std::make_unique<EtcdCluster>(o);
    e->started = e->cluster->start();
    // Members die with the test process; their data dirs go with them.
    shared_etcd_slot() = e;
    std::atexit([] {
      SharedEtcd* x = shared_etcd_slot();
      x->cluster.reset();
      std::error_code ec;
      std::filesystem::remove_all(x->dir, ec);
    });
    return e;
  }();
  return *s;
}

// Whether this process's MDS tests keep the namespace on etcd rather than
// RocksDB: SURGE_TEST_KV=etcd, set by ctest for the *_etcd_test
// registrations of a suite (tests/mds/CMakeLists.txt), so one binary runs
// the same tests against both backends.
inline bool test_kv_is_etcd() {
  const char* v = ::getenv("SURGE_TEST_KV");
  return v != nullptr && std::string(v) == "etcd";
}

inline std::string fresh_etcd_prefix() {
  static std::atomic<int> n{0};
  return "surge-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + "/";
}

}  // namespace surge::test
