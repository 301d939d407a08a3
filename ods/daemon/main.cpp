// surge-ods: the object data server daemon.
//
//   surge-ods --config /etc/surge/surge-ods.toml [--listen tcp://H:P] ...
//   surge-ods --print-config     (every setting at its default: ods/surge-ods.toml)
//
// Start order (the process scaffolding is common/daemon/daemon_process.h,
// the settings common/config/config_table.h): settings (defaults, file,
// flags), logging, object store
// (which recovers from an unclean stop), RPC server, MDS registration; then
// one line on stdout, "surge-ods listening on tcp://H:P target N", which
// scripts and tests wait for. SIGTERM/SIGINT stop it cleanly: registration
// stops, in-flight requests finish or are cancelled, the store syncs.
#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>

#include "common/daemon/daemon_process.h"
#include "common/log.h"
#include "common/metrics/registry.h"
#include "net/cluster_key.h"
#include "net/rpc_server.h"
#include "ods/daemon/mds_registration.h"
#include "ods/chain/chain_forwarder.h"
#include "ods/chain/chain_view.h"
#include "ods/chain/chained_chunks.h"
#include "ods/chain/resync_source.h"
#include "ods/chain/roll_forward.h"
#include "ods/daemon/ods_config.h"
#include "ods/service/ods_service.h"
#include "ods/store/chunk_store.h"
#include "ods/store/object_store.h"

namespace {

using namespace surge;
using namespace surge::ods;

int fail(const Status& st) {
  SLOG_ERROR("surge-ods: {}", st.ToString());
  std::fprintf(stderr, "surge-ods: %s\n", st.ToString().c_str());
  return 1;
}

int run(const OdsConfig& cfg) {
  auto key = net::load_cluster_key(cfg.cluster_key_file);
  if (!key.ok()) return fail(key.status());

  ObjectStoreOptions so;
  so.data_dir = cfg.data_dir;
  so.max_object_size = cfg.max_object_size;
  so.max_open_objects = cfg.max_open_objects;
  so.o_direct = cfg.o_direct;
  so.reserved_free_bytes = cfg.reserved_free_bytes;
  auto store = ObjectStore::Open(so);
  if (!store.ok()) return fail(store.status());
  // Chained chunks (format 2 files) beside the legacy objects.
  auto chunks = ChunkStore::Open(so);
  if (!chunks.ok()) return fail(chunks.status());

  net::ServerOptions opts;
  opts.listen = cfg.listen;
  opts.cluster_key = *key;
  opts.io_threads = cfg.io_threads;
  opts.worker_threads = cfg.worker_threads;
  ForwardLanes lanes{cfg.mds.empty() ? 0u : cfg.forward_lanes, cfg.forward_threads};
  opts.lane_threads.assign(lanes.lanes, static_cast<int>(lanes.threads));
  opts.credits_per_connection = cfg.credits_per_connection;
  opts.handshake_timeout = std::chrono::milliseconds(cfg.handshake_timeout_ms);
  opts.max_unauthenticated_connections = cfg.max_unauthenticated_connections;
  opts.max_unauthenticated_per_address = cfg.max_unauthenticated_per_address;
  opts.bulk_stall_timeout = std::chrono::milliseconds(cfg.bulk_stall_timeout_ms);
  opts.pool.name = "ods";
  opts.pool.classes = {{4096, cfg.pool_4k_buffers}, {64 * 1024, cfg.pool_64k_buffers},
                       {1024 * 1024, cfg.pool_1m_buffers + lanes.extra_buffers(cfg.worker_threads)}};
  std::erase_if(opts.pool.classes, [](const net::SizeClass& c) { return c.count == 0; });
  opts.pool.huge_pages = cfg.huge_pages;
  opts.pool.lock_memory = cfg.lock_memory;
  auto server = net::RpcServer::Create(opts);
  if (!server.ok()) return fail(server.status());

  OdsServiceOptions svc_opts;
  svc_opts.max_io_bytes = cfg.max_io_bytes;
  svc_opts.io_buffers = cfg.pool_1m_buffers;  // the lanes' buffers are beyond
  svc_opts.lanes = lanes;
  // The chain view judges every request's target id and chain version; our
  // id is the one the MDS registration holds (0 until it registered).
  std::atomic<MdsRegistration*> registration{nullptr};
  ChainViewOptions cv_opts;
  cv_opts.mds = cfg.mds;
  cv_opts.cluster_key = *key;
  if (cfg.listen.rfind("rdma://", 0) == 0) cv_opts.scheme = "rdma";
  ChainView chains(cv_opts, [&registration] {
    MdsRegistration* r = registration.load();
    return r != nullptr ? r->target_id() : 0u;
  });
  ChainForwarderOptions fo;
  fo.cluster_key = *key;
  fo.lanes = lanes;
  fo.forward_timeout = std::chrono::milliseconds(cfg.forward_timeout_ms);
  ChainForwarder forwarder(**chunks, chains, (*server)->pool(), fo);
  ChainedChunks chained(**chunks, chains, forwarder);
  EcChunks ec(chained, chains, forwarder, (*server)->pool(), cfg.ec_kept_deltas);
  OdsService service(**store, (*server)->pool(), svc_opts, &chains,
                     cfg.mds.empty() ? nullptr : &chained, cfg.mds.empty() ? nullptr : &ec);
  // The resync source of the chains whose SYNCING member follows us.
  ResyncSource resync(**chunks, chains, forwarder, chained.order());
  // The head of a chain that changed rolls its dirty chunks forward.
  RollForward roll(**chunks, chains, chained);
  if (!cfg.mds.empty()) {
    chains.on_change([&resync, &roll, &ec] {
      resync.poke();
      roll.poke();
      ec.rebuild().poke();
    });
    resync.start();
    roll.start();
    ec.rebuild().start();
  }
  service.register_handlers(**server);
  service.watch_metrics(metrics::Registry::global());
  if (Status st = (*server)->start(); !st.ok()) return fail(st);
  const std::string address = (*server)->address();

  auto metrics_http = daemon::start_metrics("surge-ods", cfg.metrics_listen);
  if (!metrics_http.ok()) {
    (*server)->stop();
    return fail(metrics_http.status());
  }

  std::unique_ptr<MdsRegistration> mds;
  if (!cfg.mds.empty()) {
    MdsRegistrationOptions mo;
    mo.mds = cfg.mds;
    mo.advertise = cfg.advertise.empty() ? address : cfg.advertise;
    mo.data_dir = cfg.data_dir;
    mo.cluster_key = *key;
    mo.heartbeat_interval_ms = cfg.heartbeat_interval_ms;
    mo.retry_ms = cfg.mds_retry_ms;
    mo.on_map_version = [&chains](uint64_t v) { chains.note_map_version(v); };
    mds = std::make_unique<MdsRegistration>(mo, **store, [&service] { return service.load(); });
    registration = mds.get();
    if (Status st = mds->start(); !st.ok()) {
      (*server)->stop();
      return fail(st);
    }
  }

  SLOG_INFO("surge-ods serving {} on {} (io threads {}, workers {}, {} x 1 MiB buffers)", cfg.data_dir, address,
            cfg.io_threads, cfg.worker_threads, cfg.pool_1m_buffers);
  daemon::announce_ready("surge-ods", "surge-ods listening on " + address + " target " +
                                          std::to_string(mds ? mds->target_id() : 0u));
  daemon::wait_for_stop("surge-ods");
  if (mds) mds->stop();
  chains.on_change(nullptr);
  resync.stop();
  roll.stop();
  if (*metrics_http) (*metrics_http)->stop();
  (*server)->stop();
  return 0;  // the store syncs and closes as it goes out of scope
}

int config_error(const Status& st) {
  std::fprintf(stderr, "surge-ods: %s\n", st.ToString().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  daemon::block_stop_signals();  // before any thread exists

  CLI::App app{"surge-ods: the Surge object data server"};
  std::string config_file;
  bool print_config = false;
  // A later flag wins over an earlier one (wrappers append overrides).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--config", config_file, "TOML settings file (ods/surge-ods.toml lists every key)");
  config::FlagOverrides flags;
  ods_config_table().add_flags(app, flags);
  app.add_flag("--print-config", print_config,
               "print every setting at its default, with its note, and exit");
  CLI11_PARSE(app, argc, argv);
  if (print_config) {
    std::printf("%s", ods_config_table().sample().c_str());
    return 0;
  }

  OdsConfig cfg;
  if (Status st = ods_config_table().load(config_file, flags, cfg); !st.ok()) {
    return config_error(st);
  }
  if (Status st = validate_config(cfg); !st.ok()) return config_error(st);
  if (Status st = daemon::start_logging("surge-ods", cfg.log_level, cfg.log_file); !st.ok()) {
    return config_error(st);
  }
  return run(cfg);
}
