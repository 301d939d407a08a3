// MdsMetrics: what surge-mds counts for its Prometheus /metrics page, in a
// metrics::Registry (common/metrics/): requests, errors and a latency
// histogram per RPC method, recorded by the handlers (mds_service.cpp) on
// the hot path, and probes read at scrape time (sessions, inodes,
// dentries, targets by state, map version, RocksDB WAL syncs).
//
// Invariant: record() touches only the relaxed atomics of its own method's
// metrics (resolved once by name_method()), never a lock.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/metrics/registry.h"
#include "common/status.h"

namespace surge::mds {

class ClusterMap;
class SessionTable;
class KvStore;

class MdsMetrics {
 public:
  static constexpr uint16_t kMaxMethod = 63;

  explicit MdsMetrics(metrics::Registry& registry = metrics::Registry::global());

  // Names a method (e.g. "create") so it is counted and appears on the
  // page; methods never named are not counted. Call before serving.
  void name_method(uint16_t method, const std::string& name);

  // One request of method that took `elapsed` and ended with st.
  void record(uint16_t method, const Status& st, std::chrono::nanoseconds elapsed);

  uint64_t requests(uint16_t method) const;
  uint64_t errors(uint16_t method) const;

  // Where the scrape-time gauges come from. Any may be null (left off the
  // page). They must outlive this MdsMetrics.
  struct Sources {
    const ClusterMap* map = nullptr;
    const SessionTable* sessions = nullptr;
    KvStore* kv = nullptr;
    std::function<uint64_t()> wal_syncs;  // RocksDB WAL fsyncs so far
    std::function<uint64_t()> memtable_bytes;     // RocksDB memtables now
    std::function<uint64_t()> block_cache_bytes;  // RocksDB block cache now
  };
  // Registers the sources' probes; they stay until this object is gone.
  void watch(const Sources& sources);

 private:
  struct Method {
    metrics::Counter* requests = nullptr;
    metrics::Counter* errors = nullptr;
    metrics::Histogram* duration = nullptr;
  };
  metrics::Registry& registry_;
  metrics::CounterFamily& requests_;
  metrics::CounterFamily& errors_;
  metrics::HistogramFamily& duration_;
  std::array<Method, kMaxMethod + 1> methods_{};
  std::vector<metrics::Probe> probes_;
};

}  // namespace surge::mds
