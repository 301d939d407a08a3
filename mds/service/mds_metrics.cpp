// MdsMetrics: counters and the /metrics page; see mds_metrics.h.
#include "mds/service/mds_metrics.h"

#include <cstdio>
#include <stdexcept>

#include "mds/cluster/cluster_map.h"
#include "mds/cluster/session_table.h"
#include "mds/kv/kv_store.h"

namespace surge::mds {

void MdsMetrics::name_method(uint16_t method, std::string name) {
  if (method > kMaxMethod) {
    throw std::logic_error("MdsMetrics: method id " + std::to_string(method) + " over kMaxMethod");
  }
  names_[method] = std::move(name);
}

void MdsMetrics::record(uint16_t method, const Status& st, std::chrono::nanoseconds elapsed) {
  if (method > kMaxMethod) return;
  MethodStats& m = stats_[method];
  m.requests.fetch_add(1, std::memory_order_relaxed);
  if (!st.ok()) m.errors.fetch_add(1, std::memory_order_relaxed);
  const uint64_t ns = elapsed.count() > 0 ? static_cast<uint64_t>(elapsed.count()) : 0;
  m.latency_ns_sum.fetch_add(ns, std::memory_order_relaxed);
  size_t b = 0;
  while (b < kBucketsUs.size() && ns > kBucketsUs[b] * 1000) ++b;
  m.buckets[b].fetch_add(1, std::memory_order_relaxed);
}

uint64_t MdsMetrics::requests(uint16_t method) const {
  return method <= kMaxMethod ? stats_[method].requests.load(std::memory_order_relaxed) : 0;
}

uint64_t MdsMetrics::errors(uint16_t method) const {
  return method <= kMaxMethod ? stats_[method].errors.load(std::memory_order_relaxed) : 0;
}

std::string MdsMetrics::render(const Sources& src) const {
  std::string out;
  auto header = [&](const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  auto sample = [&](const std::string& name, uint64_t v) {
    out += name + " " + std::to_string(v) + "\n";
  };
  auto per_method = [&](const char* name, const char* help, auto value) {
    header(name, "counter", help);
    for (uint16_t m = 0; m <= kMaxMethod; ++m) {
      if (names_[m].empty()) continue;
      sample(std::string(name) + "{method=\"" + names_[m] + "\"}", value(stats_[m]));
    }
  };
  per_method("surge_mds_requests_total", "Requests served, by method.",
             [](const MethodStats& s) { return s.requests.load(std::memory_order_relaxed); });
  per_method("surge_mds_request_errors_total", "Requests answered with an error, by method.",
             [](const MethodStats& s) { return s.errors.load(std::memory_order_relaxed); });

  header("surge_mds_request_duration_seconds", "histogram",
         "Time in the handler (not the network), by method.");
  for (uint16_t m = 0; m <= kMaxMethod; ++m) {
    if (names_[m].empty()) continue;
    const MethodStats& s = stats_[m];
    const std::string label = "method=\"" + names_[m] + "\"";
    // Read the buckets once; the count is their sum, so the page is
    // self-consistent even while requests land.
    uint64_t cumulative = 0;
    for (size_t b = 0; b < kBucketsUs.size(); ++b) {
      cumulative += s.buckets[b].load(std::memory_order_relaxed);
      char le[32];
      std::snprintf(le, sizeof le, "%g", static_cast<double>(kBucketsUs[b]) / 1e6);
      sample("surge_mds_request_duration_seconds_bucket{" + label + ",le=\"" + le + "\"}",
             cumulative);
    }
    cumulative += s.buckets[kBucketsUs.size()].load(std::memory_order_relaxed);
    sample("surge_mds_request_duration_seconds_bucket{" + label + ",le=\"+Inf\"}", cumulative);
    char sum[48];
    std::snprintf(sum, sizeof sum, "%.9f",
                  static_cast<double>(s.latency_ns_sum.load(std::memory_order_relaxed)) / 1e9);
    out += "surge_mds_request_duration_seconds_sum{" + label + "} " + sum + "\n";
    sample("surge_mds_request_duration_seconds_count{" + label + "}", cumulative);
  }

  if (src.sessions != nullptr) {
    header("surge_mds_sessions", "gauge", "Client sessions open.");
    sample("surge_mds_sessions", src.sessions->session_count());
  }
  if (src.kv != nullptr) {
    header("surge_mds_inodes", "gauge", "Inodes (RocksDB estimate).");
    sample("surge_mds_inodes", src.kv->estimate_keys(Space::kInodes));
    header("surge_mds_dentries", "gauge", "Directory entries (RocksDB estimate).");
    sample("surge_mds_dentries", src.kv->estimate_keys(Space::kDentries));
  }
  if (src.map != nullptr) {
    const ClusterMap::StateCounts c = src.map->state_counts();
    header("surge_mds_targets", "gauge", "Data servers in the cluster map, by state.");
    sample("surge_mds_targets{state=\"up\"}", c.up);
    sample("surge_mds_targets{state=\"down\"}", c.down);
    sample("surge_mds_targets{state=\"draining\"}", c.draining);
    header("surge_mds_cluster_map_version", "gauge", "Version of the cluster map.");
    sample("surge_mds_cluster_map_version", src.map->version());
  }
  if (src.wal_syncs) {
    header("surge_mds_wal_syncs_total", "counter", "RocksDB write-ahead log syncs (fsyncs).");
    sample("surge_mds_wal_syncs_total", src.wal_syncs());
  }
  return out;
}

}  // namespace surge::mds
