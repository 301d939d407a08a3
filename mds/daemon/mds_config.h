// MdsConfig: every setting of surge-mds with its default. Read in order:
// these defaults, the TOML file (--config), then command-line flags.
// mds_config_table() declares each setting once (key, flag, range, note);
// the file, the flags, the checks and mds/surge-mds.toml (the output of
// surge-mds --print-config) come from it. A new setting is a member here
// and a row there. All settings are read at start; none change at run
// time.
#pragma once

#include <cstdint>
#include <string>

#include "common/config/config_table.h"
#include "common/status.h"

namespace surge::mds {

struct MdsConfig {
  // [server]
  std::string data_dir = "/var/lib/surge/mds";
  std::string listen = "tcp://127.0.0.1:7100";
  std::string cluster_key_file = "/etc/surge/cluster.key";
  std::string expect_fs_id;    // hex; empty: whatever the data dir holds
  std::string metrics_listen;  // "HOST:PORT" of the Prometheus endpoint; empty: off
  int io_threads = 2;
  int worker_threads = 8;
  uint32_t credits_per_connection = 128;
  uint32_t handshake_timeout_ms = 5000;
  uint32_t max_unauthenticated_connections = 256;  // 0: no limit
  uint32_t max_unauthenticated_per_address = 32;   // 0: no limit
  // [store]
  std::string backend = "rocksdb";  // "rocksdb" (in data_dir) or "etcd"
  std::string etcd_endpoints;       // "host:port,host:port,..." (backend etcd)
  std::string etcd_prefix = "surge/";
  uint32_t etcd_deadline_ms = 5000;
  uint32_t etcd_election_wait_ms = 5000;
  uint32_t etcd_max_txn_ops = 128;
  uint64_t etcd_max_request_bytes = 1536 * 1024;
  uint32_t etcd_leader_ttl_s = 6;  // the leader's lease (kv/etcd/etcd_leader.h)
  bool sync = true;
  uint64_t block_cache_mb = 64;
  uint64_t memtable_mb = 32;
  // [namespace]
  uint32_t default_stripe_size = 1 << 20;
  uint32_t default_stripe_count = 4;
  uint32_t readdir_max_entries = 4096;
  uint32_t default_replicas = 2;  // 0: format 1 layouts (docs/redundancy.md, "Rollout")
  uint32_t dir_lease_ms = 200;    // 0: no directory leases (docs/metadata-path.md)
  // [targets]
  uint32_t target_heartbeat_interval_ms = 1000;
  uint32_t target_timeout_ms = 10000;
  uint32_t target_rpc_timeout_ms = 10000;
  uint64_t target_min_free_bytes = 256ull << 20;
  // [chains]
  uint32_t chain_strides = 4;
  uint32_t chain_failure_probe_ms = 500;
  uint64_t chain_replace_after_ms = 600000;
  uint32_t chain_rebalance_max_moves = 4;
  // [sessions]
  uint32_t session_heartbeat_interval_ms = 2000;
  uint32_t session_timeout_ms = 30000;
  // [orphans]
  uint32_t orphan_interval_ms = 1000;
  uint32_t orphan_startup_grace_ms = 30000;
  // [memory]
  uint32_t malloc_arena_max = 2;           // 0: glibc's default
  uint32_t malloc_mmap_threshold_kb = 128;  // 0: glibc's rising threshold
  // [log]
  std::string log_level = "info";
  std::string log_file;
};

// The table of every setting, in the order of the sample file.
const config::ConfigTable<MdsConfig>& mds_config_table();

// Reads a TOML file over the defaults in cfg. Unknown keys and wrong types
// are errors naming the file and key (a typo must not leave a default).
Status load_config_file(const std::string& path, MdsConfig& cfg);

// Checks the table's ranges, then the relations between settings.
Status validate_config(const MdsConfig& cfg);

}  // namespace surge::mds
