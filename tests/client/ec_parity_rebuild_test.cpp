// A parity position rebuilt while a data position of its group is still
// lost (issue 16; docs/redundancy.md, "EC rebuild"), on a 2+2 group
// (ec_small_group.h): the servers of data position 0 and parity position
// 3 are SIGKILLed, a client writes to data position 1 (its delta reaches
// parity position 2 only), and parity position 3's server returns while
// data position 0's stays down. Its rebuild cannot read data position 0,
// so it takes that position's bytes from parity position 2 (any K copies
// of a consistent cut); it must serve again. Then parity position 2's
// server is lost too, and a fresh client must read every byte from data
// position 1 and the rebuilt parity alone. Everything returns; the file
// reads the same and every parity window is consistent.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "tests/client/ec_small_group.h"

namespace surge::test {
namespace {

using EcParityRebuild = EcSmallGroup;

TEST_F(EcParityRebuild, ParityPositionIsRebuiltWhileADataPositionIsDown) {
  const int d0 = server_of(0), p2 = server_of(2), p3 = server_of(3);
  ASSERT_GE(d0, 0);
  ASSERT_GE(p2, 0);
  ASSERT_GE(p3, 0);
  ASSERT_TRUE(cluster_->kill_ods(d0).ok());
  ASSERT_TRUE(cluster_->kill_ods(p3).ok());
  // Half a unit at the start of data position 1's unit of group 0.
  const std::string w = random_bytes(kUnit / 2, 9);
  {
    auto f = client_->open("/ec/f", O_RDWR);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    auto n = client_->pwrite(**f, w.data(), w.size(), kUnit);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    ASSERT_TRUE(client_->fsync(**f, false).ok());
    ASSERT_TRUE(client_->close(*f).ok());
  }
  model_.replace(kUnit, w.size(), w);

  ASSERT_TRUE(cluster_->start_ods(p3).ok());
  ASSERT_NO_FATAL_FAILURE(wait_serving(3, std::chrono::seconds(60)));
  ASSERT_TRUE(cluster_->kill_ods(p2).ok());
  EXPECT_EQ(differs(), "") << "from data position 1 and the rebuilt parity position 3";

  ASSERT_TRUE(cluster_->start_ods(d0).ok());
  ASSERT_TRUE(cluster_->start_ods(p2).ok());
  ASSERT_NO_FATAL_FAILURE(wait_healthy());
  EXPECT_EQ(differs(), "");
  EXPECT_EQ(scrub_finds(), "");
}

}  // namespace
}  // namespace surge::test
