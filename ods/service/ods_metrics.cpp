// OdsMetrics: the data server's metrics; see ods_metrics.h.
#include "ods/service/ods_metrics.h"

namespace surge::ods {

const char* OdsMetrics::method_name(size_t method) {
  static const char* kNames[kMaxMethod + 1] = {
      "",       "write", "read",          "truncate",    "remove",       "stat",      "sync",
      "statfs", "scrub", "chain_forward", "list_chunks", "resync_chunk", "fallocate", "ec_commit"};
  return method <= kMaxMethod ? kNames[method] : "";
}

OdsMetrics::OdsMetrics(metrics::Registry& r)
    : write_bytes(r.counter("surge_ods_write_bytes_total",
                            "Bytes stored by Write (and chained write) requests.")),
      read_bytes(r.counter("surge_ods_read_bytes_total", "Bytes pushed by Read requests.")),
      payload_crc_errors(r.counter("surge_ods_payload_crc_errors_total",
                                   "Writes refused because the payload did not match its CRC.")),
      stored_crc_errors(r.counter("surge_ods_checksum_errors_total",
                                  "Reads that found a stored block not matching its CRC.")),
      nospace_errors(
          r.counter("surge_ods_nospace_errors_total", "Requests refused for lack of disk space.")) {
  auto& requests = r.counter_family("surge_ods_requests_total", "Requests served, by method.",
                                    {"method"});
  auto& errors = r.counter_family("surge_ods_request_errors_total",
                                  "Requests answered with an error, by method.", {"method"});
  auto& duration = r.histogram_family(
      "surge_ods_request_duration_seconds",
      "Time in the handler (buffer wait, disk and bulk transfer included), by method.", {"method"},
      metrics::Buckets::latency());
  for (size_t m = 1; m <= kMaxMethod; ++m) {
    const std::string name = method_name(m);
    methods[m] = {&requests.with({name}), &errors.with({name}), &duration.with({name})};
  }
}

}  // namespace surge::ods
