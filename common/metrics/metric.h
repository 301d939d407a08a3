// The three kinds of metric a component declares next to what it counts:
// Counter (only goes up), Gauge (goes up and down) and Histogram (fixed
// buckets, e.g. request latencies). Each is a few relaxed atomics: counting
// on the hot path is an uncontended fetch_add on a cache line of its own,
// never a lock or an allocation. A scrape reads them without stopping the
// writers: a page can be an event or two behind, never torn so that a
// counter goes backwards.
//
// Metrics are made and owned by a Registry (registry.h), which hands out
// references that stay valid as long as it lives; hold the reference (or a
// pointer) and count through it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

namespace surge::metrics {

class Counter {
 public:
  void inc(uint64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return v_.load(std::memory_order_relaxed); }

 private:
  alignas(64) std::atomic<uint64_t> v_{0};
};

class Gauge {
 public:
  void set(int64_t v) { v_.store(v, std::memory_order_relaxed); }
  void add(int64_t n) { v_.fetch_add(n, std::memory_order_relaxed); }
  void sub(int64_t n) { v_.fetch_sub(n, std::memory_order_relaxed); }
  int64_t value() const { return v_.load(std::memory_order_relaxed); }

 private:
  alignas(64) std::atomic<int64_t> v_{0};
};

// Bucket bounds are integers in a raw unit (nanoseconds for latencies,
// items for sizes) so observe() compares integers; `unit` turns a raw value
// into the base unit Prometheus shows (1e-9 for seconds, 1 for counts).
struct Buckets {
  std::vector<uint64_t> bounds;  // strictly increasing upper bounds; +Inf implied
  double unit = 1.0;

  // 50 us .. 2 s: RPC handlers, disk IO, FUSE operations.
  static Buckets latency();
  // 1, 2, 4, .. 1024: batch sizes.
  static Buckets powers_of_two(unsigned up_to_exponent = 10);
};

class Histogram {
 public:
  explicit Histogram(Buckets buckets);

  void observe(uint64_t raw);
  void observe(std::chrono::nanoseconds elapsed) {
    observe(elapsed.count() > 0 ? static_cast<uint64_t>(elapsed.count()) : 0);
  }

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (== count)
    uint64_t count = 0;
    double sum = 0;  // in the base unit
  };
  // Count is the sum of the buckets read, so a page is self-consistent
  // even while observations land.
  Snapshot snapshot() const;
  const Buckets& buckets() const { return buckets_; }

 private:
  Buckets buckets_;
  // per_bucket_[i]: observations <= bounds[i] and > bounds[i-1]; the last
  // one is +Inf.
  std::unique_ptr<std::atomic<uint64_t>[]> per_bucket_;
  alignas(64) std::atomic<uint64_t> sum_raw_{0};
};

// Times a scope into a histogram (the handler's latency).
class ScopedTimer {
 public:
  explicit ScopedTimer(Histogram& h) : h_(h), start_(std::chrono::steady_clock::now()) {}
  ~ScopedTimer() { h_.observe(std::chrono::steady_clock::now() - start_); }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  Histogram& h_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace surge::metrics
