// surge-ods: the object data server daemon.
//
//   surge-ods --config /etc/surge/surge-ods.toml [--listen tcp://H:P] ...
//
// Start order: settings (defaults, file, flags), logging, object store
// (which recovers from an unclean stop), RPC server, MDS registration; then
// one line on stdout, "surge-ods listening on tcp://H:P target N", which
// scripts and tests wait for. SIGTERM/SIGINT stop it cleanly: registration
// stops, in-flight requests finish or are cancelled, the store syncs.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <iostream>

#include "common/log.h"
#include "net/cluster_key.h"
#include "net/rpc_server.h"
#include "ods/daemon/mds_registration.h"
#include "common/metrics/registry.h"
#include "common/metrics_endpoint.h"
#include "common/systemd_notify.h"
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
  ChainForwarder forwarder(**chunks, chains, (*server)->pool(), fo);
  ChainedChunks chained(**chunks, chains, forwarder);
  OdsService service(**store, (*server)->pool(), svc_opts, &chains,
                     cfg.mds.empty() ? nullptr : &chained);
  // The resync source of the chains whose SYNCING member follows us.
  ResyncSource resync(**chunks, chains, forwarder, chained.order());
  // The head of a chain that changed rolls its dirty chunks forward.
  RollForward roll(**chunks, chains, chained);
  if (!cfg.mds.empty()) {
    chains.on_change([&resync, &roll] {
      resync.poke();
      roll.poke();
    });
    resync.start();
    roll.start();
  }
  service.register_handlers(**server);
  service.watch_metrics(metrics::Registry::global());
  if (Status st = (*server)->start(); !st.ok()) return fail(st);
  const std::string address = (*server)->address();

  std::unique_ptr<MetricsEndpoint> metrics_http;
  if (!cfg.metrics_listen.empty()) {
    metrics_http = std::make_unique<MetricsEndpoint>([] { return metrics::Registry::global().render(); });
    if (Status st = metrics_http->start(cfg.metrics_listen); !st.ok()) {
      (*server)->stop();
      return fail(st);
    }
    SLOG_INFO("surge-ods metrics on {}", metrics_http->url());
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
  std::printf("surge-ods listening on %s target %u\n", address.c_str(), mds ? mds->target_id() : 0u);
  std::fflush(stdout);
  // Type=notify units: systemd counts the daemon started from here on.
  if (Status st = notify_systemd("READY=1"); !st.ok()) SLOG_WARN("surge-ods: {}", st.ToString());

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int sig = 0;
  sigwait(&set, &sig);
  SLOG_INFO("surge-ods: signal {}, stopping", sig);
  if (Status st = notify_systemd("STOPPING=1"); !st.ok()) SLOG_WARN("surge-ods: {}", st.ToString());
  if (mds) mds->stop();
  chains.on_change(nullptr);
  resync.stop();
  roll.stop();
  if (metrics_http) metrics_http->stop();
  (*server)->stop();
  return 0;  // the store syncs and closes as it goes out of scope
}

}  // namespace

int main(int argc, char** argv) {
  // Block the stop signals before any thread exists, so every thread
  // inherits the mask and only sigwait in main sees them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  CLI::App app{"surge-ods: the Surge object data server"};
  std::string config_file, data_dir, listen, advertise, mds, key_file, log_level, log_file, metrics_listen;
  int io_threads = 0, worker_threads = 0;
  size_t pool_1m = 0, pool_64k = 0, max_open = 0;
  uint64_t reserved = 0, max_io = 0;
  bool direct = false;
  // A later flag wins over an earlier one (wrappers append overrides).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--config", config_file, "TOML settings file (ods/surge-ods.toml lists every key)");
  auto* o_data = app.add_option("--data-dir", data_dir, "object directory");
  auto* o_listen = app.add_option("--listen", listen, "tcp://HOST:PORT or rdma://HOST:PORT");
  auto* o_adv = app.add_option("--advertise", advertise, "address given to the MDS");
  auto* o_mds = app.add_option("--mds", mds, "MDS address (\"\" for none)");
  auto* o_key = app.add_option("--cluster-key-file", key_file, "cluster key file");
  auto* o_metrics = app.add_option("--metrics-listen", metrics_listen, "Prometheus endpoint HOST:PORT (\"\" off)");
  auto* o_level = app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off");
  auto* o_logf = app.add_option("--log-file", log_file, "log file (default stderr)");
  auto* o_io = app.add_option("--io-threads", io_threads, "transport threads");
  auto* o_wk = app.add_option("--worker-threads", worker_threads, "request threads");
  auto* o_p1m = app.add_option("--pool-1m-buffers", pool_1m, "1 MiB pool buffers");
  auto* o_p64k = app.add_option("--pool-64k-buffers", pool_64k, "64 KiB pool buffers");
  auto* o_open = app.add_option("--max-open-objects", max_open, "fd cache size");
  auto* o_res = app.add_option("--reserved-free-bytes", reserved, "keep this much disk free");
  auto* o_maxio = app.add_option("--max-io-bytes", max_io, "largest request");
  auto* o_direct = app.add_flag("--o-direct", direct, "aligned IO bypasses the page cache");
  CLI11_PARSE(app, argc, argv);

  OdsConfig cfg;
  if (!config_file.empty()) {
    if (Status st = load_config_file(config_file, cfg); !st.ok()) {
      std::fprintf(stderr, "surge-ods: %s\n", st.ToString().c_str());
      return 2;
    }
  }
  if (o_data->count()) cfg.data_dir = data_dir;
  if (o_listen->count()) cfg.listen = listen;
  if (o_adv->count()) cfg.advertise = advertise;
  if (o_mds->count()) cfg.mds = mds;
  if (o_key->count()) cfg.cluster_key_file = key_file;
  if (o_metrics->count()) cfg.metrics_listen = metrics_listen;
  if (o_level->count()) cfg.log_level = log_level;
  if (o_logf->count()) cfg.log_file = log_file;
  if (o_io->count()) cfg.io_threads = io_threads;
  if (o_wk->count()) cfg.worker_threads = worker_threads;
  if (o_p1m->count()) cfg.pool_1m_buffers = pool_1m;
  if (o_p64k->count()) cfg.pool_64k_buffers = pool_64k;
  if (o_open->count()) cfg.max_open_objects = max_open;
  if (o_res->count()) cfg.reserved_free_bytes = reserved;
  if (o_maxio->count()) cfg.max_io_bytes = max_io;
  if (o_direct->count()) cfg.o_direct = direct;
  if (Status st = validate_config(cfg); !st.ok()) {
    std::fprintf(stderr, "surge-ods: %s\n", st.ToString().c_str());
    return 2;
  }
  if (Status st = init_logging(cfg.log_level, cfg.log_file, "surge-ods"); !st.ok()) {
    std::fprintf(stderr, "surge-ods: %s\n", st.ToString().c_str());
    return 2;
  }
  return run(cfg);
}
