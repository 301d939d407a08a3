// surge-mds settings: the field table (common/config/config_table.h) that
// the TOML file, the flags, the range checks and mds/surge-mds.toml all
// come from, and the relations between settings.
#include "mds/daemon/mds_config.h"

#include "mds/namespace/dir_lease.h"

namespace surge::mds {

using config::Field;
using F = Field<MdsConfig>;

const config::ConfigTable<MdsConfig>& mds_config_table() {
  static const config::ConfigTable<MdsConfig> table(
      "# surge-mds: the metadata server. Every setting is listed at its default\n"
      "# (surge-mds --print-config writes this file).\n",
      {
          F{{"server", "data_dir",
             "The metadata store: <data_dir>/FSID (the file system id, hex) and\n"
             "<data_dir>/db (RocksDB). An empty or missing dir is formatted as a new\n"
             "file system on first start; a dir of another file system is refused.",
             "--data-dir", 1},
            &MdsConfig::data_dir},
          F{{"server", "listen",
             "Address to serve on: \"tcp://HOST:PORT\" or \"rdma://HOST:PORT\"; port 0 picks one.",
             "--listen", 1},
            &MdsConfig::listen},
          F{{"server", "cluster_key_file",
             "Shared secret of the cluster; connections prove they know it.", "--cluster-key-file",
             1},
            &MdsConfig::cluster_key_file},
          F{{"server", "expect_fs_id",
             "Refuse to start unless the data dir holds this file system (hex id);\n"
             "\"\" accepts whatever the data dir holds (and formats a new one)."},
            &MdsConfig::expect_fs_id},
          F{{"server", "metrics_listen",
             "Prometheus endpoint, \"HOST:PORT\" (GET /metrics): requests, errors and\n"
             "latency by method, sessions, inodes, dentries, targets by state, WAL\n"
             "syncs. \"\" turns it off (the default).",
             "--metrics-listen"},
            &MdsConfig::metrics_listen},
          F{{"server", "io_threads", "Transport threads (sockets / completion queues).",
             "--io-threads", 1},
            &MdsConfig::io_threads},
          F{{"server", "worker_threads",
             "Threads that run metadata requests. Concurrent requests share WAL syncs\n"
             "(group commit), so more workers mean more operations per fsync.",
             "--worker-threads", 1},
            &MdsConfig::worker_threads},
          F{{"server", "credits_per_connection", "Requests one connection may have in flight."},
            &MdsConfig::credits_per_connection},
          F{{"server", "handshake_timeout_ms",
             "A connection that has not proven the cluster key within this many ms is\n"
             "closed. Until then its frames may be handshake-sized only."},
            &MdsConfig::handshake_timeout_ms},
          F{{"server", "max_unauthenticated_connections",
             "Connections still in the handshake, in total and from one peer address\n"
             "(0: no limit). One more is refused at once; these bound what peers that\n"
             "never prove the key can make this server hold."},
            &MdsConfig::max_unauthenticated_connections},
          F{{"server", "max_unauthenticated_per_address", ""},
            &MdsConfig::max_unauthenticated_per_address},
          F{{"store", "backend",
             "Where the namespace lives: \"rocksdb\" (an embedded RocksDB in\n"
             "server.data_dir) or \"etcd\" (an etcd v3 cluster, store.etcd_endpoints;\n"
             "Raft-replicated, so the namespace survives the loss of this host; see\n"
             "mds/kv/etcd/README.md). With etcd, server.data_dir is not used.",
             "--backend", 1},
            &MdsConfig::backend},
          F{{"store", "etcd_endpoints",
             "The etcd members' client addresses, \"host:port,host:port,...\"; a call\n"
             "that finds one down or without quorum tries the next.",
             "--etcd-endpoints"},
            &MdsConfig::etcd_endpoints},
          F{{"store", "etcd_prefix",
             "Prefix of every key this file system keeps in etcd (several file systems\n"
             "can share one etcd cluster under different prefixes).",
             "--etcd-prefix", 1},
            &MdsConfig::etcd_prefix},
          F{{"store", "etcd_deadline_ms", "Deadline of one call to an etcd member, in ms.", "", 1},
            &MdsConfig::etcd_deadline_ms},
          F{{"store", "etcd_election_wait_ms",
             "How long a call that reached etcd members that could not commit it (no\n"
             "leader: an election) is tried again over every member, in ms, before it\n"
             "fails: one member down stays invisible even when it was the leader.",
             "", 0},
            &MdsConfig::etcd_election_wait_ms},
          F{{"store", "etcd_max_txn_ops",
             "The members' --max-txn-ops and --max-request-bytes (etcd's defaults): a\n"
             "namespace change over either fails with an error naming the limit, never\n"
             "split into several transactions. Raise them here and on every member\n"
             "together.",
             "", 1},
            &MdsConfig::etcd_max_txn_ops},
          F{{"store", "etcd_max_request_bytes", "", "", 1}, &MdsConfig::etcd_max_request_bytes},
          F{{"store", "etcd_leader_ttl_s",
             "(etcd) Several MDS on one prefix elect one leader, which runs failure\n"
             "detection, chain changes and orphan collection, with an etcd lease of\n"
             "this many seconds: when the leader dies, another takes over within about\n"
             "this long (at once when it stops cleanly).",
             "", 2, 3600},
            &MdsConfig::etcd_leader_ttl_s},
          F{{"store", "sync",
             "(rocksdb) Sync the RocksDB write-ahead log before replying (a reply means durable).\n"
             "false is for benchmarks of the ceiling only: acknowledged changes can be\n"
             "lost on a crash."},
            &MdsConfig::sync},
          F{{"store", "block_cache_mb", "RocksDB block cache, in MiB."},
            &MdsConfig::block_cache_mb},
          F{{"store", "memtable_mb",
             "Every RocksDB memtable together (unflushed writes and the flushed ones\n"
             "kept for conflict checks), in MiB (docs/operations.md, \"MDS memory\").",
             "", 0, 1u << 20},
            &MdsConfig::memtable_mb},
          F{{"namespace", "default_stripe_size",
             "Layout of new files unless their directory sets another (surgectl\n"
             "setstripe): stripe size in bytes (a multiple of 64 KiB) and stripe count\n"
             "(clamped to the number of data servers that are up).",
             "", 64u << 10},
            &MdsConfig::default_stripe_size},
          F{{"namespace", "default_stripe_count", "", "", 1}, &MdsConfig::default_stripe_count},
          F{{"namespace", "readdir_max_entries", "Most entries one readdir page returns.", "", 1},
            &MdsConfig::readdir_max_entries},
          F{{"namespace", "default_replicas",
             "Copies of each file whose directory sets no redundancy (surgectl\n"
             "setstripe --replicas N): files then live on chains of that many data\n"
             "servers and survive the loss of N - 1 of them (docs/redundancy.md).\n"
             "Clamped to the number of data servers. 0: one copy on plain targets\n"
             "(layout format 1, as before chains). docs/redundancy.md argues for the\n"
             "shipped 2."},
            &MdsConfig::default_replicas},
          F{{"namespace", "dir_lease_ms",
             "A directory made by a client is leased to it for this long, renewed by\n"
             "each name it adds: it answers lookups of missing names there itself, and\n"
             "another client's first addition waits until the lease runs out\n"
             "(docs/metadata-path.md, \"Directory leases\"). 0: no leases.",
             "", 0, dir_lease::kMaxTermMs},
            &MdsConfig::dir_lease_ms},
          F{{"targets", "heartbeat_interval_ms",
             "How often data servers heartbeat (told to them at registration), in ms."},
            &MdsConfig::target_heartbeat_interval_ms},
          F{{"targets", "timeout_ms",
             "A data server silent this long is marked down: no new layouts, and the\n"
             "cluster map version bumps."},
            &MdsConfig::target_timeout_ms},
          F{{"targets", "rpc_timeout_ms",
             "Deadline of one call to a data server (truncate, object removal), in ms."},
            &MdsConfig::target_rpc_timeout_ms},
          F{{"targets", "min_free_bytes",
             "A data server with less free space than this is full: new files and\n"
             "chain replacements are not placed on it."},
            &MdsConfig::target_min_free_bytes},
          F{{"chains", "strides",
             "Chains formed per data server for each replication width (more: a lost\n"
             "server's data is rebuilt from and onto more servers; the table grows).",
             "", 1},
            &MdsConfig::chain_strides},
          F{{"chains", "failure_probe_ms",
             "A client reports a data server it cannot reach; the MDS checks it itself\n"
             "within this many ms and, if it does not answer, takes it out of its\n"
             "chains at once instead of waiting for targets.timeout_ms.",
             "", 1},
            &MdsConfig::chain_failure_probe_ms},
          F{{"chains", "replace_after_ms",
             "A data server out of a chain this long is replaced in that chain by\n"
             "another, which is rebuilt from the surviving members (10 minutes: long\n"
             "enough for a reboot)."},
            &MdsConfig::chain_replace_after_ms},
          F{{"chains", "rebalance_max_moves",
             "Most chain membership moves one rebalance (surgectl rebalance) starts and\n"
             "keeps in flight at once, each a newcomer syncing at a chain's tail;\n"
             "surgectl rebalance --max-moves N overrides it for one call.",
             "", 1},
            &MdsConfig::chain_rebalance_max_moves},
          F{{"sessions", "heartbeat_interval_ms",
             "How often clients heartbeat their session (told to them), in ms."},
            &MdsConfig::session_heartbeat_interval_ms},
          F{{"sessions", "timeout_ms",
             "A client session silent this long expires; its open files are released."},
            &MdsConfig::session_timeout_ms},
          F{{"orphans", "interval_ms",
             "Pause between passes of the collector that removes unlinked files'\n"
             "objects from the data servers, in ms.",
             "", 1},
            &MdsConfig::orphan_interval_ms},
          F{{"orphans", "startup_grace_ms",
             "No collection this long after start, so clients can reopen their sessions\n"
             "and report their open files after an MDS restart (>= sessions.timeout_ms\n"
             "is safe), in ms. One MDS on RocksDB only: on etcd sessions and open files\n"
             "are in the store and outlive any MDS, so nothing is waited."},
            &MdsConfig::orphan_startup_grace_ms},
          F{{"memory", "malloc_arena_max",
             "glibc allocator: most arenas (0: glibc's 8 per core). Each arena keeps\n"
             "what was freed in it; with one per request thread the MDS's RSS rose for\n"
             "half an hour over a flat live heap (docs/operations.md, \"MDS memory\").",
             "", 0, 1024},
            &MdsConfig::malloc_arena_max},
          F{{"memory", "malloc_mmap_threshold_kb",
             "glibc allocator: blocks this large or larger are mmapped, so freeing them\n"
             "returns them to the system; set, glibc no longer raises it (0: glibc's\n"
             "own rising threshold). At most 32768 (glibc's limit).",
             "", 0, 32768},
            &MdsConfig::malloc_mmap_threshold_kb},
          F{{"log", "level", "trace, debug, info, warn, error or off.", "--log-level"},
            &MdsConfig::log_level},
          F{{"log", "file", "Log file; \"\" logs to stderr.", "--log-file"}, &MdsConfig::log_file},
      });
  return table;
}

Status load_config_file(const std::string& path, MdsConfig& c) {
  return mds_config_table().load_file(path, c);
}

Status validate_config(const MdsConfig& c) {
  SURGE_RETURN_IF_ERROR(mds_config_table().check(c));
  if (!c.expect_fs_id.empty() &&
      c.expect_fs_id.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
    return Status::InvalidArgument("server.expect_fs_id '" + c.expect_fs_id + "' is not hex");
  }
  if (c.backend != "rocksdb" && c.backend != "etcd") {
    return Status::InvalidArgument("store.backend '" + c.backend + "' is neither \"rocksdb\" nor \"etcd\"");
  }
  if (c.backend == "etcd" && c.etcd_endpoints.empty()) {
    return Status::InvalidArgument("store.backend is \"etcd\" but store.etcd_endpoints is empty");
  }
  if (c.default_stripe_size % (64u << 10) != 0) {
    return Status::InvalidArgument("namespace.default_stripe_size must be a multiple of 64 KiB");
  }
  if (c.target_timeout_ms <= c.target_heartbeat_interval_ms) {
    return Status::InvalidArgument("targets.timeout_ms must exceed targets.heartbeat_interval_ms");
  }
  if (c.session_timeout_ms <= c.session_heartbeat_interval_ms) {
    return Status::InvalidArgument(
        "sessions.timeout_ms must exceed sessions.heartbeat_interval_ms");
  }
  return Status::OK();
}

}  // namespace surge::mds
