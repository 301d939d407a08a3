// Every data server of an EC group stopped and started again, as a
// whole-cluster restart does (issue 16; docs/redundancy.md, "EC
// rebuild"), on a 2+2 group (ec_small_group.h). With fewer than K members
// serving nobody can be rebuilt (a rebuild reads K others), so members
// returning one at a time used to wait for each other for good. The MDS
// now takes returning data members back as they are; the parity members
// then sync from them. The chain must serve on all four positions again,
// the file read back as written, and every parity window be consistent.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "tests/client/ec_small_group.h"

namespace surge::test {
namespace {

using EcRestart = EcSmallGroup;

TEST_F(EcRestart, GroupHealsAfterEveryServerStopsAndStarts) {
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(cluster_->kill_ods(i).ok()) << "server " << i;
  // The MDS has seen every one go (a quicker restart is never noticed).
  ASSERT_NO_FATAL_FAILURE(wait_serving(0, std::chrono::seconds(30)));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(cluster_->start_ods(i).ok()) << "server " << i;
  ASSERT_NO_FATAL_FAILURE(wait_healthy(std::chrono::seconds(60)));
  EXPECT_EQ(differs(), "");
  EXPECT_EQ(scrub_finds(), "");
}

}  // namespace
}  // namespace surge::test
