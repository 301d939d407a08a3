// Counter, Gauge, Histogram: see metric.h.
#include "common/metrics/metric.h"

#include <algorithm>
#include <stdexcept>

namespace surge::metrics {

Buckets Buckets::latency() {
  // microseconds: 50 us .. 2 s
  Buckets b;
  for (uint64_t us : {50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 100000, 500000, 2000000}) {
    b.bounds.push_back(us * 1000);
  }
  b.unit = 1e-9;
  return b;
}

Buckets Buckets::powers_of_two(unsigned up_to_exponent) {
  Buckets b;
  for (unsigned e = 0; e <= up_to_exponent; ++e) b.bounds.push_back(uint64_t{1} << e);
  b.unit = 1.0;
  return b;
}

Histogram::Histogram(Buckets buckets) : buckets_(std::move(buckets)) {
  if (!std::is_sorted(buckets_.bounds.begin(), buckets_.bounds.end()) ||
      std::adjacent_find(buckets_.bounds.begin(), buckets_.bounds.end()) != buckets_.bounds.end()) {
    throw std::logic_error("metrics::Histogram: bucket bounds must be strictly increasing");
  }
  per_bucket_ = std::make_unique<std::atomic<uint64_t>[]>(buckets_.bounds.size() + 1);
  for (size_t i = 0; i <= buckets_.bounds.size(); ++i) per_bucket_[i].store(0);
}

void Histogram::observe(uint64_t raw) {
  // Few bounds (about a dozen): a linear scan beats a binary search here.
  size_t b = 0;
  const size_t n = buckets_.bounds.size();
  while (b < n && raw > buckets_.bounds[b]) ++b;
  per_bucket_[b].fetch_add(1, std::memory_order_relaxed);
  sum_raw_.fetch_add(raw, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.cumulative.reserve(buckets_.bounds.size() + 1);
  uint64_t c = 0;
  for (size_t i = 0; i <= buckets_.bounds.size(); ++i) {
    c += per_bucket_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(c);
  }
  s.count = c;
  s.sum = static_cast<double>(sum_raw_.load(std::memory_order_relaxed)) * buckets_.unit;
  return s;
}

}  // namespace surge::metrics
