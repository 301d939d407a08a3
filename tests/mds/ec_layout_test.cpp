// EC directories through the namespace and the cluster map (issue 16):
// setstripe with scheme EC gives new files format 2 layouts of K+M chains
// whose members are distinct targets, inherited by subdirectories; K+M
// beyond the data servers is refused; a directory switches between
// replicated and EC (it is one or the other); which chains with a position
// out take new EC files is tests/mds/chain_table_test.cpp's; and the layout
// survives an MDS restart.
#include <map>
#include <set>

#include "mds/cluster/orphan_collector.h"

#include "tests/mds/mds_fixture.h"

namespace surge::mds::testing {
namespace {

constexpr int kTargets = 6;

class EcLayoutTest : public NamespaceTest {
 protected:
  void SetUp() override {
    NamespaceTest::SetUp();
    register_extra();
  }
  // The fixture registers 3 data servers; EC 4+2 needs 6.
  void register_extra() { register_targets(4, kTargets); }
  Status setstripe_ec(uint64_t ino, uint32_t k, uint32_t m, uint32_t count = 0) {
    pb::Layout l;
    l.set_stripe_count(count);
    l.set_scheme(pb::SCHEME_EC);
    l.set_ec_data(k);
    l.set_ec_parity(m);
    return set_layout(ino, l);
  }
  Status setstripe_replicas(uint64_t ino, uint32_t n) {
    pb::Layout l;
    l.set_scheme(pb::SCHEME_REPLICAS);
    l.set_replicas(n);
    return set_layout(ino, l);
  }
  // Every slot's chain is EC k+m with k+m distinct member targets.
  void expect_ec_chains(const pb::Layout& l, uint32_t k, uint32_t m) {
    const auto snap = map_->snapshot();
    for (uint32_t id : l.chains()) {
      const pb::Chain* c = find_chain(snap, id);
      ASSERT_NE(c, nullptr) << "chain " << id << " is in the shipped map";
      EXPECT_EQ(c->scheme(), pb::SCHEME_EC) << "chain " << id;
      EXPECT_EQ(c->ec_data(), k) << "chain " << id;
      EXPECT_EQ(c->ec_parity(), m) << "chain " << id;
      std::set<uint32_t> members;
      for (const auto& mem : c->members()) members.insert(mem.target_id());
      EXPECT_EQ(members.size(), static_cast<size_t>(k + m)) << "chain " << id;
    }
  }
};

TEST_F(EcLayoutTest, EcDirectoryGivesNewFilesEcLayoutsOnDistinctTargets) {
  auto d = mkdir(kRoot, "ec");
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(setstripe_ec(d->ino(), 4, 2, 2).ok());
  auto f = create(d->ino(), "f");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const pb::Layout& l = f->layout();
  EXPECT_EQ(l.format(), 2u);
  EXPECT_EQ(l.scheme(), pb::SCHEME_EC);
  EXPECT_EQ(l.ec_data(), 4u);
  EXPECT_EQ(l.ec_parity(), 2u);
  EXPECT_EQ(l.targets_size(), 0);
  ASSERT_EQ(l.chains_size(), 2);
  EXPECT_NE(l.chains(0), l.chains(1));
  expect_ec_chains(l, 4, 2);
}

TEST_F(EcLayoutTest, SubdirectoriesAndTheirFilesInheritEc) {
  auto d = mkdir(kRoot, "ec");
  ASSERT_TRUE(setstripe_ec(d->ino(), 2, 1).ok());
  auto sub = mkdir(d->ino(), "sub");
  ASSERT_TRUE(sub.ok());
  auto f = create(sub->ino(), "f");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->layout().scheme(), pb::SCHEME_EC);
  EXPECT_EQ(f->layout().ec_data(), 2u);
  EXPECT_EQ(f->layout().ec_parity(), 1u);
  expect_ec_chains(f->layout(), 2, 1);
  auto dl = get_layout(sub->ino());
  ASSERT_TRUE(dl.ok());
  EXPECT_EQ(dl->layout().scheme(), pb::SCHEME_EC);
  EXPECT_EQ(dl->layout().ec_data(), 2u);
  EXPECT_EQ(dl->layout().ec_parity(), 1u);
}

TEST_F(EcLayoutTest, MoreChunksThanTargetsIsRefused) {
  auto d = mkdir(kRoot, "wide");
  Status st = setstripe_ec(d->ino(), 5, 2);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("ec 5+2 needs K >= 1, M >= 1 and K + M <= 6"), std::string::npos)
      << st.message();
  EXPECT_EQ(setstripe_ec(d->ino(), 4, 0).code(), Code::kInvalidArgument);
  // K + M wrapping around 2^32 to 1 is no narrow group.
  EXPECT_EQ(setstripe_ec(d->ino(), 4294967295u, 2).code(), Code::kInvalidArgument);
  EXPECT_EQ(setstripe_ec(d->ino(), 0, 2).code(), Code::kInvalidArgument);
}

// Enough data servers, but wider than the codec encodes (64 chunks).
TEST_F(EcLayoutTest, MoreChunksThanTheCodecTakesIsRefused) {
  for (int i = kTargets; i < 70; ++i) {
    pb::RegisterTargetRequest r;
    r.set_target_id(static_cast<uint32_t>(i + 1));
    r.set_address("tcp://127.0.0.1:" + std::to_string(7101 + i));
    r.set_capacity_bytes(100ull << 30);
    r.set_free_bytes(50ull << 30);
    ASSERT_TRUE(map_->register_target(r).ok());
  }
  auto d = mkdir(kRoot, "widest");
  Status st = setstripe_ec(d->ino(), 60, 5);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("ec 60+5: K + M must be at most 64"), std::string::npos)
      << st.message();
  EXPECT_TRUE(setstripe_ec(d->ino(), 60, 4).ok());
}

// A directory is replicated or EC: setting one replaces the other, for
// the files created after.
TEST_F(EcLayoutTest, ADirectorySwitchesBetweenReplicatedAndEc) {
  auto d = mkdir(kRoot, "both");
  ASSERT_TRUE(setstripe_replicas(d->ino(), 2).ok());
  auto r = create(d->ino(), "r");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->layout().scheme(), pb::SCHEME_REPLICAS);
  ASSERT_TRUE(setstripe_ec(d->ino(), 2, 2).ok());
  auto dl = get_layout(d->ino());
  ASSERT_TRUE(dl.ok());
  EXPECT_EQ(dl->layout().scheme(), pb::SCHEME_EC);
  EXPECT_EQ(dl->layout().replicas(), 0u);
  auto e = create(d->ino(), "e");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->layout().scheme(), pb::SCHEME_EC);
  EXPECT_EQ(e->layout().replicas(), 0u);
  expect_ec_chains(e->layout(), 2, 2);
  // The older file keeps its layout.
  auto again = get_layout(r->ino());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->layout().scheme(), pb::SCHEME_REPLICAS);
  ASSERT_TRUE(setstripe_replicas(d->ino(), 3).ok());
  auto r3 = create(d->ino(), "r3");
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(r3->layout().scheme(), pb::SCHEME_REPLICAS);
  EXPECT_EQ(r3->layout().ec_data(), 0u);
}

// One-stripe files rotate over the chains: every target is position 0
// (the first data chunk) equally often.
TEST_F(EcLayoutTest, SmallEcFilesRotateOverEveryTarget) {
  auto d = mkdir(kRoot, "small");
  ASSERT_TRUE(setstripe_ec(d->ino(), 4, 2, 1).ok());
  std::map<uint32_t, int> first;
  for (int i = 0; i < 36; ++i) {
    auto f = create(d->ino(), "f" + std::to_string(i));
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_EQ(f->layout().chains_size(), 1);
    const auto m = map_->snapshot();
    ++first[find_chain(m, f->layout().chains(0))->members(0).target_id()];
  }
  ASSERT_EQ(first.size(), static_cast<size_t>(kTargets));
  for (const auto& [t, n] : first) EXPECT_EQ(n, 6) << "target " << t;
}

TEST_F(EcLayoutTest, EcLayoutSurvivesRestart) {
  auto d = mkdir(kRoot, "ec");
  ASSERT_TRUE(setstripe_ec(d->ino(), 3, 2, 2).ok());
  auto f = create(d->ino(), "f");
  ASSERT_TRUE(f.ok());
  const pb::Layout before = f->layout();
  reopen();
  register_extra();
  auto after = get_layout(f->ino());
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->layout().SerializeAsString(), before.SerializeAsString());
  auto dl = get_layout(d->ino());
  ASSERT_TRUE(dl.ok());
  EXPECT_EQ(dl->layout().scheme(), pb::SCHEME_EC);
  EXPECT_EQ(dl->layout().ec_data(), 3u);
}

// Removing an unlinked EC file reaches every chunk, data and parity, of
// every slot, each at the member that holds its position (member i holds
// position i of an EC chain; docs/redundancy.md).
TEST_F(EcLayoutTest, UnlinkedEcFileHasEveryDataAndParityChunkRemoved) {
  auto d = mkdir(kRoot, "ec");
  ASSERT_TRUE(setstripe_ec(d->ino(), 2, 1, 2).ok());
  auto f = create(d->ino(), "f");
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(unlink(d->ino(), "f").ok());
  OrphanCollector collector(ns_.get(), map_.get(), sessions_.get(), &objects_,
                            OrphanCollectorOptions{});
  auto st = collector.collect_once();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->collected, 1u);
  std::set<std::pair<uint32_t, uint32_t>> removed;  // (slot, position)
  const pb::ClusterMap m = map_->snapshot();
  for (const ChunkAddress& a : objects_.removed_chunks) {
    EXPECT_EQ(a.ino, f->ino());
    EXPECT_EQ(a.chain_id, f->layout().chains(static_cast<int>(a.slot))) << "slot " << a.slot;
    for (const auto& c : m.chains().chains()) {
      if (c.chain_id() != a.chain_id) continue;
      EXPECT_EQ(a.target_id, c.members(static_cast<int>(a.position)).target_id())
          << "slot " << a.slot << " position " << a.position;
    }
    removed.insert({a.slot, a.position});
  }
  std::set<std::pair<uint32_t, uint32_t>> every;
  for (uint32_t slot = 0; slot < 2; ++slot) {
    for (uint32_t p = 0; p < 3; ++p) every.insert({slot, p});
  }
  EXPECT_EQ(removed, every);
  EXPECT_EQ(code_of(getattr(f->ino())), Code::kNotFound);
}

}  // namespace
}  // namespace surge::mds::testing
