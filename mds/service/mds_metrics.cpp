// MdsMetrics: per-method metrics and the scrape-time probes; see mds_metrics.h.
#include "mds/service/mds_metrics.h"

#include <stdexcept>

#include "mds/cluster/cluster_map.h"
#include "mds/cluster/session_table.h"
#include "mds/kv/kv_store.h"

namespace surge::mds {

using metrics::Type;

MdsMetrics::MdsMetrics(metrics::Registry& registry)
    : registry_(registry),
      requests_(registry.counter_family("surge_mds_requests_total", "Requests served, by method.",
                                        {"method"})),
      errors_(registry.counter_family("surge_mds_request_errors_total",
                                      "Requests answered with an error, by method.", {"method"})),
      duration_(registry.histogram_family(
          "surge_mds_request_duration_seconds",
          "Time in the handler (WAL sync included, network excluded), by method.", {"method"},
          metrics::Buckets::latency())) {}

void MdsMetrics::name_method(uint16_t method, const std::string& name) {
  if (method > kMaxMethod) {
    throw std::logic_error("MdsMetrics: method id " + std::to_string(method) + " over kMaxMethod");
  }
  methods_[method] = {&requests_.with({name}), &errors_.with({name}), &duration_.with({name})};
}

void MdsMetrics::record(uint16_t method, const Status& st, std::chrono::nanoseconds elapsed) {
  if (method > kMaxMethod || methods_[method].requests == nullptr) return;
  const Method& m = methods_[method];
  m.requests->inc();
  if (!st.ok()) m.errors->inc();
  m.duration->observe(elapsed);
}

uint64_t MdsMetrics::requests(uint16_t method) const {
  return method <= kMaxMethod && methods_[method].requests ? methods_[method].requests->value() : 0;
}

uint64_t MdsMetrics::errors(uint16_t method) const {
  return method <= kMaxMethod && methods_[method].errors ? methods_[method].errors->value() : 0;
}

void MdsMetrics::watch(const Sources& src) {
  auto gauge = [&](const char* name, const char* help,
                   std::vector<std::pair<std::string, std::string>> labels,
                   std::function<double()> read) {
    probes_.push_back(registry_.probe(name, help, Type::kGauge, std::move(labels), std::move(read)));
  };
  if (const SessionTable* s = src.sessions) {
    gauge("surge_mds_sessions", "Client sessions this MDS serves.", {},
          [s] { return static_cast<double>(s->session_count()); });
  }
  if (KvStore* kv = src.kv) {
    gauge("surge_mds_inodes", "Inodes (exact where the store counts them, as statfs).", {}, [kv] {
      auto n = kv->count_keys(Space::kInodes);
      return static_cast<double>(n.ok() ? *n : kv->estimate_keys(Space::kInodes));
    });
    gauge("surge_mds_dentries", "Directory entries (RocksDB estimate).", {},
          [kv] { return static_cast<double>(kv->estimate_keys(Space::kDentries)); });
  }
  if (const ClusterMap* map = src.map) {
    const char* help = "Data servers in the cluster map, by state.";
    gauge("surge_mds_targets", help, {{"state", "up"}},
          [map] { return static_cast<double>(map->state_counts().up); });
    gauge("surge_mds_targets", help, {{"state", "down"}},
          [map] { return static_cast<double>(map->state_counts().down); });
    gauge("surge_mds_targets", help, {{"state", "draining"}},
          [map] { return static_cast<double>(map->state_counts().draining); });
    gauge("surge_mds_cluster_map_version", "Version of the cluster map.", {},
          [map] { return static_cast<double>(map->version()); });
  }
  if (src.wal_syncs) {
    probes_.push_back(registry_.probe("surge_mds_wal_syncs_total",
                                      "RocksDB write-ahead log syncs (fsyncs).", Type::kCounter, {},
                                      [f = src.wal_syncs] { return static_cast<double>(f()); }));
  }
  if (src.memtable_bytes) {
    gauge("surge_mds_store_memtable_bytes",
          "RocksDB memtables (active, unflushed and kept history); bound: store.memtable_mb.", {},
          [f = src.memtable_bytes] { return static_cast<double>(f()); });
  }
  if (src.block_cache_bytes) {
    gauge("surge_mds_store_block_cache_bytes",
          "RocksDB block cache in use; bound: store.block_cache_mb.", {},
          [f = src.block_cache_bytes] { return static_cast<double>(f()); });
  }
}

}  // namespace surge::mds
