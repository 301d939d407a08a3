// surge-mds /metrics: the daemon started with metrics_listen serves the
// Prometheus page over HTTP; request counters, the latency histogram, the
// WAL sync counter and the gauges move with real requests; other paths are
// 404. One daemon process on 127.0.0.1, real RocksDB.
#include <unistd.h>

#include <fstream>

#include "tests/common/loopback.h"
#include "tests/mds/mds_daemon_fixture.h"

namespace surge::mds::testing {
namespace {

using surge::test::free_port;
using surge::test::http_get;

// The value of one sample line ("name{labels} value"); -1 when absent.
double sample(const std::string& page, const std::string& series) {
  auto at = page.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(page.substr(at + 1 + series.size() + 1));
}

class MdsMetricsTest : public MdsDaemonTest {
 protected:
  void SetUp() override {
    MdsDaemonTest::SetUp();
    port_ = free_port();
    std::ofstream(config_, std::ios::app)
        << "[server]\nmetrics_listen = \"127.0.0.1:" << port_ << "\"\n";
  }
  std::string scrape() { return http_get(port_, "/metrics"); }
  uint16_t port_ = 0;
};

TEST_F(MdsMetricsTest, RequestCounterMovesAfterARequest) {
  start();
  const std::string before = scrape();
  ASSERT_NE(before.find("HTTP/1.1 200"), std::string::npos) << before;
  EXPECT_EQ(sample(before, "surge_mds_requests_total{method=\"mkdir\"}"), 0) << before;
  ASSERT_TRUE(mkdir(pb::kRootIno, "d").ok());
  EXPECT_FALSE(mkdir(pb::kRootIno, "d").ok());  // EEXIST: counted as an error
  const std::string after = scrape();
  EXPECT_EQ(sample(after, "surge_mds_requests_total{method=\"mkdir\"}"), 2) << after;
  EXPECT_EQ(sample(after, "surge_mds_request_errors_total{method=\"mkdir\"}"), 1) << after;
  EXPECT_EQ(sample(after, "surge_mds_request_duration_seconds_count{method=\"mkdir\"}"), 2)
      << after;
  EXPECT_EQ(
      sample(after, "surge_mds_request_duration_seconds_bucket{method=\"mkdir\",le=\"+Inf\"}"), 2)
      << after;
  EXPECT_GT(sample(after, "surge_mds_request_duration_seconds_sum{method=\"mkdir\"}"), 0) << after;
}

TEST_F(MdsMetricsTest, SyncedChangesCountWalSyncs) {
  start();
  const double before = sample(scrape(), "surge_mds_wal_syncs_total");
  ASSERT_GE(before, 0);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(mkdir(pb::kRootIno, "d" + std::to_string(i)).ok());
  const std::string page = scrape();
  EXPECT_GT(sample(page, "surge_mds_wal_syncs_total"), before) << page;
}

TEST_F(MdsMetricsTest, GroupCommitCountsEachSyncedChangeInABatch) {
  start();
  const double before = sample(scrape(), "surge_mds_group_commit_batch_size_sum");
  ASSERT_GE(before, 0);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(mkdir(pb::kRootIno, "g" + std::to_string(i)).ok());
  const std::string page = scrape();
  // One after another: each mkdir waits for its own sync (a batch of one).
  EXPECT_EQ(sample(page, "surge_mds_group_commit_batch_size_sum"), before + 3) << page;
  EXPECT_GE(sample(page, "surge_mds_group_commit_batch_size_bucket{le=\"1\"}"), 3) << page;
}

TEST_F(MdsMetricsTest, GaugesShowSessionsAndTargets) {
  start();
  ASSERT_TRUE(register_target(0, "tcp://127.0.0.1:7999").ok());
  pb::OpenSessionRequest os;
  os.set_client_name("metrics-test");
  ASSERT_TRUE(call<pb::MdsOpenSession>(os).ok());
  const std::string page = scrape();
  EXPECT_EQ(sample(page, "surge_mds_sessions"), 1) << page;
  EXPECT_EQ(sample(page, "surge_mds_targets{state=\"up\"}"), 1) << page;
  EXPECT_EQ(sample(page, "surge_mds_targets{state=\"down\"}"), 0) << page;
  EXPECT_GE(sample(page, "surge_mds_inodes"), 1) << page;  // the root, an estimate
  EXPECT_GE(sample(page, "surge_mds_dentries"), 0) << page;
}

TEST_F(MdsMetricsTest, OtherPathsAre404) {
  start();
  EXPECT_NE(http_get(port_, "/other").find("HTTP/1.1 404"), std::string::npos);
}

TEST_F(MdsMetricsTest, BadListenAddressStopsTheDaemonWithAMessage) {
  std::ofstream(config_) << "[server]\nmetrics_listen = \"nohost\"\n";
  EXPECT_THROW(start(), std::runtime_error);
  std::ifstream log(tmp_.path() + "/mds.log");
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("metrics listen 'nohost'"), std::string::npos) << text;
  // The error names the daemon's endpoint (common/daemon: start_metrics).
  EXPECT_NE(text.find("surge-mds metrics endpoint"), std::string::npos) << text;
}

}  // namespace
}  // namespace surge::mds::testing
