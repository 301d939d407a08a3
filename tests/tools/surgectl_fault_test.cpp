// surgectl scrub when a data server is dead: the pass is incomplete and the
// exit status says so (2), naming the target; the others are still checked.
#include "tests/tools/surgectl_fixture.h"

namespace surge::test {
namespace {

using SurgectlScrubFault = SurgectlTest;

TEST_F(SurgectlScrubFault, DeadDataServerIsReportedNotScrubbed) {
  write_new_file("/f", 3u << 20);
  ASSERT_TRUE(cluster_->kill_ods(0).ok());
  // Before the MDS notices (its map still says up): the connection fails.
  std::string out;
  EXPECT_EQ(surgectl("scrub", &out), 2) << out;
  EXPECT_NE(out.find("NOT SCRUBBED"), std::string::npos) << out;
  EXPECT_NE(out.find("0 corrupt blocks, 1 not scrubbed"), std::string::npos) << out;
}

TEST_F(SurgectlScrubFault, TargetMarkedDownIsSkippedAndCounted) {
  write_new_file("/f", 3u << 20);
  ASSERT_TRUE(cluster_->kill_ods(1).ok());
  // The MDS marks it down after its 3 s timeout (tests/client/local_cluster).
  std::string out;
  for (int i = 0; i < 100 && out.find("\"state\":\"down\"") == std::string::npos; ++i) {
    surgectl("--json targets", &out);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_NE(out.find("\"state\":\"down\""), std::string::npos) << out;
  EXPECT_EQ(surgectl("scrub", &out), 2) << out;
  EXPECT_NE(out.find("is down: not scrubbed"), std::string::npos) << out;
}

}  // namespace
}  // namespace surge::test
