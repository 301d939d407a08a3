// FUSE operation metrics: see fuse_metrics.h.
#include "client/fuse/fuse_metrics.h"

#include <array>

#include "common/metrics/registry.h"

namespace surge::fuse {

namespace {

constexpr std::array<const char*, static_cast<size_t>(FuseOp::kCount)> kNames = {
    "lookup",     "forget",     "forget_multi", "getattr",     "setattr",   "readlink",
    "mknod",      "mkdir",      "unlink",       "rmdir",       "symlink",   "rename",
    "link",       "open",       "create",       "read",        "write",     "flush",
    "fallocate",  "release",    "fsync",        "opendir",     "readdir",   "readdirplus",
    "releasedir", "statfs",     "setxattr",     "getxattr",    "listxattr", "removexattr",
    "access"};

struct OpSeries {
  metrics::Counter* requests;
  metrics::Counter* errors;
  metrics::Histogram* duration;
};

using Table = std::array<OpSeries, static_cast<size_t>(FuseOp::kCount)>;

const Table& table() {
  // Once per process (thread-safe static); the label lookups' mutexes are
  // never taken again.
  static const Table t = [] {
    auto& r = metrics::Registry::global();
    auto& requests = r.counter_family("surge_fuse_requests_total",
                                      "FUSE requests handled, per operation.", {"op"});
    auto& errors = r.counter_family("surge_fuse_request_errors_total",
                                    "FUSE requests answered with an error, per operation.",
                                    {"op"});
    auto& duration = r.histogram_family(
        "surge_fuse_request_duration_seconds",
        "Time in the FUSE handler, per operation (libsurge calls to the MDS and the data "
        "servers included).",
        {"op"}, metrics::Buckets::latency());
    Table out{};
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = {&requests.with({kNames[i]}), &errors.with({kNames[i]}),
                &duration.with({kNames[i]})};
    }
    return out;
  }();
  return t;
}

// The operation whose handler runs on this thread (kCount: none).
thread_local FuseOp tls_op = FuseOp::kCount;

}  // namespace

const char* fuse_op_name(FuseOp op) { return kNames[static_cast<size_t>(op)]; }

void declare_fuse_metrics() { (void)table(); }

FuseOpScope::FuseOpScope(FuseOp op)
    : op_(op), outer_(tls_op), start_(std::chrono::steady_clock::now()) {
  tls_op = op;
}

FuseOpScope::~FuseOpScope() {
  const OpSeries& s = table()[static_cast<size_t>(op_)];
  s.requests->inc();
  s.duration->observe(std::chrono::steady_clock::now() - start_);
  tls_op = outer_;
}

int reply_error(fuse_req_t req, int err) {
  if (err != 0 && tls_op != FuseOp::kCount) table()[static_cast<size_t>(tls_op)].errors->inc();
  return fuse_reply_err(req, err);
}

}  // namespace surge::fuse
