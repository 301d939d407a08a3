// metrics_bench: what counting costs on the hot path (common/metrics/):
// a Counter increment, a Histogram observe (latency buckets, a value in the
// middle and past the last bound), a ScopedTimer (two clock reads and an
// observe), and the same increment from several threads on one counter
// (the contended worst case) and on a counter each. Also what a label
// lookup (Family::with, a mutex and a map) costs, which is why code
// resolves labels once. Built by default, not a ctest test:
//   build/tests/common/metrics_bench --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <chrono>

#include "common/metrics/registry.h"

namespace {

using surge::metrics::Buckets;
using surge::metrics::Counter;
using surge::metrics::Histogram;
using surge::metrics::Registry;

Registry& registry() {
  static Registry r;
  return r;
}

void BM_CounterInc(benchmark::State& state) {
  Counter& c = registry().counter("surge_bench_counter_total", "Bench.");
  for (auto _ : state) c.inc();
  benchmark::DoNotOptimize(c.value());
}
BENCHMARK(BM_CounterInc);

// Every thread increments the same counter: one cache line bouncing.
void BM_CounterIncShared(benchmark::State& state) {
  static Counter& c = registry().counter("surge_bench_shared_total", "Bench.");
  for (auto _ : state) c.inc();
}
BENCHMARK(BM_CounterIncShared)->Threads(1)->Threads(2)->Threads(4);

// A counter per thread (per label value), as per-method counters mostly are.
void BM_CounterIncPerThread(benchmark::State& state) {
  Counter& c = registry()
                   .counter_family("surge_bench_per_thread_total", "Bench.", {"t"})
                   .with({std::to_string(state.thread_index())});
  for (auto _ : state) c.inc();
}
BENCHMARK(BM_CounterIncPerThread)->Threads(1)->Threads(2)->Threads(4);

void BM_HistogramObserve(benchmark::State& state) {
  Histogram& h = registry().histogram("surge_bench_seconds", "Bench.", Buckets::latency());
  const auto v = std::chrono::nanoseconds(state.range(0));
  for (auto _ : state) h.observe(v);
}
// 1 ms (the 5th bound) and 3 s (past the last: the longest scan).
BENCHMARK(BM_HistogramObserve)->Arg(1'000'000)->Arg(3'000'000'000);

void BM_ScopedTimer(benchmark::State& state) {
  Histogram& h = registry().histogram("surge_bench_timer_seconds", "Bench.", Buckets::latency());
  for (auto _ : state) {
    surge::metrics::ScopedTimer t(h);
  }
}
BENCHMARK(BM_ScopedTimer);

void BM_LabelLookup(benchmark::State& state) {
  auto& f = registry().counter_family("surge_bench_lookup_total", "Bench.", {"method"});
  for (const char* m : {"create", "lookup", "getattr", "setattr", "unlink", "rename"}) f.with({m});
  for (auto _ : state) f.with({"getattr"}).inc();
}
BENCHMARK(BM_LabelLookup);

}  // namespace

BENCHMARK_MAIN();
