// Draining a target in the cluster map (surgectl drain): new layouts avoid
// it, the mark is persisted (MDS restart, re-registration), it is orthogonal
// to liveness (a drained target that goes silent is DOWN and comes back
// DRAINING), and unknown ids are refused by name. Real RocksDB.
#include <set>

#include "tests/mds/mds_fixture.h"

namespace surge::mds::testing {
namespace {

using TargetDrainTest = NamespaceTest;

std::set<uint32_t> layout_targets(const pb::Attr& a) {
  return {a.layout().targets().begin(), a.layout().targets().end()};
}

TEST_F(TargetDrainTest, DrainedTargetGetsNoNewLayouts) {
  const uint64_t v = map_->version();
  auto t = map_->set_draining(2, true);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->draining());
  EXPECT_EQ(t->state(), pb::TARGET_DRAINING);
  EXPECT_GT(map_->version(), v);
  for (int i = 0; i < 8; ++i) {
    auto a = create(kRoot, "f" + std::to_string(i));
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(layout_targets(*a), (std::set<uint32_t>{1, 3})) << "file " << i;
  }
  // Data already there stays reachable.
  EXPECT_TRUE(map_->live_address(2).has_value());
}

TEST_F(TargetDrainTest, UndrainMakesTheTargetEligibleAgain) {
  ASSERT_TRUE(map_->set_draining(2, true).ok());
  auto t = map_->set_draining(2, false);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->state(), pb::TARGET_UP);
  auto a = create(kRoot, "f");  // default stripe count 4, clamped to the 3 up
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(layout_targets(*a), (std::set<uint32_t>{1, 2, 3}));
}

TEST_F(TargetDrainTest, DrainSurvivesRestartAndReRegistration) {
  ASSERT_TRUE(map_->set_draining(3, true).ok());
  reopen();  // reloads the map from RocksDB; the targets register again
  const auto m = map_->snapshot();
  ASSERT_EQ(m.targets_size(), 3);
  EXPECT_TRUE(m.targets(2).draining());
  EXPECT_EQ(m.targets(2).state(), pb::TARGET_DRAINING);
  auto a = create(kRoot, "f");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(layout_targets(*a).count(3), 0u);
}

TEST_F(TargetDrainTest, SilentDrainedTargetIsDownThenDrainingAgain) {
  ASSERT_TRUE(map_->set_draining(1, true).ok());
  map_->check_liveness(ClusterMap::now_ms() + 3600 * 1000);
  EXPECT_EQ(map_->snapshot().targets(0).state(), pb::TARGET_DOWN);
  pb::TargetHeartbeatRequest h;
  h.set_target_id(1);
  ASSERT_TRUE(map_->heartbeat(h).ok());
  EXPECT_EQ(map_->snapshot().targets(0).state(), pb::TARGET_DRAINING);
  const auto c = map_->state_counts();
  EXPECT_EQ(c.draining, 1u);
  EXPECT_EQ(c.down, 2u);  // the other two stayed silent
}

TEST_F(TargetDrainTest, UnknownTargetIsNotFoundByName) {
  auto t = map_->set_draining(99, true);
  ASSERT_EQ(code_of(t), Code::kNotFound);
  EXPECT_NE(t.status().message().find("target 99"), std::string::npos) << t.status().ToString();
}

TEST_F(TargetDrainTest, AllTargetsDrainedIsNoSpaceForNewFiles) {
  for (uint32_t id : {1u, 2u, 3u}) ASSERT_TRUE(map_->set_draining(id, true).ok());
  auto a = create(kRoot, "f");
  EXPECT_EQ(code_of(a), Code::kNoSpace);
  EXPECT_NE(a.status().message().find("3 draining"), std::string::npos) << a.status().ToString();
}

}  // namespace
}  // namespace surge::mds::testing
