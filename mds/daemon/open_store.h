// Opens the namespace's store the configuration names (store.backend): the
// RocksDB data dir (data_dir.h) or an etcd cluster under a key prefix. Both
// format a new file system on first use and refuse one whose id differs
// from server.expect_fs_id.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "mds/cluster/leadership.h"
#include "mds/daemon/mds_config.h"
#include "mds/kv/kv_store.h"

namespace surge::mds {

class RocksKvStore;

struct OpenedStore {
  std::unique_ptr<KvStore> kv;
  RocksKvStore* rocks = nullptr;  // kv when the backend is RocksDB (metrics, close)
  uint64_t fs_id = 0;
  bool formatted = false;  // a new file system was made now
  std::string where;       // "data dir /x" or "etcd a:1,b:2 prefix surge/", for logs
  // Who runs the work that must run once: always this MDS on RocksDB, the
  // one elected by an etcd lease on etcd (not started: begin()).
  std::unique_ptr<Leadership> leadership;
};

// allow_format false (--check): a store without a file system is NotFound.
Result<OpenedStore> open_store(const MdsConfig& cfg, bool allow_format);

}  // namespace surge::mds
