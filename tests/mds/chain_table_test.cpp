// ChainTable on a real RocksDB: formation spreads heads and survivors,
// every change bumps versions and survives a reload, member states follow
// target deaths and returns, resync reports, replacement after absence,
// drain, and placement rotates over healthy chains.
#include "mds/cluster/chain_table.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <set>

#include "mds/kv/rocksdb_kv_store.h"

namespace surge::mds {
namespace {

namespace pb = ::surge::proto::mds;

constexpr uint64_t kNow = 1'000'000;

ChainShape ec(uint32_t k, uint32_t m) {
  ChainShape s;
  s.scheme = pb::SCHEME_EC;
  s.ec_data = k;
  s.ec_parity = m;
  return s;
}

ChainShape replicas(uint32_t n) {
  ChainShape s;
  s.scheme = pb::SCHEME_REPLICAS;
  s.replicas = n;
  return s;
}

std::vector<TargetView> views(const std::vector<uint32_t>& ids, std::set<uint32_t> down = {},
                              std::set<uint32_t> draining = {}, std::set<uint32_t> full = {}) {
  std::vector<TargetView> v;
  for (uint32_t id : ids) {
    TargetView t;
    t.id = id;
    t.alive = down.count(id) == 0;
    t.draining = draining.count(id) != 0;
    t.full = full.count(id) != 0;
    t.free_bytes = 100ull << 30;
    v.push_back(t);
  }
  return v;
}

std::vector<uint32_t> members(const pb::Chain& c) {
  std::vector<uint32_t> v;
  for (const auto& m : c.members()) v.push_back(m.target_id());
  return v;
}

pb::ChainMemberState state_of(const pb::Chain& c, uint32_t target) {
  for (const auto& m : c.members()) {
    if (m.target_id() == target) return m.state();
  }
  return pb::MEMBER_UNKNOWN;
}

class ChainTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/surge-chain-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    open();
  }
  void TearDown() override {
    table_.reset();
    kv_.reset();
    std::filesystem::remove_all(dir_);
  }
  void open() {
    RocksKvOptions ko;
    ko.path = dir_ + "/db";
    auto kv = RocksKvStore::Open(ko);
    ASSERT_TRUE(kv.ok()) << kv.status().ToString();
    kv_ = std::move(*kv);
    table_ = std::make_unique<ChainTable>(opts_);
    ASSERT_TRUE(table_->load(kv_.get()).ok());
  }
  void save() {
    KvBatch b;
    table_->persist(b);
    ASSERT_TRUE(kv_->commit(b).ok());
  }
  void reopen() {
    save();
    table_.reset();
    kv_.reset();
    open();
  }
  pb::ChainTable shipped() const {
    pb::ChainTable t;
    table_->fill(&t);
    return t;
  }
  const pb::Chain& chain(uint32_t id) const { return *table_->find(id); }
  // The chains of the table whose members include target.
  std::vector<uint32_t> with(uint32_t target) const { return table_->chains_of(target); }
  // MdsNoteStandIn: the member at stand_in stands in for data position p
  // of chain cid, under its current version.
  Status note_stand_in(uint32_t cid, uint32_t p, uint32_t stand_in) {
    pb::NoteStandInRequest note;
    note.set_chain_id(cid);
    note.set_chain_version(chain(cid).version());
    note.set_position(p);
    note.set_stand_in_target_id(stand_in);
    return table_->note_stand_in(note);
  }
  // A 2+1 chain over targets 1-3 whose data position 1 died and had its
  // writes taken by the parity (noted): the chain and its members by
  // position (data 0, data 1, parity 0).
  struct StoodIn {
    uint32_t cid = 0;
    std::vector<uint32_t> m;
  };
  StoodIn ec21_data1_stood_in() {
    StoodIn s;
    EXPECT_TRUE(*table_->form(ec(2, 1), {1, 2, 3}, kNow));
    s.cid = with(1).front();
    s.m = members(chain(s.cid));
    EXPECT_TRUE(table_->reconcile(views({1, 2, 3}, {s.m[1]}), kNow));
    EXPECT_TRUE(note_stand_in(s.cid, 1, s.m[2]).ok());
    return s;
  }

  ChainTableOptions opts_;
  std::string dir_;
  std::unique_ptr<RocksKvStore> kv_;
  std::unique_ptr<ChainTable> table_;
};

TEST_F(ChainTableTest, FormationMakesEveryTargetHeadAndTailEqually) {
  const std::vector<uint32_t> t = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(*table_->form(replicas(3), t, kNow));
  std::map<uint32_t, int> heads, tails, in;
  const auto all = shipped();
  for (const auto& c : all.chains()) {
    auto m = members(c);
    ASSERT_EQ(m.size(), 3u);
    EXPECT_EQ(std::set<uint32_t>(m.begin(), m.end()).size(), 3u) << "distinct members";
    ++heads[m.front()];
    ++tails[m.back()];
    for (uint32_t id : m) ++in[id];
    EXPECT_EQ(c.health(), pb::CHAIN_HEALTHY);
  }
  // 6 targets, width 3: strides 1 and 2 (floor(5 / 2)), 6 chains each.
  EXPECT_EQ(all.chains_size(), 12);
  for (uint32_t id : t) {
    EXPECT_EQ(heads[id], 2) << "target " << id;
    EXPECT_EQ(tails[id], 2) << "target " << id;
    EXPECT_EQ(in[id], 6) << "target " << id;
  }
}

TEST_F(ChainTableTest, ALostTargetsChainsSurviveOnManyTargets) {
  ASSERT_TRUE(*table_->form(replicas(2), {1, 2, 3, 4, 5, 6, 7, 8, 9}, kNow));
  std::set<uint32_t> partners;
  for (uint32_t id : with(5)) {
    for (uint32_t m : members(chain(id))) {
      if (m != 5) partners.insert(m);
    }
  }
  // Strides 1..4: neighbours at distance 1..4 on both sides.
  EXPECT_EQ(partners.size(), 8u);
}

TEST_F(ChainTableTest, TooFewTargetsForTheWidthIsNoSpace) {
  auto r = table_->form(replicas(4), {1, 2, 3}, kNow);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNoSpace);
  EXPECT_NE(r.status().message().find("replicas 4"), std::string::npos);
}

TEST_F(ChainTableTest, TableAndVersionsSurviveReload) {
  ASSERT_TRUE(*table_->form(replicas(2), {1, 2, 3}, kNow));
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}, {2}), kNow));
  const uint64_t v = table_->version();
  const auto before = shipped();
  reopen();
  EXPECT_EQ(table_->version(), v);
  const auto after = shipped();
  ASSERT_EQ(after.chains_size(), before.chains_size());
  for (int i = 0; i < after.chains_size(); ++i) {
    EXPECT_EQ(after.chains(i).SerializeAsString(), before.chains(i).SerializeAsString());
  }
  // Ids are never reused: a new shape gets ids above every old one.
  uint32_t max_id = 0;
  for (const auto& c : after.chains()) max_id = std::max(max_id, c.chain_id());
  ASSERT_TRUE(*table_->form(replicas(1), {1, 2, 3}, kNow));
  for (uint32_t id : with(1)) {
    if (chain(id).replicas() == 1) {
      EXPECT_GT(id, max_id);
    }
  }
}

TEST_F(ChainTableTest, FormingAgainChangesNothing) {
  ASSERT_TRUE(*table_->form(replicas(2), {1, 2, 3}, kNow));
  const uint64_t v = table_->version();
  EXPECT_FALSE(*table_->form(replicas(2), {1, 2, 3}, kNow));
  EXPECT_EQ(table_->version(), v);
}

TEST_F(ChainTableTest, DeadTargetGoesOfflineAndBumpsOnlyItsChains) {
  ASSERT_TRUE(*table_->form(replicas(2), {1, 2, 3}, kNow));
  const auto before = shipped();
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}, {3}), kNow));
  EXPECT_GT(table_->version(), before.version());
  for (const auto& c : before.chains()) {
    const pb::Chain& now = chain(c.chain_id());
    const bool had3 = state_of(c, 3) != pb::MEMBER_UNKNOWN;
    if (had3) {
      EXPECT_EQ(state_of(now, 3), pb::MEMBER_OFFLINE);
      EXPECT_EQ(now.version(), table_->version());
      EXPECT_EQ(table_->shipped(now).health(), pb::CHAIN_DEGRADED);
    } else {
      EXPECT_EQ(now.version(), c.version()) << "chain " << c.chain_id() << " did not change";
    }
  }
  EXPECT_FALSE(table_->reconcile(views({1, 2, 3}, {3}), kNow + 1)) << "nothing more to do";
}

TEST_F(ChainTableTest, ReturningTargetSyncsAtTheTailThenServes) {
  ASSERT_TRUE(*table_->form(replicas(2), {1, 2, 3}, kNow));
  uint32_t cid = 0;
  for (uint32_t id : with(1)) {
    if (members(chain(id)).front() == 1) cid = id;  // target 1 is the head
  }
  ASSERT_NE(cid, 0u);
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}, {1}), kNow));
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}), kNow + 5));
  const pb::Chain& c = chain(cid);
  EXPECT_EQ(members(c).back(), 1u) << "rejoins at the tail";
  EXPECT_EQ(state_of(c, 1), pb::MEMBER_SYNCING);
  EXPECT_EQ(table_->shipped(c).health(), pb::CHAIN_RESYNCING);

  pb::ReportChainSyncRequest r;
  r.set_chain_id(cid);
  r.set_chain_version(c.version());
  r.set_target_id(1);
  r.set_source_target_id(members(c).front());
  r.set_bytes_total(100);
  r.set_bytes_done(40);
  auto progress = table_->sync_report(r, kNow + 1000);
  ASSERT_TRUE(progress.ok()) << progress.status().ToString();
  ASSERT_EQ(progress->sync_size(), 1);
  EXPECT_EQ(progress->sync(0).bytes_done(), 40u);
  EXPECT_EQ(state_of(chain(cid), 1), pb::MEMBER_SYNCING) << "progress alone changes no state";

  r.set_bytes_done(100);
  r.set_done(true);
  const uint64_t v = chain(cid).version();
  auto done = table_->sync_report(r, kNow + 2000);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(state_of(chain(cid), 1), pb::MEMBER_SERVING);
  EXPECT_GT(chain(cid).version(), v);
  EXPECT_EQ(done->health(), pb::CHAIN_HEALTHY);
}

TEST_F(ChainTableTest, SyncDoneUnderAnOldVersionIsStale) {
  ASSERT_TRUE(*table_->form(replicas(3), {1, 2, 3}, kNow));
  const uint32_t cid = with(1).front();
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}, {1}), kNow));
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}), kNow + 1));
  const uint64_t synced_under = chain(cid).version();
  // Another member dies while target 1 syncs: a new version.
  const uint32_t other = members(chain(cid)).front();
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}, {other}), kNow + 2));
  pb::ReportChainSyncRequest r;
  r.set_chain_id(cid);
  r.set_chain_version(synced_under);
  r.set_target_id(1);
  r.set_done(true);
  auto st = table_->sync_report(r, kNow + 3);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), Code::kStaleChain);
  EXPECT_EQ(state_of(chain(cid), 1), pb::MEMBER_SYNCING);
}

TEST_F(ChainTableTest, SyncReportForAMemberThatIsNotSyncingIsRefused) {
  ASSERT_TRUE(*table_->form(replicas(2), {1, 2, 3}, kNow));
  const uint32_t cid = with(1).front();
  pb::ReportChainSyncRequest r;
  r.set_chain_id(cid);
  r.set_chain_version(chain(cid).version());
  r.set_target_id(1);
  r.set_done(true);
  EXPECT_EQ(table_->sync_report(r, kNow).status().code(), Code::kInvalidArgument);
  r.set_chain_id(999);
  EXPECT_EQ(table_->sync_report(r, kNow).status().code(), Code::kNotFound);
}

TEST_F(ChainTableTest, OnlyTheLastMemberToServeComesBackServing) {
  ASSERT_TRUE(*table_->form(replicas(2), {1, 2}, kNow));
  const uint32_t cid = with(1).front();
  ASSERT_TRUE(table_->reconcile(views({1, 2}, {1}), kNow));      // 1 dies, 2 serves alone
  ASSERT_TRUE(table_->reconcile(views({1, 2}, {1, 2}), kNow + 1));  // then 2 dies
  EXPECT_EQ(chain(cid).last_serving_target(), 2u);
  EXPECT_EQ(table_->shipped(chain(cid)).health(), pb::CHAIN_UNAVAILABLE);
  // 1 returns first: its copy is older than 2's, so it may not serve.
  table_->reconcile(views({1, 2}, {2}), kNow + 2);
  EXPECT_EQ(state_of(chain(cid), 1), pb::MEMBER_OFFLINE);
  // 2 returns: it serves at once, and 1 then resyncs from it.
  ASSERT_TRUE(table_->reconcile(views({1, 2}), kNow + 3));
  EXPECT_EQ(state_of(chain(cid), 2), pb::MEMBER_SERVING);
  EXPECT_EQ(state_of(chain(cid), 1), pb::MEMBER_SYNCING);
  EXPECT_EQ(members(chain(cid)), (std::vector<uint32_t>{2, 1}));
}

// The resync source dies while its successor syncs (issue 18): the
// syncing member holds only part of the data and nobody can send it the
// rest, so it leaves the write chain too, instead of staying SYNCING as
// the chain's only write member (its head, taking writes alone); when the
// source returns it serves and the other resyncs from it.
TEST_F(ChainTableTest, SyncingMemberGoesOfflineWithTheLastServingOne) {
  ASSERT_TRUE(*table_->form(replicas(2), {1, 2}, kNow));
  const uint32_t cid = with(1).front();
  ASSERT_TRUE(table_->reconcile(views({1, 2}, {1}), kNow));      // 1 dies, 2 serves alone
  ASSERT_TRUE(table_->reconcile(views({1, 2}), kNow + 1));       // 1 returns: syncing
  ASSERT_EQ(state_of(chain(cid), 1), pb::MEMBER_SYNCING);
  ASSERT_TRUE(table_->reconcile(views({1, 2}, {2}), kNow + 2));  // its source dies
  EXPECT_EQ(state_of(chain(cid), 2), pb::MEMBER_OFFLINE);
  EXPECT_EQ(state_of(chain(cid), 1), pb::MEMBER_OFFLINE) << "no write member without a server";
  EXPECT_EQ(chain(cid).last_serving_target(), 2u);
  EXPECT_EQ(table_->shipped(chain(cid)).health(), pb::CHAIN_UNAVAILABLE);
  ASSERT_TRUE(table_->reconcile(views({1, 2}), kNow + 3));  // 2 returns
  EXPECT_EQ(state_of(chain(cid), 2), pb::MEMBER_SERVING);
  EXPECT_EQ(state_of(chain(cid), 1), pb::MEMBER_SYNCING);
  EXPECT_EQ(members(chain(cid)), (std::vector<uint32_t>{2, 1})) << "the syncing member at the tail";
}

TEST_F(ChainTableTest, AbsentTargetIsReplacedSpreadOverTheOthers) {
  opts_.replace_after_ms = 60000;
  table_.reset();
  kv_.reset();
  open();
  ASSERT_TRUE(*table_->form(replicas(2), {1, 2, 3, 4, 5, 6}, kNow));
  const std::vector<uint32_t> lost = with(3);
  ASSERT_GE(lost.size(), 4u);
  const auto all = views({1, 2, 3, 4, 5, 6}, {3});
  ASSERT_TRUE(table_->reconcile(all, kNow));
  EXPECT_FALSE(table_->reconcile(all, kNow + 59999)) << "not yet";
  ASSERT_TRUE(table_->reconcile(all, kNow + 60000));
  std::map<uint32_t, int> took;
  for (uint32_t cid : lost) {
    const pb::Chain& c = chain(cid);
    EXPECT_EQ(state_of(c, 3), pb::MEMBER_UNKNOWN) << "chain " << cid << " no longer lists 3";
    ASSERT_EQ(c.members_size(), 2);
    const uint32_t newcomer = members(c).back();
    EXPECT_EQ(state_of(c, newcomer), pb::MEMBER_SYNCING);
    EXPECT_EQ(table_->shipped(c).health(), pb::CHAIN_REBUILDING);
    ++took[newcomer];
  }
  // No single target takes all of the lost target's chains.
  EXPECT_GE(took.size(), 3u);
  for (const auto& [id, n] : took) EXPECT_LE(n, 2) << "target " << id;
}

TEST_F(ChainTableTest, DrainMovesEveryChainOffTheTarget) {
  ASSERT_TRUE(*table_->form(replicas(2), {1, 2, 3, 4}, kNow));
  ASSERT_GT(table_->memberships(2), 0u);
  for (int round = 0; round < 20 && table_->memberships(2) > 0; ++round) {
    table_->reconcile(views({1, 2, 3, 4}, {}, {2}), kNow + round);
    // Every newcomer syncs; its source reports done.
    const auto table = shipped();
    for (const auto& c : table.chains()) {
      for (const auto& m : c.members()) {
        if (m.state() != pb::MEMBER_SYNCING) continue;
        EXPECT_NE(m.target_id(), 2u) << "never a newcomer on the draining target";
        EXPECT_EQ(state_of(c, 2), pb::MEMBER_SERVING) << "it keeps serving meanwhile";
        pb::ReportChainSyncRequest r;
        r.set_chain_id(c.chain_id());
        r.set_chain_version(c.version());
        r.set_target_id(m.target_id());
        r.set_done(true);
        ASSERT_TRUE(table_->sync_report(r, kNow + round).ok());
      }
    }
  }
  EXPECT_EQ(table_->memberships(2), 0u);
  const auto table = shipped();
  for (const auto& c : table.chains()) {
    EXPECT_EQ(c.members_size(), 2) << "chain " << c.chain_id();
    EXPECT_EQ(c.moves_size(), 0);
  }
}

TEST_F(ChainTableTest, PlacementRotatesOverEveryHead) {
  ASSERT_TRUE(*table_->form(replicas(2), {1, 2, 3}, kNow));
  std::map<uint32_t, int> heads;
  for (int i = 0; i < 60; ++i) {
    auto picked = table_->pick(replicas(2), 1, views({1, 2, 3}));
    ASSERT_EQ(picked.size(), 1u);
    ++heads[members(chain(picked[0])).front()];
  }
  ASSERT_EQ(heads.size(), 3u);
  for (const auto& [id, n] : heads) EXPECT_EQ(n, 20) << "target " << id;
}

TEST_F(ChainTableTest, PlacementNamesDistinctChainsPerFile) {
  ASSERT_TRUE(*table_->form(replicas(2), {1, 2, 3, 4}, kNow));
  auto picked = table_->pick(replicas(2), 4, views({1, 2, 3, 4}));
  ASSERT_EQ(picked.size(), 4u);
  EXPECT_EQ(std::set<uint32_t>(picked.begin(), picked.end()).size(), 4u);
}

TEST_F(ChainTableTest, PlacementAvoidsDownFullAndDrainingTargets) {
  ASSERT_TRUE(*table_->form(replicas(2), {1, 2, 3, 4}, kNow));
  for (auto v : {views({1, 2, 3, 4}, {}, {}, {4}), views({1, 2, 3, 4}, {}, {4}, {})}) {
    for (int i = 0; i < 20; ++i) {
      for (uint32_t cid : table_->pick(replicas(2), 2, v)) {
        EXPECT_EQ(state_of(chain(cid), 4), pb::MEMBER_UNKNOWN) << "chain " << cid;
      }
    }
  }
  // A down target: its chains drop it from their write chain, and the
  // healthy chains without it are chosen.
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3, 4}, {4}), kNow));
  for (int i = 0; i < 20; ++i) {
    for (uint32_t cid : table_->pick(replicas(2), 2, views({1, 2, 3, 4}, {4}))) {
      EXPECT_NE(state_of(chain(cid), 4), pb::MEMBER_SERVING);
    }
  }
}

TEST_F(ChainTableTest, DegradedChainsStillPlaceWhenNoHealthyOneIsLeft) {
  ASSERT_TRUE(*table_->form(replicas(3), {1, 2, 3}, kNow));
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}, {2}), kNow));
  auto picked = table_->pick(replicas(3), 1, views({1, 2, 3}, {2}));
  ASSERT_EQ(picked.size(), 1u);
  EXPECT_EQ(state_of(chain(picked[0]), 2), pb::MEMBER_OFFLINE);
}

TEST_F(ChainTableTest, NewTargetGetsChainsAndOldFormationStopsPlacing) {
  ASSERT_TRUE(*table_->form(replicas(2), {1, 2, 3}, kNow));
  ASSERT_TRUE(table_->reform_all({1, 2, 3, 4}, kNow));
  EXPECT_GT(table_->memberships(4), 0u);
  for (int i = 0; i < 40; ++i) {
    for (uint32_t cid : table_->pick(replicas(2), 1, views({1, 2, 3, 4}))) {
      EXPECT_TRUE(chain(cid).placement());
    }
  }
}

// EC chains (issue 16): K + M distinct targets in positions, every target
// in every position equally often, so the data and parity chunks of
// consecutive files rotate over the targets.
TEST_F(ChainTableTest, EcFormationPutsEveryPositionOnEveryTargetEqually) {
  ASSERT_TRUE(*table_->form(ec(4, 2), {1, 2, 3, 4, 5, 6, 7, 8}, kNow));
  std::map<std::pair<int, uint32_t>, int> at;  // (position, target) -> chains
  int chains = 0;
  const pb::ChainTable table = shipped();
  for (const auto& c : table.chains()) {
    if (!ec(4, 2).matches(c)) continue;
    ++chains;
    const auto m = members(c);
    ASSERT_EQ(m.size(), 6u) << "chain " << c.chain_id();
    EXPECT_EQ(std::set<uint32_t>(m.begin(), m.end()).size(), 6u) << "chain " << c.chain_id();
    for (size_t p = 0; p < m.size(); ++p) ++at[{static_cast<int>(p), m[p]}];
  }
  ASSERT_GT(chains, 0);
  ASSERT_EQ(at.size(), 6u * 8u);  // every (position, target) occurs
  for (const auto& [pt, n] : at) EXPECT_EQ(n, chains / 8) << "position " << pt.first << " target " << pt.second;
}

TEST_F(ChainTableTest, EcWiderThanTheTargetsIsNoSpace) {
  auto r = table_->form(ec(4, 2), {1, 2, 3, 4, 5}, kNow);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNoSpace);
  EXPECT_NE(r.status().message().find("ec 4+2 need 6 data servers, 5 registered"), std::string::npos)
      << r.status().message();
}

TEST_F(ChainTableTest, EcPlacementAvoidsDownFullAndDrainingTargets) {
  ASSERT_TRUE(*table_->form(ec(2, 1), {1, 2, 3, 4}, kNow));
  for (auto v : {views({1, 2, 3, 4}, {}, {}, {4}), views({1, 2, 3, 4}, {}, {4}, {})}) {
    for (int i = 0; i < 20; ++i) {
      auto picked = table_->pick(ec(2, 1), 1, v);
      ASSERT_EQ(picked.size(), 1u);
      EXPECT_EQ(state_of(chain(picked[0]), 4), pb::MEMBER_UNKNOWN) << "chain " << picked[0];
    }
  }
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3, 4}, {4}), kNow));
  for (int i = 0; i < 20; ++i) {
    auto picked = table_->pick(ec(2, 1), 2, views({1, 2, 3, 4}, {4}));
    ASSERT_FALSE(picked.empty());
    for (uint32_t cid : picked) {
      EXPECT_EQ(state_of(chain(cid), 4), pb::MEMBER_UNKNOWN) << "chain " << cid;
    }
  }
}

// An EC chain with an offline position takes new files only while K + 1
// positions serve: a 2+1 chain with one out would give a new file no loss
// to spare.
TEST_F(ChainTableTest, EcChainWithFewerThanKPlusOneServingTakesNoNewFile) {
  ASSERT_TRUE(*table_->form(ec(2, 1), {1, 2, 3}, kNow));
  ASSERT_FALSE(table_->pick(ec(2, 1), 1, views({1, 2, 3})).empty());
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}, {2}), kNow));
  EXPECT_TRUE(table_->pick(ec(2, 1), 1, views({1, 2, 3}, {2})).empty());
}

// With K + M equal to the targets every chain holds every target: one down
// leaves K + 1 serving in each (4+2), and new files still go to them (the
// stand-in takes the offline position's writes); a second down leaves K,
// and they take none.
TEST_F(ChainTableTest, EcChainsWithOneOfMPositionsOutStillTakeNewFiles) {
  ASSERT_TRUE(*table_->form(ec(4, 2), {1, 2, 3, 4, 5, 6}, kNow));
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3, 4, 5, 6}, {3}), kNow));
  auto picked = table_->pick(ec(4, 2), 2, views({1, 2, 3, 4, 5, 6}, {3}));
  ASSERT_EQ(picked.size(), 2u);
  for (uint32_t cid : picked)
    EXPECT_EQ(state_of(chain(cid), 3), pb::MEMBER_OFFLINE) << "chain " << cid;
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3, 4, 5, 6}, {3, 5}), kNow + 1));
  EXPECT_TRUE(table_->pick(ec(4, 2), 1, views({1, 2, 3, 4, 5, 6}, {3, 5})).empty());
}

// Where healthy EC chains are enough, a chain with a position out takes no
// new file (born with a loss already, its writes slower by the stand-in).
TEST_F(ChainTableTest, EcPlacementPrefersChainsWithEveryPositionServing) {
  ASSERT_TRUE(*table_->form(ec(4, 2), {1, 2, 3, 4, 5, 6, 7, 8}, kNow));
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3, 4, 5, 6, 7, 8}, {8}), kNow));
  for (int i = 0; i < 40; ++i) {
    auto picked = table_->pick(ec(4, 2), 1, views({1, 2, 3, 4, 5, 6, 7, 8}, {8}));
    ASSERT_EQ(picked.size(), 1u);
    EXPECT_EQ(state_of(chain(picked[0]), 8), pb::MEMBER_UNKNOWN) << "chain " << picked[0];
  }
}

// An EC chain with fewer than K members serving can rebuild nobody (a
// rebuild reads K others): data members that return are taken back
// serving as they are (nothing is written to a data position while its
// member is away), and so is a parity member that went together with it:
// no chain version with K serving was made since, so no write landed
// (EcParityThatMissedWritesIsNotTakenBackAsItIs is the other case).
TEST_F(ChainTableTest, EcDataMembersReturnServingWhenFewerThanKServe) {
  ASSERT_TRUE(*table_->form(ec(2, 1), {1, 2, 3}, kNow));
  const uint32_t cid = with(1).front();
  const auto m = members(chain(cid));  // by position: data 0, data 1, parity 0
  ASSERT_EQ(m.size(), 3u);
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}, {m[1], m[2]}), kNow));  // data 1 and parity die
  ASSERT_EQ(state_of(chain(cid), m[1]), pb::MEMBER_OFFLINE);
  ASSERT_EQ(state_of(chain(cid), m[2]), pb::MEMBER_OFFLINE);
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}), kNow + 1));  // both return
  EXPECT_EQ(state_of(chain(cid), m[1]), pb::MEMBER_SERVING);
  EXPECT_EQ(state_of(chain(cid), m[2]), pb::MEMBER_SERVING);
}

// With K members serving, a returning data member syncs as before.
TEST_F(ChainTableTest, EcDataMemberSyncsWhenKServe) {
  ASSERT_TRUE(*table_->form(ec(2, 1), {1, 2, 3}, kNow));
  const uint32_t cid = with(1).front();
  const auto m = members(chain(cid));
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}, {m[0]}), kNow));
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}), kNow + 1));
  EXPECT_EQ(state_of(chain(cid), m[0]), pb::MEMBER_SYNCING);
}

// A data position whose writes went to a stand-in while its member was
// away (MdsNoteStandIn) holds stale chunks: its member is never taken back
// as it is, even with fewer than K serving; it syncs once K serve, and
// the mark goes when it serves again.
TEST_F(ChainTableTest, EcDataMemberStoodInForIsRebuiltNotTakenBackAsItIs) {
  const auto [cid, m] = ec21_data1_stood_in();
  ASSERT_FALSE(HasFailure());
  EXPECT_TRUE(chain(cid).members(1).stood_in());
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}, {m[0], m[1]}), kNow + 1));  // data 0 too
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}), kNow + 2));                // both return
  EXPECT_EQ(state_of(chain(cid), m[0]), pb::MEMBER_SERVING);                 // as it is
  EXPECT_EQ(state_of(chain(cid), m[1]), pb::MEMBER_SYNCING);                 // rebuilt
  pb::ReportChainSyncRequest done;
  done.set_chain_id(cid);
  done.set_chain_version(chain(cid).version());
  done.set_target_id(m[1]);
  done.set_source_target_id(m[1]);
  done.set_done(true);
  ASSERT_TRUE(table_->sync_report(done, kNow + 3).ok());
  EXPECT_EQ(state_of(chain(cid), m[1]), pb::MEMBER_SERVING);
  EXPECT_FALSE(chain(cid).members(1).stood_in());
}

// A data member being rebuilt (stood in for) and the parity go: fewer than
// K serve, so no write can land (the data servers refuse), and the parity,
// back, missed nothing: it serves as it is, and the rebuild goes on. Before,
// it waited to sync from K serving, the rebuild waited for it, for good.
TEST_F(ChainTableTest, EcParityBackAsItIsWhenNoWriteCouldLandSinceItWent) {
  const auto [cid, m] = ec21_data1_stood_in();
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}), kNow + 1));  // data 1 back: rebuilt
  ASSERT_EQ(state_of(chain(cid), m[1]), pb::MEMBER_SYNCING);
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}, {m[2]}), kNow + 2));  // the parity dies
  ASSERT_EQ(state_of(chain(cid), m[2]), pb::MEMBER_OFFLINE);
  EXPECT_TRUE(chain(cid).members(2).current_while_away());
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}), kNow + 3));  // and returns
  EXPECT_EQ(state_of(chain(cid), m[2]), pb::MEMBER_SERVING);
  EXPECT_EQ(state_of(chain(cid), m[1]), pb::MEMBER_SYNCING);
}

// Session 38's limit: a 2+1 chain whose data member 1 was stood in for
// loses its parity, then data member 0, and all three restart. The last to
// serve comes back first, the parity (no write could land since it went)
// as it is, and the marked member is rebuilt from them; before, the parity
// waited to sync and the marked member for K to serve, for good.
TEST_F(ChainTableTest, EcChainStoodInForHealsAfterAWholeRestart) {
  const auto [cid, m] = ec21_data1_stood_in();
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}, {m[1], m[2]}), kNow + 1));        // the parity
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}, {m[0], m[1], m[2]}), kNow + 2));  // data 0
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}), kNow + 3));  // all three restart
  (void)table_->reconcile(views({1, 2, 3}), kNow + 4);         // anything left in turn
  EXPECT_EQ(state_of(chain(cid), m[0]), pb::MEMBER_SERVING);
  EXPECT_EQ(state_of(chain(cid), m[2]), pb::MEMBER_SERVING);
  EXPECT_EQ(state_of(chain(cid), m[1]), pb::MEMBER_SYNCING);
}

// A parity member away while K served missed writes: it is not taken back
// as it is when fewer than K serve later; it syncs once K serve.
TEST_F(ChainTableTest, EcParityThatMissedWritesIsNotTakenBackAsItIs) {
  ASSERT_TRUE(*table_->form(ec(2, 1), {1, 2, 3}, kNow));
  const uint32_t cid = with(1).front();
  const auto m = members(chain(cid));
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}, {m[2]}), kNow));  // the parity dies: K serve
  EXPECT_FALSE(chain(cid).members(2).current_while_away());
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}, {m[1], m[2]}), kNow + 1));  // data 1 too
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}, {m[1]}), kNow + 2));        // the parity returns
  EXPECT_NE(state_of(chain(cid), m[2]), pb::MEMBER_SERVING);
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}), kNow + 3));  // data 1 returns as it is
  EXPECT_EQ(state_of(chain(cid), m[1]), pb::MEMBER_SERVING);
  EXPECT_EQ(state_of(chain(cid), m[2]), pb::MEMBER_SYNCING);
}

// Only the offline member of a data position, under the chain's version.
TEST_F(ChainTableTest, EcStandInNoteRefusedUnlessTheDataMemberIsOffline) {
  ASSERT_TRUE(*table_->form(ec(2, 1), {1, 2, 3}, kNow));
  const uint32_t cid = with(1).front();
  pb::NoteStandInRequest note;
  note.set_chain_id(cid);
  note.set_chain_version(chain(cid).version());
  note.set_position(0);
  EXPECT_EQ(table_->note_stand_in(note).code(), Code::kStaleChain);  // it serves
  const auto m = members(chain(cid));
  ASSERT_TRUE(table_->reconcile(views({1, 2, 3}, {m[0]}), kNow));
  EXPECT_EQ(table_->note_stand_in(note).code(), Code::kStaleChain);  // an older version
  note.set_chain_version(chain(cid).version());
  note.set_position(2);
  EXPECT_EQ(table_->note_stand_in(note).code(), Code::kInvalidArgument);  // parity
  note.set_position(0);
  EXPECT_TRUE(table_->note_stand_in(note).ok());
  EXPECT_FALSE(chain(cid).members(1).stood_in());
  EXPECT_TRUE(chain(cid).members(0).stood_in());
}

TEST_F(ChainTableTest, EcPlacementRotatesOverEveryFirstPosition) {
  ASSERT_TRUE(*table_->form(ec(4, 2), {1, 2, 3, 4, 5, 6}, kNow));
  std::map<uint32_t, int> first;
  for (int i = 0; i < 60; ++i) {
    auto picked = table_->pick(ec(4, 2), 1, views({1, 2, 3, 4, 5, 6}));
    ASSERT_EQ(picked.size(), 1u);
    ++first[members(chain(picked[0])).front()];
  }
  ASSERT_EQ(first.size(), 6u);
  for (const auto& [id, n] : first) EXPECT_EQ(n, 10) << "target " << id;
}

}  // namespace
}  // namespace surge::mds
