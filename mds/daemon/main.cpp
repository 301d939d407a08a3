// surge-mds: the metadata server daemon.
//
//   surge-mds --config /etc/surge/surge-mds.toml [--listen tcp://H:P] ...
//   surge-mds --check --data-dir DIR      (namespace checker; exit 1 on problems)
//   surge-mds --print-config              (every setting at its default: mds/surge-mds.toml)
//
// Start order (the process scaffolding is common/daemon/daemon_process.h,
// the settings common/config/config_table.h): settings (defaults, file,
// flags), logging, the store (store.backend: the RocksDB data dir or etcd; format
// or open), cluster map, namespace, RPC server, background collector; then
// one line on stdout, "surge-mds listening on tcp://H:P fs FSID", which
// scripts and tests wait for. SIGTERM/SIGINT stop it cleanly: the server
// stops taking requests, the collector stops, RocksDB flushes and closes.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "common/daemon/daemon_process.h"
#include "common/daemon/malloc_bounds.h"
#include "common/log.h"
#include "mds/cluster/cluster_map.h"
#include "mds/cluster/leadership.h"
#include "mds/cluster/orphan_collector.h"
#include "mds/cluster/session_table.h"
#include "mds/daemon/data_dir.h"
#include "mds/daemon/mds_config.h"
#include "mds/daemon/open_store.h"
#include "mds/daemon/rpc_object_targets.h"
#include "mds/kv/rocksdb_kv_store.h"
#include "mds/namespace/checker.h"
#include "mds/namespace/namespace.h"
#include "mds/service/mds_metrics.h"
#include "mds/service/mds_service.h"
#include "net/cluster_key.h"
#include "net/rpc_server.h"

namespace {

using namespace surge;
using namespace surge::mds;

int fail(const Status& st) {
  SLOG_ERROR("surge-mds: {}", st.ToString());
  std::fprintf(stderr, "surge-mds: %s\n", st.ToString().c_str());
  return 1;
}


int run_check(const MdsConfig& cfg) {
  auto st = open_store(cfg, /*allow_format=*/false);
  if (!st.ok()) {
    std::fprintf(stderr, "surge-mds --check: %s\n", st.status().ToString().c_str());
    return 2;
  }
  auto rep = check_namespace(st->kv.get());
  if (!rep.ok()) {
    std::fprintf(stderr, "surge-mds --check: %s\n", rep.status().ToString().c_str());
    return 2;
  }
  for (const auto& p : rep->problems) std::printf("problem: %s\n", p.c_str());
  std::printf("surge-mds --check %s: %s\n",
              cfg.backend == "etcd" ? st->where.c_str() : cfg.data_dir.c_str(), rep->summary().c_str());
  return rep->clean() ? 0 : 1;
}

int run(const MdsConfig& cfg) {
  auto key = net::load_cluster_key(cfg.cluster_key_file);
  if (!key.ok()) return fail(key.status());

  auto dd = open_store(cfg, /*allow_format=*/true);
  if (!dd.ok()) return fail(dd.status());
  if (!cfg.sync && dd->rocks) SLOG_WARN("store.sync = false: acknowledged changes can be lost on a crash");

  ClusterMapOptions mopts;
  mopts.heartbeat_interval_ms = cfg.target_heartbeat_interval_ms;
  mopts.target_timeout_ms = cfg.target_timeout_ms;
  mopts.min_free_bytes = cfg.target_min_free_bytes;
  mopts.chains.strides = cfg.chain_strides;
  mopts.chains.replace_after_ms = cfg.chain_replace_after_ms;
  mopts.chains.rebalance_max_moves = cfg.chain_rebalance_max_moves;
  auto map = ClusterMap::Load(dd->kv.get(), dd->fs_id, mopts);
  if (!map.ok()) return fail(map.status());

  SessionOptions sopts;
  sopts.heartbeat_interval_ms = cfg.session_heartbeat_interval_ms;
  sopts.session_timeout_ms = cfg.session_timeout_ms;
  // On etcd the sessions are shared by every MDS and outlive this one; one
  // MDS on RocksDB writes them unsynced and drops the last run's.
  SessionTable sessions(dd->kv.get(), sopts, /*survives_restart=*/dd->rocks == nullptr);
  if (dd->rocks != nullptr) {
    if (Status cs = sessions.clear_stored(); !cs.ok()) return fail(cs);
    // Until its clients have recorded their opens again (the orphan
    // collector's grace), a truncate treats every file as held open
    // elsewhere and is applied before its reply (namespace_truncate.cpp).
    sessions.opens_unknown_until(std::chrono::steady_clock::now() +
                                 std::chrono::milliseconds(cfg.orphan_startup_grace_ms));
  }
  RpcObjectTargets objects(*key, std::chrono::milliseconds(cfg.target_rpc_timeout_ms),
                           std::chrono::milliseconds(cfg.chain_failure_probe_ms));

  NamespaceOptions nopts;
  nopts.default_stripe_size = cfg.default_stripe_size;
  nopts.default_stripe_count = cfg.default_stripe_count;
  nopts.max_readdir_entries = cfg.readdir_max_entries;
  nopts.default_replicas = cfg.default_replicas;
  nopts.dir_lease_ms = cfg.dir_lease_ms;
  auto ns = Namespace::Open(dd->kv.get(), map->get(), &sessions, &objects, nopts);
  if (!ns.ok()) return fail(ns.status());

  net::ServerOptions sv;
  sv.listen = cfg.listen;
  sv.cluster_key = *key;
  sv.io_threads = cfg.io_threads;
  sv.worker_threads = cfg.worker_threads;
  sv.credits_per_connection = cfg.credits_per_connection;
  sv.handshake_timeout = std::chrono::milliseconds(cfg.handshake_timeout_ms);
  sv.max_unauthenticated_connections = cfg.max_unauthenticated_connections;
  sv.max_unauthenticated_per_address = cfg.max_unauthenticated_per_address;
  sv.pool.name = "mds";
  // Metadata moves no bulk data: a small pool.
  sv.pool.classes = {{4096, 64}, {64 * 1024, 16}};
  sv.pool.huge_pages = false;
  auto server = net::RpcServer::Create(sv);
  if (!server.ok()) return fail(server.status());
  MdsMetrics metrics;
  {
    MdsMetrics::Sources src;
    src.map = map->get();
    src.sessions = &sessions;
    src.kv = dd->kv.get();
    if (RocksKvStore* kv = dd->rocks) {  // RocksDB's own figures; etcd has its own /metrics
      src.wal_syncs = [kv] { return kv->wal_syncs(); };
      src.memtable_bytes = [kv] { return kv->memtable_bytes(); };
      src.block_cache_bytes = [kv] { return kv->block_cache_bytes(); };
    }
    metrics.watch(src);
  }
  // Who runs the work that must run once (cluster/leadership.h).
  Leadership* leadership = dd->leadership.get();
  (*map)->set_leadership(leadership);
  register_mds_handlers(**server, **ns, **map, sessions, objects, &metrics, leadership);
  if (Status st = (*server)->start(); !st.ok()) return fail(st);
  leadership->begin((*server)->address());

  auto metrics_http = daemon::start_metrics("surge-mds", cfg.metrics_listen);
  if (!metrics_http.ok()) {
    (*server)->stop();
    return fail(metrics_http.status());
  }

  OrphanCollectorOptions copts;
  copts.interval_ms = cfg.orphan_interval_ms;
  copts.startup_grace_ms = cfg.orphan_startup_grace_ms;
  OrphanCollector collector(ns->get(), map->get(), &sessions, &objects, copts, leadership);
  collector.start();

  char fsid[32];
  std::snprintf(fsid, sizeof fsid, "%016llx", static_cast<unsigned long long>(dd->fs_id));
  SLOG_INFO("surge-mds serving file system {} from {} on {} ({} workers{})", fsid, dd->where,
            (*server)->address(), cfg.worker_threads, dd->formatted ? ", newly formatted" : "");
  daemon::announce_ready("surge-mds",
                         "surge-mds listening on " + (*server)->address() + " fs " + fsid);
  daemon::wait_for_stop("surge-mds");
  if (*metrics_http) (*metrics_http)->stop();
  (*server)->stop();
  collector.stop();
  dd->leadership.reset();  // etcd: revokes the lease, so another MDS leads at once
  ns->reset();
  if (dd->rocks) {
    Status cs = dd->rocks->close();
    if (!cs.ok()) return fail(cs);
  }
  SLOG_INFO("surge-mds: stopped cleanly");
  return 0;
}

int config_error(const Status& st) {
  std::fprintf(stderr, "surge-mds: %s\n", st.ToString().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  daemon::block_stop_signals();  // before any thread exists

  CLI::App app{"surge-mds: the Surge metadata server"};
  std::string config_file;
  bool check = false, print_config = false;
  // A later flag wins over an earlier one (wrappers append overrides).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--config", config_file,
                 "TOML settings file (mds/surge-mds.toml lists every key)");
  config::FlagOverrides flags;
  mds_config_table().add_flags(app, flags);
  app.add_flag("--check", check, "check the namespace in --data-dir and exit (1: problems found)");
  app.add_flag("--print-config", print_config,
               "print every setting at its default, with its note, and exit");
  CLI11_PARSE(app, argc, argv);
  if (print_config) {
    std::printf("%s", mds_config_table().sample().c_str());
    return 0;
  }

  MdsConfig cfg;
  if (Status st = mds_config_table().load(config_file, flags, cfg); !st.ok()) {
    return config_error(st);
  }
  if (Status st = validate_config(cfg); !st.ok()) return config_error(st);
  // Before any thread exists; reported once logging is up.
  const Status malloc_bounds = daemon::bound_malloc("surge-mds", cfg.malloc_arena_max,
                                                    uint64_t{cfg.malloc_mmap_threshold_kb} << 10);
  if (Status st = daemon::start_logging("surge-mds", check ? "warn" : cfg.log_level, cfg.log_file);
      !st.ok()) {
    return config_error(st);
  }
  // The bounds tune memory, not correctness: an allocator that ignores
  // mallopt (a sanitizer's, or one preloaded) runs with its own policy.
  if (!malloc_bounds.ok()) {
    SLOG_WARN("{}; [memory] bounds not applied, the allocator keeps its own policy",
              malloc_bounds.message());
  }
  return check ? run_check(cfg) : run(cfg);
}
