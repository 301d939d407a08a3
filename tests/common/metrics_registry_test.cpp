// metrics::Registry: what the exposition text says for each kind of metric
// (HELP/TYPE lines, labels and their escaping, cumulative histogram
// buckets with _sum and _count), that probes stop being called once their
// handle is gone, that a second declaration of a name is the same metric,
// and that concurrent counting loses nothing.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "common/metrics/registry.h"

namespace surge::metrics {
namespace {

bool has(const std::string& page, const std::string& line) {
  return ("\n" + page).find("\n" + line + "\n") != std::string::npos;
}

TEST(MetricsRegistry, CounterAndGaugeHaveHelpTypeAndValue) {
  Registry r;
  r.counter("surge_test_bytes_total", "Bytes seen.").inc(5);
  Gauge& g = r.gauge("surge_test_depth", "Requests queued.");
  g.add(3);
  g.sub(1);
  const std::string page = r.render();
  EXPECT_TRUE(has(page, "# HELP surge_test_bytes_total Bytes seen.")) << page;
  EXPECT_TRUE(has(page, "# TYPE surge_test_bytes_total counter")) << page;
  EXPECT_TRUE(has(page, "surge_test_bytes_total 5")) << page;
  EXPECT_TRUE(has(page, "# TYPE surge_test_depth gauge")) << page;
  EXPECT_TRUE(has(page, "surge_test_depth 2")) << page;
}

TEST(MetricsRegistry, LabelsAreRenderedInOrderAndEscaped) {
  Registry r;
  CounterFamily& f = r.counter_family("surge_test_calls_total", "Calls.", {"op", "target"});
  f.with({"create", "3"}).inc();
  f.with({"we\"ird\\\n", "1"}).inc(2);
  const std::string page = r.render();
  EXPECT_TRUE(has(page, "surge_test_calls_total{op=\"create\",target=\"3\"} 1")) << page;
  EXPECT_TRUE(has(page, "surge_test_calls_total{op=\"we\\\"ird\\\\\\n\",target=\"1\"} 2")) << page;
  EXPECT_THROW(f.with({"only-one"}), std::logic_error);
}

TEST(MetricsRegistry, HistogramBucketsAreCumulativeWithSumAndCount) {
  Registry r;
  Histogram& h = r.histogram_family("surge_test_duration_seconds", "Latency.", {"op"},
                                    Buckets::latency())
                     .with({"read"});
  h.observe(std::chrono::microseconds(40));       // <= 50 us
  h.observe(std::chrono::microseconds(700));      // <= 1 ms
  h.observe(std::chrono::microseconds(3000000));  // past the last bound: +Inf only
  const std::string page = r.render();
  const std::string b = "surge_test_duration_seconds_bucket{op=\"read\",le=";
  EXPECT_TRUE(has(page, "# TYPE surge_test_duration_seconds histogram")) << page;
  EXPECT_TRUE(has(page, b + "\"5e-05\"} 1")) << page;
  EXPECT_TRUE(has(page, b + "\"0.0005\"} 1")) << page;
  EXPECT_TRUE(has(page, b + "\"0.001\"} 2")) << page;
  EXPECT_TRUE(has(page, b + "\"2\"} 2")) << page;
  EXPECT_TRUE(has(page, b + "\"+Inf\"} 3")) << page;
  EXPECT_TRUE(has(page, "surge_test_duration_seconds_sum{op=\"read\"} 3.00074")) << page;
  EXPECT_TRUE(has(page, "surge_test_duration_seconds_count{op=\"read\"} 3")) << page;
}

TEST(MetricsRegistry, UnlabelledHistogramHasOnlyLe) {
  Registry r;
  r.histogram("surge_test_batch_size", "Batch.", Buckets::powers_of_two(3)).observe(3);
  const std::string page = r.render();
  EXPECT_TRUE(has(page, "surge_test_batch_size_bucket{le=\"2\"} 0")) << page;
  EXPECT_TRUE(has(page, "surge_test_batch_size_bucket{le=\"4\"} 1")) << page;
  EXPECT_TRUE(has(page, "surge_test_batch_size_sum 3")) << page;
  EXPECT_TRUE(has(page, "surge_test_batch_size_count 1")) << page;
}

TEST(MetricsRegistry, ProbesAddUpAndStopWithTheirHandle) {
  Registry r;
  int calls = 0;
  Probe a = r.probe("surge_test_free_bytes", "Free.", Type::kGauge, {{"target", "1"}}, [&] {
    ++calls;
    return 1.5;
  });
  Probe b = r.probe("surge_test_free_bytes", "Free.", Type::kGauge, {{"target", "1"}},
                    [] { return 2.0; });
  EXPECT_TRUE(has(r.render(), "surge_test_free_bytes{target=\"1\"} 3.5"));
  a.reset();
  EXPECT_TRUE(has(r.render(), "surge_test_free_bytes{target=\"1\"} 2"));
  EXPECT_EQ(calls, 1);
  { Probe moved = std::move(b); }
  EXPECT_EQ(r.render().find("surge_test_free_bytes{"), std::string::npos) << r.render();
}

TEST(MetricsRegistry, SecondDeclarationIsTheSameMetricAndAMismatchThrows) {
  Registry r;
  r.counter("surge_test_x_total", "X.").inc();
  r.counter("surge_test_x_total", "X.").inc();
  EXPECT_TRUE(has(r.render(), "surge_test_x_total 2"));
  EXPECT_THROW(r.gauge("surge_test_x_total", "X."), std::logic_error);
  EXPECT_THROW(r.counter_family("surge_test_x_total", "X.", {"op"}), std::logic_error);
  EXPECT_THROW(Histogram(Buckets{{2, 1}, 1.0}), std::logic_error);
}

TEST(MetricsRegistry, ConcurrentCountingLosesNothingWhileScraping) {
  Registry r;
  CounterFamily& calls = r.counter_family("surge_test_calls_total", "Calls.", {"thread"});
  Histogram& h = r.histogram("surge_test_duration_seconds", "Latency.", Buckets::latency());
  std::atomic<bool> done{false};
  std::thread scraper([&] {
    while (!done.load()) (void)r.render();
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Counter& mine = calls.with({std::to_string(t % 2)});  // two threads per counter
      for (int i = 0; i < 20000; ++i) {
        mine.inc();
        h.observe(std::chrono::microseconds(i % 300));
      }
    });
  }
  for (auto& t : threads) t.join();
  done = true;
  scraper.join();
  const std::string page = r.render();
  EXPECT_TRUE(has(page, "surge_test_calls_total{thread=\"0\"} 40000")) << page;
  EXPECT_TRUE(has(page, "surge_test_calls_total{thread=\"1\"} 40000")) << page;
  EXPECT_TRUE(has(page, "surge_test_duration_seconds_count 80000")) << page;
  EXPECT_TRUE(has(page, "surge_test_duration_seconds_bucket{le=\"+Inf\"} 80000")) << page;
}

}  // namespace
}  // namespace surge::metrics
