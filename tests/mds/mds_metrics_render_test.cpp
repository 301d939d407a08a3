// MdsMetrics on its own registry: the histogram's buckets are cumulative
// and land where the latency says, errors count apart from requests,
// unnamed methods stay off the page, concurrent recording loses no count,
// and the probes leave the page with the MdsMetrics.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "mds/service/mds_metrics.h"

namespace surge::mds {
namespace {

using std::chrono::microseconds;

bool has(const std::string& page, const std::string& line) {
  return page.find("\n" + line + "\n") != std::string::npos;
}

TEST(MdsMetricsRender, BucketsAreCumulativeByLatency) {
  metrics::Registry r;
  MdsMetrics m(r);
  m.name_method(23, "create");
  m.record(23, Status::OK(), microseconds(40));       // <= 50 us
  m.record(23, Status::OK(), microseconds(700));      // <= 1 ms
  m.record(23, Status::OK(), microseconds(3000000));  // past the last bound: +Inf only
  const std::string page = r.render();
  EXPECT_TRUE(
      has(page, "surge_mds_request_duration_seconds_bucket{method=\"create\",le=\"5e-05\"} 1"))
      << page;
  EXPECT_TRUE(
      has(page, "surge_mds_request_duration_seconds_bucket{method=\"create\",le=\"0.0005\"} 1"))
      << page;
  EXPECT_TRUE(
      has(page, "surge_mds_request_duration_seconds_bucket{method=\"create\",le=\"0.001\"} 2"))
      << page;
  EXPECT_TRUE(has(page, "surge_mds_request_duration_seconds_bucket{method=\"create\",le=\"2\"} 2"))
      << page;
  EXPECT_TRUE(
      has(page, "surge_mds_request_duration_seconds_bucket{method=\"create\",le=\"+Inf\"} 3"))
      << page;
  EXPECT_TRUE(has(page, "surge_mds_request_duration_seconds_count{method=\"create\"} 3")) << page;
  EXPECT_TRUE(has(page, "surge_mds_request_duration_seconds_sum{method=\"create\"} 3.00074"))
      << page;
}

TEST(MdsMetricsRender, ErrorsCountApartAndUnnamedMethodsAreLeftOut) {
  metrics::Registry r;
  MdsMetrics m(r);
  m.name_method(20, "lookup");
  m.record(20, Status::OK(), microseconds(1));
  m.record(20, Status::NotFound("x"), microseconds(1));
  m.record(21, Status::OK(), microseconds(1));  // never named
  const std::string page = r.render();
  EXPECT_TRUE(has(page, "surge_mds_requests_total{method=\"lookup\"} 2")) << page;
  EXPECT_TRUE(has(page, "surge_mds_request_errors_total{method=\"lookup\"} 1")) << page;
  EXPECT_EQ(m.requests(21), 0u);
  EXPECT_EQ(page.find("method=\"\""), std::string::npos) << page;
}

TEST(MdsMetricsRender, ConcurrentRecordingLosesNothing) {
  metrics::Registry r;
  MdsMetrics m(r);
  m.name_method(21, "getattr");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&m] {
      for (int i = 0; i < 10000; ++i) m.record(21, Status::OK(), microseconds(i % 300));
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(m.requests(21), 40000u);
  EXPECT_TRUE(
      has(r.render(), "surge_mds_request_duration_seconds_count{method=\"getattr\"} 40000"));
}

TEST(MdsMetricsRender, ProbesLeaveThePageWithTheMetrics) {
  metrics::Registry r;
  {
    MdsMetrics m(r);
    MdsMetrics::Sources src;
    src.wal_syncs = [] { return uint64_t{7}; };
    m.watch(src);
    EXPECT_TRUE(has(r.render(), "surge_mds_wal_syncs_total 7")) << r.render();
  }
  EXPECT_EQ(r.render().find("\nsurge_mds_wal_syncs_total "), std::string::npos) << r.render();
}

TEST(MdsMetricsRender, MethodIdPastTheTableIsAProgrammerError) {
  metrics::Registry r;
  MdsMetrics m(r);
  EXPECT_THROW(m.name_method(MdsMetrics::kMaxMethod + 1, "x"), std::logic_error);
}

}  // namespace
}  // namespace surge::mds
