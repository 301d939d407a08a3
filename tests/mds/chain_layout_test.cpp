// Chains through the namespace and the cluster map (docs/redundancy.md):
// setstripe --replicas, format 2 layouts and their chains, the
// default_replicas setting, placement spreading small files over every
// target, failure reports checked by a probe, resync reports, and the chain
// table surviving an MDS restart.
#include <map>
#include <set>

#include "tests/mds/mds_fixture.h"

namespace surge::mds::testing {
namespace {

class ChainLayoutTest : public NamespaceTest {
 protected:
  Status setstripe(uint64_t ino, uint32_t replicas, uint32_t count = 0) {
    pb::Layout l;
    l.set_stripe_count(count);
    if (replicas != 0) {
      l.set_scheme(pb::SCHEME_REPLICAS);
      l.set_replicas(replicas);
    }
    return set_layout(ino, l);
  }
};

TEST_F(ChainLayoutTest, ReplicatedDirectoryGivesNewFilesChainsOfThatWidth) {
  auto d = mkdir(kRoot, "r2");
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(setstripe(d->ino(), 2, 3).ok());
  auto f = create(d->ino(), "f");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const pb::Layout& l = f->layout();
  EXPECT_EQ(l.format(), 2u);
  EXPECT_EQ(l.scheme(), pb::SCHEME_REPLICAS);
  EXPECT_EQ(l.replicas(), 2u);
  EXPECT_EQ(l.targets_size(), 0);
  ASSERT_EQ(l.chains_size(), 3);
  EXPECT_EQ(std::set<uint32_t>(l.chains().begin(), l.chains().end()).size(), 3u);
  const auto m = map_->snapshot();
  for (uint32_t id : l.chains()) {
    const pb::Chain* c = find_chain(m, id);
    ASSERT_NE(c, nullptr) << "chain " << id << " is in the shipped map";
    EXPECT_EQ(c->replicas(), 2u);
    EXPECT_EQ(c->members_size(), 2);
  }
}

TEST_F(ChainLayoutTest, SubdirectoriesAndTheirFilesInheritReplicas) {
  auto d = mkdir(kRoot, "r3");
  ASSERT_TRUE(setstripe(d->ino(), 3).ok());
  auto sub = mkdir(d->ino(), "sub");
  ASSERT_TRUE(sub.ok());
  auto f = create(sub->ino(), "f");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->layout().replicas(), 3u);
  auto dl = get_layout(sub->ino());
  ASSERT_TRUE(dl.ok());
  EXPECT_EQ(dl->layout().scheme(), pb::SCHEME_REPLICAS);
  EXPECT_EQ(dl->layout().replicas(), 3u);
}

TEST_F(ChainLayoutTest, MoreReplicasThanTargetsIsRefused) {
  auto d = mkdir(kRoot, "r4");
  Status st = setstripe(d->ino(), 4);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("replicas 4 must be 1..3"), std::string::npos) << st.message();
}

TEST_F(ChainLayoutTest, DirectoriesWithoutASchemeKeepFormatOne) {
  auto f = create(kRoot, "plain");
  ASSERT_TRUE(f.ok());
  EXPECT_LE(f->layout().format(), 1u);
  EXPECT_EQ(f->layout().chains_size(), 0);
  EXPECT_EQ(f->layout().targets_size(), 3);
}

TEST_F(ChainLayoutTest, DefaultReplicasAppliesWhereNoDirectorySaysOtherwise) {
  ns_opts_.default_replicas = 2;
  reopen();
  auto f = create(kRoot, "f");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->layout().format(), 2u);
  EXPECT_EQ(f->layout().replicas(), 2u);
  auto d = mkdir(kRoot, "single");
  ASSERT_TRUE(setstripe(d->ino(), 1).ok());
  auto g = create(d->ino(), "g");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->layout().replicas(), 1u);
}

TEST_F(ChainLayoutTest, DefaultReplicasBeyondTheTargetsIsClamped) {
  ns_opts_.default_replicas = 5;
  reopen();
  auto f = create(kRoot, "f");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->layout().replicas(), 3u);
}

TEST_F(ChainLayoutTest, SmallFilesSpreadOverEveryTarget) {
  auto d = mkdir(kRoot, "small");
  ASSERT_TRUE(setstripe(d->ino(), 1, 1).ok());
  std::map<uint32_t, int> first;
  for (int i = 0; i < 30; ++i) {
    auto f = create(d->ino(), "f" + std::to_string(i));
    ASSERT_TRUE(f.ok());
    ASSERT_EQ(f->layout().chains_size(), 1);
    const auto m = map_->snapshot();
    ++first[find_chain(m, f->layout().chains(0))->members(0).target_id()];
  }
  ASSERT_EQ(first.size(), 3u);
  for (const auto& [t, n] : first) EXPECT_EQ(n, 10) << "target " << t;
}

TEST_F(ChainLayoutTest, GetstripeShowsEachChainWithItsMembers) {
  auto d = mkdir(kRoot, "g");
  ASSERT_TRUE(setstripe(d->ino(), 2, 2).ok());
  auto f = create(d->ino(), "f");
  ASSERT_TRUE(f.ok());
  auto l = get_layout(f->ino());
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->chains_size(), 2);
  for (const auto& c : l->chains()) {
    EXPECT_EQ(c.members_size(), 2);
    EXPECT_EQ(c.health(), pb::CHAIN_HEALTHY);
    for (const auto& m : c.members()) EXPECT_EQ(m.state(), pb::MEMBER_SERVING);
  }
}

TEST_F(ChainLayoutTest, ChainTableSurvivesRestart) {
  auto d = mkdir(kRoot, "keep");
  ASSERT_TRUE(setstripe(d->ino(), 2).ok());
  auto f = create(d->ino(), "f");
  ASSERT_TRUE(f.ok());
  const auto before = map_->snapshot();
  register_targets_ = false;
  reopen();
  const auto after = map_->snapshot();
  EXPECT_EQ(after.chains().version(), before.chains().version());
  ASSERT_EQ(after.chains().chains_size(), before.chains().chains_size());
  for (uint32_t id : f->layout().chains()) EXPECT_NE(find_chain(after, id), nullptr);
}

pb::ReportTargetFailureRequest failure_of(uint32_t target) {
  pb::ReportTargetFailureRequest r;
  r.set_target_id(target);
  r.set_code(static_cast<uint32_t>(Code::kConnectionRefused));
  r.set_message("connect: refused");
  r.set_reporter("test client");
  return r;
}

TEST_F(ChainLayoutTest, AReportedTargetThatFailsTheProbeLeavesItsChainsAtOnce) {
  auto d = mkdir(kRoot, "fail");
  ASSERT_TRUE(setstripe(d->ino(), 2).ok());
  ASSERT_TRUE(create(d->ino(), "f").ok());
  const uint64_t v = map_->version();
  objects_.dead_addresses.insert("tcp://127.0.0.1:7102");  // target 2
  auto r = map_->report_target_failure(failure_of(2), [this](const std::string& a) {
    return objects_.probe(a);
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->state(), pb::TARGET_DOWN);
  EXPECT_GT(r->map_version(), v);
  const auto m = map_->snapshot();
  for (const auto& c : m.chains().chains()) {
    for (const auto& mem : c.members()) {
      if (mem.target_id() == 2) {
        EXPECT_EQ(mem.state(), pb::MEMBER_OFFLINE) << "chain " << c.chain_id();
      }
    }
  }
  // New files at once avoid it: no chain whose write chain holds target 2.
  for (int i = 0; i < 10; ++i) {
    auto f = create(d->ino(), "g" + std::to_string(i));
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    const auto now = map_->snapshot();
    for (uint32_t id : f->layout().chains()) {
      for (const auto& mem : find_chain(now, id)->members()) {
        if (mem.target_id() == 2) {
          EXPECT_EQ(mem.state(), pb::MEMBER_OFFLINE);
        }
      }
    }
  }
}

TEST_F(ChainLayoutTest, AReportedTargetThatAnswersTheProbeStays) {
  auto d = mkdir(kRoot, "live");
  ASSERT_TRUE(setstripe(d->ino(), 2).ok());
  ASSERT_TRUE(create(d->ino(), "f").ok());
  const uint64_t v = map_->version();
  auto r = map_->report_target_failure(failure_of(2), [this](const std::string& a) {
    return objects_.probe(a);
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state(), pb::TARGET_UP);
  EXPECT_EQ(map_->version(), v);
}

TEST_F(ChainLayoutTest, AReportNamingAnUnknownTargetIsNotFound) {
  auto r = map_->report_target_failure(failure_of(42), [](const std::string&) {
    return Status::OK();
  });
  EXPECT_EQ(r.status().code(), Code::kNotFound);
}

TEST_F(ChainLayoutTest, ReturningTargetResyncsAndServesWhenItsSourceSaysDone) {
  auto d = mkdir(kRoot, "back");
  ASSERT_TRUE(setstripe(d->ino(), 2).ok());
  ASSERT_TRUE(create(d->ino(), "f").ok());
  objects_.dead_addresses.insert("tcp://127.0.0.1:7103");
  ASSERT_TRUE(map_->report_target_failure(failure_of(3), [this](const std::string& a) {
                     return objects_.probe(a);
                   }).ok());
  // Target 3 heartbeats again: in each of its chains it syncs at the tail.
  pb::TargetHeartbeatRequest hb;
  hb.set_target_id(3);
  hb.set_address("tcp://127.0.0.1:7103");
  hb.set_free_bytes(50ull << 30);
  ASSERT_TRUE(map_->heartbeat(hb).ok());
  auto m = map_->snapshot();
  std::vector<const pb::Chain*> syncing;
  for (const auto& c : m.chains().chains()) {
    if (c.members_size() > 0 && c.members(c.members_size() - 1).target_id() == 3 &&
        c.members(c.members_size() - 1).state() == pb::MEMBER_SYNCING) {
      syncing.push_back(&c);
    }
  }
  ASSERT_FALSE(syncing.empty());
  for (const pb::Chain* c : syncing) {
    EXPECT_EQ(c->health(), pb::CHAIN_RESYNCING);
    pb::ReportChainSyncRequest r;
    r.set_chain_id(c->chain_id());
    r.set_chain_version(c->version());
    r.set_target_id(3);
    r.set_source_target_id(c->members(0).target_id());
    r.set_done(true);
    auto done = map_->report_chain_sync(r);
    ASSERT_TRUE(done.ok()) << done.status().ToString();
    EXPECT_EQ(done->chain().health(), pb::CHAIN_HEALTHY);
  }
}

// A restarted MDS assumes every target alive until the heartbeat timeout
// says otherwise (so new files place at once), but a member its chains
// lost stays OFFLINE until that target is heard from again: the absence
// clock keeps running and no dead target is made SYNCING.
TEST_F(ChainLayoutTest, AnOfflineMemberStaysOfflineAcrossAnMdsRestartUntilHeard) {
  auto d = mkdir(kRoot, "restart");
  ASSERT_TRUE(setstripe(d->ino(), 2).ok());
  ASSERT_TRUE(create(d->ino(), "f").ok());
  objects_.dead_addresses.insert("tcp://127.0.0.1:7103");
  ASSERT_TRUE(map_->report_target_failure(failure_of(3), [this](const std::string& a) {
                     return objects_.probe(a);
                   }).ok());
  auto states_of_3 = [&] {
    std::multiset<int> s;
    const auto m = map_->snapshot();
    for (const auto& c : m.chains().chains()) {
      for (const auto& m : c.members()) {
        if (m.target_id() == 3) s.insert(m.state());
      }
    }
    return s;
  };
  const auto before = states_of_3();
  ASSERT_FALSE(before.empty());
  ASSERT_EQ(before.count(pb::MEMBER_OFFLINE), before.size());
  register_targets_ = false;
  reopen();
  (void)map_->check_liveness(ClusterMap::now_ms());  // a pass of the collector loop
  EXPECT_EQ(states_of_3(), before) << "target 3 was taken back before it was heard from";
  pb::TargetHeartbeatRequest hb;
  hb.set_target_id(3);
  hb.set_address("tcp://127.0.0.1:7103");
  hb.set_free_bytes(50ull << 30);
  ASSERT_TRUE(map_->heartbeat(hb).ok());
  EXPECT_GT(states_of_3().count(pb::MEMBER_SYNCING), 0u) << "heard again, it resyncs";
}

TEST_F(ChainLayoutTest, DrainedTargetReportsWhenItHoldsNothing) {
  auto d = mkdir(kRoot, "drain");
  ASSERT_TRUE(setstripe(d->ino(), 1).ok());
  ASSERT_TRUE(create(d->ino(), "f").ok());
  auto t = map_->set_draining(1, true);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->drained());
  EXPECT_GT(t->chain_memberships(), 0u);
  // Each of target 1's chains got a newcomer; the sources report done.
  for (int round = 0; round < 5; ++round) {
    const auto m = map_->snapshot();
    for (const auto& c : m.chains().chains()) {
      for (const auto& mem : c.members()) {
        if (mem.state() != pb::MEMBER_SYNCING) continue;
        pb::ReportChainSyncRequest r;
        r.set_chain_id(c.chain_id());
        r.set_chain_version(c.version());
        r.set_target_id(mem.target_id());
        r.set_done(true);
        ASSERT_TRUE(map_->report_chain_sync(r).ok());
      }
    }
  }
  const auto m = map_->snapshot();
  for (const auto& info : m.targets()) {
    if (info.target_id() == 1) {
      EXPECT_EQ(info.chain_memberships(), 0u);
      EXPECT_TRUE(info.drained());
    }
  }
}

}  // namespace
}  // namespace surge::mds::testing
