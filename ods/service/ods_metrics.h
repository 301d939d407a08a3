// OdsMetrics: what a data server counts, declared in a metrics::Registry
// (common/metrics/; the process's in the daemon) next to OdsService, which
// counts through it: per method requests, errors and handler latency, the
// bytes written and read, CRC failures (damaged transfers, damaged stored
// blocks) and requests refused for space. Gauges read at scrape time
// (requests in flight, IO buffers held and waited for, objects, space) are
// probes registered by OdsService::watch_metrics().
//
// Everything here is resolved at construction: counting is relaxed atomic
// increments, never a lock.
#pragma once

#include <array>
#include <cstdint>

#include "common/metrics/registry.h"

namespace surge::ods {

struct OdsMetrics {
  // Method ids 1..kMaxMethod of net/proto/ods_methods.h.
  static constexpr size_t kMaxMethod = 13;
  // Names as the page shows them, by method id.
  static const char* method_name(size_t method);

  explicit OdsMetrics(metrics::Registry& registry);

  struct Method {
    metrics::Counter* requests = nullptr;       // surge_ods_requests_total
    metrics::Counter* errors = nullptr;         // surge_ods_request_errors_total
    metrics::Histogram* duration = nullptr;     // surge_ods_request_duration_seconds
  };
  std::array<Method, kMaxMethod + 1> methods{};  // [0] unused
  metrics::Counter& write_bytes;         // surge_ods_write_bytes_total
  metrics::Counter& read_bytes;          // surge_ods_read_bytes_total
  metrics::Counter& payload_crc_errors;  // surge_ods_payload_crc_errors_total
  metrics::Counter& stored_crc_errors;   // surge_ods_checksum_errors_total
  metrics::Counter& nospace_errors;      // surge_ods_nospace_errors_total
};

}  // namespace surge::ods
