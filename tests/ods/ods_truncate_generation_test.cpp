// Truncate generations on real chains (ChunkRef.truncate_seq,
// docs/redundancy.md "Truncate generations"): a request that knows of a
// truncate the chunk has not applied finds the chunk cut to that size, on
// every member; a truncate of a generation already applied (the MDS's
// background pass, late) never cuts what a writer wrote after it; the
// generation is kept across a restart and goes with a whole-chunk send.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tests/ods/chain_cluster.h"

namespace surge::ods::testing {
namespace {

// ref as a client that knows of truncate generation seq, whose size in
// this chunk's terms is size.
pb::ChunkRef knowing(pb::ChunkRef ref, uint64_t seq, uint64_t size) {
  ref.set_truncate_seq(seq);
  ref.set_truncate_size(size);
  return ref;
}

// d cut to size, then grown to grow (zeros), then e at off.
std::vector<std::byte> cut_then(std::vector<std::byte> d, size_t size, size_t off,
                                const std::vector<std::byte>& e) {
  d.resize(size);
  d.resize(std::max(d.size(), off + e.size()));
  std::copy(e.begin(), e.end(), d.begin() + static_cast<std::ptrdiff_t>(off));
  return d;
}

class OdsTruncateGenerationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cl_.start({.data_servers = 3, .replicas = 3});
    cl_.wait_targets_up();
    auto [ino, chain_id] = cl_.create("g");
    ino_ = ino;
    chain_ = cl_.chain(chain_id);
    members_ = ChainCluster::write_chain(chain_);
    ASSERT_EQ(members_.size(), 3u) << chain_.DebugString();
  }
  pb::ChunkRef ref(uint32_t target) { return ChainCluster::ref(target, chain_, ino_); }
  pb::ChunkRef head() { return ref(members_[0]); }

  // Every member holds exactly want, clean, at generation seq.
  void expect_everywhere(const std::vector<std::byte>& want, uint64_t seq) {
    for (uint32_t m : members_) {
      auto s = cl_.stat(ref(m));
      ASSERT_TRUE(s.ok()) << "target " << m << ": " << s.status().ToString();
      EXPECT_EQ(s->size(), want.size()) << "target " << m;
      EXPECT_FALSE(s->dirty()) << "target " << m;
      EXPECT_EQ(s->truncate_seq(), seq) << "target " << m;
      auto r = cl_.read(ref(m), 0, want.size() + 4096);
      ASSERT_TRUE(r.ok()) << "target " << m << ": " << r.status().ToString();
      EXPECT_TRUE(*r == want) << "target " << m << " holds other bytes";
    }
  }

  ChainCluster cl_;
  uint64_t ino_ = 0;
  mpb::Chain chain_;
  std::vector<uint32_t> members_;
};

TEST_F(OdsTruncateGenerationTest, AWriteOfANewerGenerationCutsTheChunkFirstOnEveryMember) {
  const auto d = pattern(1 << 20, 1);
  ASSERT_TRUE(cl_.write(head(), 0, d).ok());
  const auto e = pattern(4096, 2);
  auto w = cl_.write(knowing(head(), 1, 1000), 500000, e);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->object_size(), 500000u + e.size());
  expect_everywhere(cut_then(d, 1000, 500000, e), 1);
}

TEST_F(OdsTruncateGenerationTest, ASmallWriteOfANewerGenerationCutsTheChunkToo) {
  // One unit, not sync: the pipelined path at the head.
  const auto d = pattern(300000, 3);
  ASSERT_TRUE(cl_.write(head(), 0, d).ok());
  const auto e = pattern(100, 4);
  ASSERT_TRUE(cl_.write(knowing(head(), 4, 50), 200, e).ok());
  expect_everywhere(cut_then(d, 50, 200, e), 4);
}

TEST_F(OdsTruncateGenerationTest, AReadOrStatOfANewerGenerationSeesTheChunkCut) {
  const auto d = pattern(1 << 20, 5);
  ASSERT_TRUE(cl_.write(head(), 0, d).ok());
  for (uint32_t m : members_) {
    auto r = cl_.read(knowing(ref(m), 1, 1000), 0, d.size());
    ASSERT_TRUE(r.ok()) << "target " << m << ": " << r.status().ToString();
    EXPECT_TRUE(*r == std::vector<std::byte>(d.begin(), d.begin() + 1000)) << "target " << m;
    auto past = cl_.read(knowing(ref(m), 1, 1000), 2000, 4096);
    ASSERT_TRUE(past.ok()) << past.status().ToString();
    EXPECT_TRUE(past->empty()) << "target " << m << " answered bytes past the truncate";
    auto s = cl_.stat(knowing(ref(m), 1, 1000));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->size(), 1000u) << "target " << m;
  }
  // Nothing was changed: a reader of before the truncate sees it all.
  expect_everywhere(d, 0);
}

TEST_F(OdsTruncateGenerationTest, ALateTruncateOfAnAppliedGenerationCutsNothing) {
  const auto d = pattern(1 << 20, 6);
  ASSERT_TRUE(cl_.write(head(), 0, d).ok());
  ASSERT_TRUE(cl_.truncate(knowing(head(), 1, 1000), 1000).ok());
  std::vector<std::byte> want(d.begin(), d.begin() + 1000);
  expect_everywhere(want, 1);

  // A writer of generation 1 writes past the size, then the MDS's pass
  // sends generation 1's truncate again (late, or a resend).
  const auto e = pattern(8192, 7);
  ASSERT_TRUE(cl_.write(knowing(head(), 1, 1000), 2000, e).ok());
  ASSERT_TRUE(cl_.truncate(knowing(head(), 1, 1000), 1000).ok());
  want = cut_then(want, 1000, 2000, e);
  expect_everywhere(want, 1);

  // A newer generation cuts again; a plain truncate (no generation) still
  // applies and keeps the generation.
  ASSERT_TRUE(cl_.truncate(knowing(head(), 2, 2500), 2500).ok());
  want.resize(2500);
  expect_everywhere(want, 2);
  ASSERT_TRUE(cl_.truncate(head(), 100).ok());
  want.resize(100);
  expect_everywhere(want, 2);
}

TEST_F(OdsTruncateGenerationTest, ATruncateOfAGenerationNeedsNothingOfAChunkNeverWritten) {
  ASSERT_TRUE(cl_.truncate(knowing(head(), 3, 0), 0).ok());
  for (uint32_t m : members_) {
    EXPECT_EQ(cl_.stat(ref(m)).status().code(), Code::kNotFound)
        << "target " << m << ": a truncate of a generation made a chunk";
  }
  // A chunk no longer than the truncate's size takes the generation at
  // the head with no update; the next update carries it down the chain.
  const auto d = pattern(500, 8);
  ASSERT_TRUE(cl_.write(head(), 0, d).ok());
  ASSERT_TRUE(cl_.truncate(knowing(head(), 4, 800), 800).ok());
  auto s = cl_.stat(head());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->truncate_seq(), 4u);
  EXPECT_EQ(s->size(), 500u);
  const auto e = pattern(100, 9);
  ASSERT_TRUE(cl_.write(head(), 1000, e).ok());
  expect_everywhere(cut_then(d, 500, 1000, e), 4);
}

// One member away while a writer cuts the chunk; it comes back and gets
// the chunk whole, with its generation: as head it must not cut again
// what was written after the cut.
// A setstripe's removal of the old layout (the MDS's pass, late) carries
// the setstripe's generation: a chunk of the same name that a writer of the
// new layout made under it stays on every member; an older one goes.
TEST_F(OdsTruncateGenerationTest, ARemovalOfAnOlderGenerationSparesWhatTheNewOneWrote) {
  const auto d = pattern(300000, 11);
  ASSERT_TRUE(cl_.write(head(), 0, d).ok());
  const auto e = pattern(5000, 12);
  ASSERT_TRUE(cl_.write(knowing(head(), 2, 0), 0, e).ok());
  auto kept = cl_.remove(knowing(head(), 2, 0));
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  expect_everywhere(e, 2);

  auto gone = cl_.remove(knowing(head(), 3, 0));
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  for (uint32_t m : members_) {
    EXPECT_EQ(cl_.stat(ref(m)).status().code(), Code::kNotFound) << "target " << m;
  }
}

TEST(OdsTruncateGenerationResync, TheGenerationSurvivesARestartAndGoesWithAWholeChunkSend) {
  ChainCluster cl;
  cl.start({.data_servers = 2, .replicas = 2, .target_timeout_ms = 1000});
  cl.wait_targets_up();
  auto [ino, chain_id] = cl.create("r");
  mpb::Chain c = cl.chain(chain_id);
  const auto d = pattern(400000, 10);
  ASSERT_TRUE(cl.write(ChainCluster::ref(ChainCluster::write_chain(c)[0], c, ino), 0, d).ok());

  const uint32_t away = cl.ods(1).id, stays = cl.ods(0).id;
  cl.ods(1).proc.kill(SIGKILL);
  c = cl.wait_chain(chain_id, [&](const mpb::Chain& x) {
    return ChainCluster::write_chain(x) == std::vector<uint32_t>{stays};
  });
  const auto e = pattern(5000, 11);
  auto w = cl.write(knowing(ChainCluster::ref(stays, c, ino), 5, 3000), 10000, e);
  ASSERT_TRUE(w.ok()) << w.status().ToString() << cl.chain_events();
  const auto want = cut_then(d, 3000, 10000, e);

  cl.restart_ods(1);
  ASSERT_EQ(cl.ods(1).id, away);
  c = cl.wait_chain(chain_id, [](const mpb::Chain& x) {
    int serving = 0;
    for (const auto& m : x.members()) serving += m.state() == mpb::MEMBER_SERVING;
    return serving == 2;
  });
  for (uint32_t m : {stays, away}) {
    auto s = cl.stat(ChainCluster::ref(m, c, ino));
    ASSERT_TRUE(s.ok()) << "target " << m << ": " << s.status().ToString();
    EXPECT_EQ(s->truncate_seq(), 5u) << "target " << m;
    auto r = cl.read(knowing(ChainCluster::ref(m, c, ino), 5, 3000), 0, 1 << 20);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(*r == want) << "target " << m << " holds other bytes";
  }

  // The kept copy restarts too: the generation is on its disk.
  const int stays_index = cl.index_of(stays);
  cl.ods(stays_index).proc.kill(SIGKILL);
  cl.wait_chain(chain_id, [&](const mpb::Chain& x) {
    return ChainCluster::write_chain(x) == std::vector<uint32_t>{away};
  });
  cl.restart_ods(stays_index);
  c = cl.wait_chain(chain_id, [](const mpb::Chain& x) {
    int serving = 0;
    for (const auto& m : x.members()) serving += m.state() == mpb::MEMBER_SERVING;
    return serving == 2;
  });
  // Whoever heads the chain now, a writer of generation 5 cuts nothing.
  const uint32_t head = ChainCluster::write_chain(c)[0];
  const auto f = pattern(10, 12);
  ASSERT_TRUE(cl.write(knowing(ChainCluster::ref(head, c, ino), 5, 3000), 0, f).ok())
      << cl.chain_events();
  auto again = want;
  std::copy(f.begin(), f.end(), again.begin());
  for (uint32_t m : {stays, away}) {
    auto r = cl.read(ChainCluster::ref(m, c, ino), 0, 1 << 20);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(*r == again) << "target " << m << " holds other bytes after the restart";
  }
}

// A setstripe moved slot 0 of a file from chain A to chain B, and a target
// is a member of both: the new layout's write under B (generation 1)
// drops the old chunk that target holds under A, and the old layout's
// removal under A (generation 1, the MDS's pass, late) leaves B's chunk
// alone on every member while it removes A's elsewhere.
TEST(OdsTruncateGenerationSetstripe, ANewLayoutsChunkReplacesTheOldOneUnderAnotherChain) {
  ChainCluster cl;
  cl.start({.data_servers = 3, .replicas = 2});
  cl.wait_targets_up();
  const uint64_t ino = cl.create("s").first;
  mpb::Chain a, b;
  uint32_t shared = 0;
  const mpb::ClusterMap m = cl.map();
  for (const auto& x : m.chains().chains()) {
    for (const auto& y : m.chains().chains()) {
      if (shared != 0 || x.chain_id() == y.chain_id()) continue;
      for (uint32_t t : ChainCluster::write_chain(x)) {
        const auto yw = ChainCluster::write_chain(y);
        if (std::find(yw.begin(), yw.end(), t) != yw.end()) {
          a = x, b = y, shared = t;
          break;
        }
      }
    }
  }
  ASSERT_NE(shared, 0u) << "no two chains share a target: " << m.chains().DebugString();
  const auto aw = ChainCluster::write_chain(a), bw = ChainCluster::write_chain(b);

  const auto d = pattern(200000, 13);
  ASSERT_TRUE(cl.write(ChainCluster::ref(aw[0], a, ino), 0, d).ok());
  const auto e = pattern(7000, 14);
  auto w = cl.write(knowing(ChainCluster::ref(bw[0], b, ino), 1, 0), 0, e);
  ASSERT_TRUE(w.ok()) << "target " << shared << " holds it under chain " << a.chain_id() << ": "
                      << w.status().ToString();
  auto gone = cl.remove(knowing(ChainCluster::ref(aw[0], a, ino), 1, 0));
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();

  for (uint32_t t : bw) {
    auto s = cl.stat(ChainCluster::ref(t, b, ino));
    ASSERT_TRUE(s.ok()) << "target " << t << ": " << s.status().ToString();
    EXPECT_EQ(s->size(), e.size()) << "target " << t;
    EXPECT_EQ(s->truncate_seq(), 1u) << "target " << t;
    auto r = cl.read(ChainCluster::ref(t, b, ino), 0, e.size() + 4096);
    ASSERT_TRUE(r.ok()) << "target " << t << ": " << r.status().ToString();
    EXPECT_TRUE(*r == e) << "target " << t << " holds other bytes";
  }
  for (uint32_t t : aw) {
    if (std::find(bw.begin(), bw.end(), t) != bw.end()) continue;
    EXPECT_EQ(cl.stat(ChainCluster::ref(t, a, ino)).status().code(), Code::kNotFound)
        << "target " << t << " still holds the old layout's chunk";
  }
}

}  // namespace
}  // namespace surge::ods::testing
