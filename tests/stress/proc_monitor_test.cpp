// The stress run's check for descriptors that grow without bound
// (tests/stress/proc_monitor.h), on samples made up here.
#include "tests/stress/proc_monitor.h"

#include <gtest/gtest.h>

#include <vector>

namespace surge::stress {
namespace {

// One sample every 5 s from t0, with these descriptor counts.
Incarnation life(const char* name, pid_t pid, double t0, const std::vector<int>& fds) {
  Incarnation inc{name, pid, {}};
  for (size_t i = 0; i < fds.size(); ++i) inc.samples.push_back({t0 + 5.0 * i, 70 << 10, fds[i]});
  return inc;
}

TEST(DescriptorGrowth, ASurvivorWhoseDescriptorsKeepGrowingIsNamed) {
  // 10 s of warm-up, then 9 samples climbing by 60 each to the end.
  const std::vector<Incarnation> all = {
      life("ods0", 100, 0, {30, 200, 200, 260, 320, 380, 440, 500, 560, 620, 680})};
  EXPECT_NE(descriptor_growth(all, 64).find("ods0 (pid 100)"), std::string::npos);
}

TEST(DescriptorGrowth, ASurvivorBackToItsSteadyStateIsNotNamed) {
  // A burst in the middle (resyncs), then back down by the final sample.
  const std::vector<Incarnation> all = {
      life("ods0", 100, 0, {30, 200, 190, 386, 377, 389, 479, 651, 630, 300, 163})};
  EXPECT_EQ(descriptor_growth(all, 64), "");
}

TEST(DescriptorGrowth, ADaemonKilledInATransientIsNotJudged) {
  // 7 Dec 2026: a data server SIGKILLed while its descriptors were high,
  // as its peers' were; the peer that outlived the run came back down.
  const std::vector<Incarnation> all = {
      life("ods1", 9147, 8.5, {279, 300, 386, 377, 389, 479, 451, 727, 514, 593}),
      life("ods0", 9355, 36, {189, 200, 250, 300, 534, 630, 440, 358, 264, 318, 300, 163})};
  EXPECT_EQ(descriptor_growth(all, 64), "");
}

}  // namespace
}  // namespace surge::stress
