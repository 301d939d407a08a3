// Truncates of EC files while positions are lost (issue 16;
// docs/redundancy.md, "EC truncates and lost positions"): 4 real data
// servers, a 2+2 file of 64 KiB units in one slot (its chain holds all four
// targets). A truncate made while data position 0's server is down stays
// pending at the MDS (the data position cannot cut); position 1 applies it
// when a write reaches it, and that write goes on past position 1's cut.
// Then position 1's server is lost too. A fresh client must read exactly
// what the file holds: position 0's bytes past the cut as zeros (it never
// applied the truncate, its parity still encodes the old bytes), position
// 1's new write as written (its parity knows it applied the truncate).
// Both servers return, are rebuilt, the MDS applies the truncate, and the
// file still reads the same, with every parity window consistent.
#include <gtest/gtest.h>

#include <string>

#include "tests/client/ec_small_group.h"

namespace surge::test {
namespace {

using EcTruncate = EcSmallGroup;

TEST_F(EcTruncate, DegradedReadsSeeEachLostPositionCutAsItWas) {
  const int d0 = server_of(0), d1 = server_of(1);
  ASSERT_GE(d0, 0);
  ASSERT_GE(d1, 0);
  ASSERT_TRUE(cluster_->kill_ods(d0).ok());
  // 1.5 units: position 0 keeps one unit, position 1 half of one.
  const uint64_t cut = kGroup - kUnit / 2;
  ASSERT_TRUE(client_->truncate("/ec/f", cut).ok());
  model_.resize(cut);
  // Half a unit at the start of position 1's unit of the last group: the
  // file grows again; position 1 cuts first, then writes.
  const std::string w = random_bytes(kUnit / 2, 6);
  const uint64_t at = 3 * kGroup + kUnit;
  {
    auto f = client_->open("/ec/f", O_RDWR);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    auto n = client_->pwrite(**f, w.data(), w.size(), at);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    ASSERT_TRUE(client_->fsync(**f, false).ok());
    ASSERT_TRUE(client_->close(*f).ok());
  }
  model_.resize(at, '\0');
  model_ += w;
  EXPECT_EQ(differs(), "") << "with position 0's server down";
  ASSERT_TRUE(cluster_->kill_ods(d1).ok());
  // Both data positions rebuilt from the two parity positions.
  EXPECT_EQ(differs(), "") << "with both data positions' servers down";

  ASSERT_TRUE(cluster_->start_ods(d0).ok());
  ASSERT_TRUE(cluster_->start_ods(d1).ok());
  ASSERT_NO_FATAL_FAILURE(wait_healthy());
  EXPECT_EQ(differs(), "") << "after both were rebuilt";
  EXPECT_EQ(scrub_finds(), "");
}

}  // namespace
}  // namespace surge::test
