// Cluster map (registration, heartbeats, down marking, versions, layout
// placement), client sessions, and the orphan collector against a fake
// data-server client.
#include <fcntl.h>

#include <map>

#include "tests/mds/mds_fixture.h"

namespace surge::mds::testing {
namespace {

using ClusterTest = NamespaceTest;

pb::RegisterTargetRequest reg(uint32_t id, const std::string& addr, uint64_t free = 10ull << 30) {
  pb::RegisterTargetRequest r;
  r.set_target_id(id);
  r.set_address(addr);
  r.set_capacity_bytes(20ull << 30);
  r.set_free_bytes(free);
  return r;
}

TEST_F(ClusterTest, NewTargetGetsFreshIdAndBumpsVersion) {
  const uint64_t v = map_->version();
  auto r = map_->register_target(reg(0, "tcp://127.0.0.1:7200"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->target_id(), 4u);
  EXPECT_EQ(r->fs_id(), ns_->fs_id());
  EXPECT_GT(map_->version(), v);
}

TEST_F(ClusterTest, TargetTableSurvivesRestart) {
  auto r = map_->register_target(reg(0, "tcp://127.0.0.1:7200"));
  ASSERT_TRUE(r.ok());
  register_targets_ = false;
  reopen();
  EXPECT_TRUE(map_->known(r->target_id()));
  auto again = map_->register_target(reg(0, "tcp://127.0.0.1:7201"));
  EXPECT_GT(again->target_id(), r->target_id());  // ids are never reused
}

TEST_F(ClusterTest, ReRegistrationUpdatesAddress) {
  ASSERT_TRUE(map_->register_target(reg(2, "tcp://127.0.0.1:9999")).ok());
  EXPECT_EQ(*map_->live_address(2), "tcp://127.0.0.1:9999");
}

TEST_F(ClusterTest, HeartbeatFromUnknownTargetIsNotFound) {
  pb::TargetHeartbeatRequest h;
  h.set_target_id(77);
  EXPECT_EQ(code_of(map_->heartbeat(h)), Code::kNotFound);
}

TEST_F(ClusterTest, SilentTargetGoesDownAndGetsNoLayouts) {
  const uint64_t v = map_->version();
  // Every target's last heartbeat is "now"; one hour later all are silent.
  EXPECT_EQ(map_->check_liveness(ClusterMap::now_ms() + 3600 * 1000), 3);
  EXPECT_GT(map_->version(), v);
  EXPECT_FALSE(map_->live_address(1).has_value());
  EXPECT_EQ(code_of(create(kRoot, "f")), Code::kNoSpace);
  pb::TargetHeartbeatRequest h;
  h.set_target_id(1);
  h.set_address("tcp://127.0.0.1:7101");
  h.set_free_bytes(50ull << 30);  // a heartbeat reports space; 0 free is full
  ASSERT_TRUE(map_->heartbeat(h).ok());
  auto f = create(kRoot, "f");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->layout().targets_size(), 1);
  EXPECT_EQ(f->layout().targets(0), 1u);
}

// Leadership as a test sets it.
class SwitchedLeader : public Leadership {
 public:
  bool leading = true;
  bool is_leader() const override { return leading; }
  std::string leader() const override { return leading ? "tcp://self" : "tcp://other"; }
  void begin(const std::string&) override {}
  std::string self() const override { return "tcp://self"; }
  Result<std::vector<std::string>> members() const override {
    return std::vector<std::string>{"tcp://self", "tcp://other"};
  }
};

// The map keeps a pointer to it: it outlives the map (TearDown drops the map).
class LivenessTest : public ClusterTest {
 protected:
  void SetUp() override {
    ClusterTest::SetUp();
    map_->set_leadership(&lead_);
  }
  SwitchedLeader lead_;
};

pb::TargetHeartbeatRequest beat(uint32_t id) {
  pb::TargetHeartbeatRequest h;
  h.set_target_id(id);
  h.set_address("tcp://127.0.0.1:710" + std::to_string(id));
  h.set_free_bytes(50ull << 30);
  return h;
}

// A data server that reaches an MDS but not the leader must not flap
// between DOWN (the leader) and UP (the other MDS).
TEST_F(LivenessTest, ADownTargetHeardByAnotherMdsStaysDown) {
  ASSERT_EQ(map_->check_liveness(ClusterMap::now_ms() + 3600 * 1000), 3);
  lead_.leading = false;
  const uint64_t v = map_->version();
  ASSERT_TRUE(map_->heartbeat(beat(1)).ok());
  ASSERT_TRUE(map_->register_target(reg(2, "tcp://127.0.0.1:7102")).ok());
  EXPECT_FALSE(map_->live_address(1).has_value()) << "a heartbeat to a follower raised target 1";
  EXPECT_FALSE(map_->live_address(2).has_value()) << "registering with a follower raised target 2";
  EXPECT_EQ(map_->version(), v);
}

TEST_F(LivenessTest, ALeaderRaisesTargetsHeardWhileItFollowed) {
  ASSERT_EQ(map_->check_liveness(ClusterMap::now_ms() + 3600 * 1000), 3);
  lead_.leading = false;
  ASSERT_TRUE(map_->heartbeat(beat(1)).ok());
  ASSERT_TRUE(map_->register_target(reg(2, "tcp://127.0.0.1:7102")).ok());
  lead_.leading = true;
  EXPECT_EQ(map_->check_liveness(ClusterMap::now_ms()), 2);
  EXPECT_TRUE(map_->live_address(1).has_value());
  EXPECT_TRUE(map_->live_address(2).has_value());
  EXPECT_FALSE(map_->live_address(3).has_value()) << "target 3 was not heard since it went down";
}

// Down on a failure report moments after its last heartbeat: the next
// pass must not take it for alive on that old heartbeat.
TEST_F(ClusterTest, APassDoesNotRaiseATargetNotHeardSinceItWentDown) {
  ASSERT_EQ(map_->check_liveness(ClusterMap::now_ms() + 3600 * 1000), 3);
  EXPECT_EQ(map_->check_liveness(ClusterMap::now_ms()), 0);
  EXPECT_FALSE(map_->live_address(1).has_value());
}

TEST_F(LivenessTest, ALeaderRaisesADownTargetOnItsHeartbeat) {
  ASSERT_EQ(map_->check_liveness(ClusterMap::now_ms() + 3600 * 1000), 3);
  ASSERT_TRUE(map_->heartbeat(beat(1)).ok());
  EXPECT_TRUE(map_->live_address(1).has_value());
}

TEST_F(ClusterTest, PlacementFollowsFreeSpace) {
  ASSERT_TRUE(map_->register_target(reg(1, "tcp://127.0.0.1:7101", 30ull << 30)).ok());
  ASSERT_TRUE(map_->register_target(reg(2, "tcp://127.0.0.1:7102", 10ull << 30)).ok());
  ASSERT_TRUE(map_->register_target(reg(3, "tcp://127.0.0.1:7103", 10ull << 30)).ok());
  std::map<uint32_t, int> first;
  for (int i = 0; i < 500; ++i) {
    auto l = map_->pick_layout(1 << 20, 1);
    ASSERT_TRUE(l.ok());
    ++first[l->targets(0)];
  }
  EXPECT_EQ(first[1], 300);
  EXPECT_EQ(first[2], 100);
  EXPECT_EQ(first[3], 100);
}

// Format 1 layouts start on every target in turn: the one stripe of a
// small file lands on each (they used to alternate [1,2,3] and [3,2,1],
// so target 2 never held one).
TEST_F(ClusterTest, ConsecutiveLayoutsStartOnEveryTarget) {
  std::map<uint32_t, int> first;
  for (int i = 0; i < 30; ++i) {
    auto l = map_->pick_layout(1 << 20, 3);
    ASSERT_TRUE(l.ok());
    ASSERT_EQ(l->targets_size(), 3);
    ++first[l->targets(0)];
  }
  EXPECT_EQ(first[1], 10);
  EXPECT_EQ(first[2], 10);
  EXPECT_EQ(first[3], 10);
}

TEST_F(ClusterTest, FullTargetGetsNoNewFiles) {
  ASSERT_TRUE(map_->register_target(reg(2, "tcp://127.0.0.1:7102", 1 << 20)).ok());
  for (int i = 0; i < 10; ++i) {
    auto l = map_->pick_layout(1 << 20, 3);
    ASSERT_TRUE(l.ok());
    for (uint32_t t : l->targets()) EXPECT_NE(t, 2u);
  }
}

TEST_F(ClusterTest, SnapshotListsTargets) {
  auto m = map_->snapshot();
  EXPECT_EQ(m.targets_size(), 3);
  EXPECT_EQ(m.fs_id(), ns_->fs_id());
  EXPECT_EQ(m.version(), map_->version());
}

TEST_F(ClusterTest, TargetsOnOneFileSystemCountItOnce) {
  // The fixture's targets 1..3 move onto one disk; a fourth has its own.
  for (uint32_t id = 1; id <= 3; ++id) {
    auto r = reg(id, "tcp://127.0.0.1:710" + std::to_string(id));
    r.set_filesystem_id("node1 dev 8:1 fsid 00000000000000aa");
    ASSERT_TRUE(map_->register_target(r).ok());
  }
  uint64_t capacity = 0, free = 0;
  map_->space(&capacity, &free);
  EXPECT_EQ(capacity, 20ull << 30);
  EXPECT_EQ(free, 10ull << 30);
  auto other = reg(0, "tcp://127.0.0.1:7104");
  other.set_filesystem_id("node2 dev 8:1 fsid 00000000000000bb");
  ASSERT_TRUE(map_->register_target(other).ok());
  map_->space(&capacity, &free);
  EXPECT_EQ(capacity, 40ull << 30);
}

TEST_F(ClusterTest, TargetsThatReportNoFileSystemEachCount) {
  // Data servers older than filesystem_id: each is its own disk.
  uint64_t capacity = 0, free = 0;
  map_->space(&capacity, &free);
  EXPECT_EQ(capacity, 300ull << 30);  // the fixture's 3 targets of 100 GiB
}

TEST_F(ClusterTest, SessionOpenCloseAndExpiry) {
  const uint64_t s = *sessions_->open_session("host:1");
  ASSERT_TRUE(sessions_->add_open(s, 42).ok());
  EXPECT_TRUE(*sessions_->is_open(42));
  sessions_->release_open(s, 42);
  ASSERT_TRUE(sessions_->flush(SessionTable::Clock::now()).ok());
  EXPECT_FALSE(*sessions_->is_open(42));
  ASSERT_TRUE(sessions_->add_open(s, 43).ok());
  EXPECT_EQ(expire_silent_sessions(), 1);
  EXPECT_FALSE(*sessions_->is_open(43));
  EXPECT_EQ(sessions_->heartbeat(s).code(), Code::kNotFound);
}

class OrphanTest : public NamespaceTest {
 protected:
  std::unique_ptr<OrphanCollector> collector() {
    return std::make_unique<OrphanCollector>(ns_.get(), map_.get(), sessions_.get(), &objects_,
                                             OrphanCollectorOptions{});
  }
};

TEST_F(OrphanTest, UnlinkedFileObjectsRemovedThenInodeDeleted) {
  auto f = create(kRoot, "f");
  ASSERT_TRUE(unlink(kRoot, "f").ok());
  auto st = collector()->collect_once();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->collected, 1u);
  for (uint32_t t : f->layout().targets()) EXPECT_TRUE(objects_.removed.count({t, f->ino()}));
  EXPECT_EQ(code_of(getattr(f->ino())), Code::kNotFound);
  EXPECT_TRUE(ns_->list_orphans(10)->empty());
  expect_clean();
}

TEST_F(OrphanTest, OpenUnlinkedFileIsKeptUntilClosed) {
  const uint64_t s = *sessions_->open_session("host:1");
  auto f = create(kRoot, "f", 0644, root_cred(), true, s, O_RDWR);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(unlink(kRoot, "f").ok());
  auto c = collector();
  EXPECT_EQ(c->collect_once()->still_open, 1u);
  EXPECT_TRUE(getattr(f->ino()).ok());  // fstat on the open file still works
  EXPECT_TRUE(objects_.removed.empty());
  pb::CloseRequest cl;
  cl.set_session_id(s);
  cl.set_ino(f->ino());
  ASSERT_TRUE(ns_->close(cl).ok());
  ASSERT_TRUE(sessions_->flush(SessionTable::Clock::now()).ok());  // the pass before collecting
  EXPECT_EQ(c->collect_once()->collected, 1u);
}

TEST_F(OrphanTest, ExpiredSessionReleasesItsOpens) {
  const uint64_t s = *sessions_->open_session("host:1");
  auto f = create(kRoot, "f", 0644, root_cred(), true, s, O_RDWR);
  ASSERT_TRUE(unlink(kRoot, "f").ok());
  EXPECT_EQ(expire_silent_sessions(), 1);
  EXPECT_EQ(collector()->collect_once()->collected, 1u);
}

TEST_F(OrphanTest, FailingTargetDefersCollection) {
  auto f = create(kRoot, "f");
  ASSERT_TRUE(unlink(kRoot, "f").ok());
  objects_.failing.insert(f->layout().targets(2));
  auto c = collector();
  EXPECT_EQ(c->collect_once()->deferred, 1u);
  EXPECT_TRUE(getattr(f->ino()).ok());
  objects_.failing.clear();
  EXPECT_EQ(c->collect_once()->collected, 1u);
  expect_clean();
}

TEST_F(OrphanTest, DownTargetDefersCollection) {
  auto f = create(kRoot, "f");
  ASSERT_TRUE(unlink(kRoot, "f").ok());
  map_->check_liveness(ClusterMap::now_ms() + 3600 * 1000);
  EXPECT_EQ(collector()->collect_once()->deferred, 1u);
}

TEST_F(OrphanTest, WaitingOrphansDoNotHoldUpTheOnesBehindThem) {
  // More than a batch of orphans that must wait (still open), then one that
  // can go: the next passes must reach it.
  OrphanCollectorOptions o;
  o.batch = 4;
  auto c = std::make_unique<OrphanCollector>(ns_.get(), map_.get(), sessions_.get(), &objects_, o);
  const uint64_t s = *sessions_->open_session("host:1");
  std::vector<pb::Attr> held;
  for (int i = 0; i < 6; ++i) {
    const std::string name = "held" + std::to_string(i);
    auto f = create(kRoot, name, 0644, root_cred(), true, s, O_RDWR);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(unlink(kRoot, name).ok());
    held.push_back(*f);
  }
  auto last = create(kRoot, "last");
  ASSERT_TRUE(last.ok());
  ASSERT_TRUE(unlink(kRoot, "last").ok());
  uint64_t collected = 0;
  for (int pass = 0; pass < 3; ++pass) collected += c->collect_once()->collected;
  EXPECT_EQ(collected, 1u);
  EXPECT_EQ(code_of(getattr(last->ino())), Code::kNotFound);
  for (const auto& f : held) EXPECT_TRUE(getattr(f.ino()).ok());
}

TEST_F(OrphanTest, OrphanListSurvivesRestart) {
  auto f = create(kRoot, "f");
  ASSERT_TRUE(unlink(kRoot, "f").ok());
  reopen();
  EXPECT_EQ(*ns_->list_orphans(10), std::vector<uint64_t>{f->ino()});
  EXPECT_EQ(collector()->collect_once()->collected, 1u);
}

TEST_F(OrphanTest, SymlinkOrphanNeedsNoDataServer) {
  ASSERT_TRUE(symlink(kRoot, "s", "t").ok());
  ASSERT_TRUE(unlink(kRoot, "s").ok());
  EXPECT_EQ(collector()->collect_once()->collected, 1u);
  EXPECT_TRUE(objects_.removed.empty());
}

}  // namespace
}  // namespace surge::mds::testing

namespace surge::mds::testing {
namespace {

// After an MDS restart a client re-records the files it holds open, some of
// them already unlinked; the collector must then keep them.
TEST_F(NamespaceTest, ReRecordedOpenOfUnlinkedFileKeepsIt) {
  auto f = create(kRoot, "f");
  ASSERT_TRUE(unlink(kRoot, "f").ok());
  const uint64_t s = *sessions_->open_session("host:1");
  pb::OpenRequest o;
  *o.mutable_cred() = root_cred();
  o.set_session_id(s);
  o.set_ino(f->ino());
  pb::EntryReply out;
  ASSERT_TRUE(ns_->open(o, &out).ok());
  OrphanCollector c(ns_.get(), map_.get(), sessions_.get(), &objects_, {});
  EXPECT_EQ(c.collect_once()->still_open, 1u);
  EXPECT_TRUE(getattr(f->ino()).ok());
}

}  // namespace
}  // namespace surge::mds::testing
