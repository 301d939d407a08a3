// MdsMetrics: what surge-mds counts for its Prometheus /metrics page:
// requests, errors and a latency histogram per RPC method, recorded by the
// handlers (mds_service.cpp) on the hot path, and rendered with the gauges
// read at scrape time (sessions, inodes, dentries, targets by state, map
// version, RocksDB WAL syncs).
//
// Invariant: record() touches only relaxed atomics of its own method's
// slot, never a lock, so counting costs a few uncontended increments per
// request. A scrape reads the counters without stopping writers: a page
// can be a request or two behind, never torn in a way that makes a counter
// go backwards.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"

namespace surge::mds {

class ClusterMap;
class SessionTable;
class KvStore;

class MdsMetrics {
 public:
  static constexpr uint16_t kMaxMethod = 63;
  // Upper bounds of the latency buckets, in microseconds (+Inf implied).
  static constexpr std::array<uint64_t, 12> kBucketsUs = {
      50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 100000, 500000, 2000000};

  // Names a method (e.g. "create") so it appears on the page; methods never
  // named are not rendered. Call before serving.
  void name_method(uint16_t method, std::string name);

  // One request of method that took `elapsed` and ended with st.
  void record(uint16_t method, const Status& st, std::chrono::nanoseconds elapsed);

  uint64_t requests(uint16_t method) const;
  uint64_t errors(uint16_t method) const;

  // Where the gauges come from. Any may be null (left off the page).
  struct Sources {
    const ClusterMap* map = nullptr;
    const SessionTable* sessions = nullptr;
    KvStore* kv = nullptr;
    std::function<uint64_t()> wal_syncs;  // RocksDB WAL fsyncs so far
  };
  // Prometheus text exposition format (version 0.0.4).
  std::string render(const Sources& sources) const;

 private:
  struct MethodStats {
    std::atomic<uint64_t> requests{0};
    std::atomic<uint64_t> errors{0};
    std::atomic<uint64_t> latency_ns_sum{0};
    // buckets[i]: requests no slower than kBucketsUs[i] and slower than the
    // bucket before (cumulated when rendered); the last one is +Inf.
    std::array<std::atomic<uint64_t>, kBucketsUs.size() + 1> buckets{};
  };
  std::array<MethodStats, kMaxMethod + 1> stats_;
  std::array<std::string, kMaxMethod + 1> names_;
};

}  // namespace surge::mds
