// Truncates as intents (mds/namespace/namespace_truncate.cpp,
// cluster/truncate_intents.h): the request commits the size, a new
// truncate generation and an intent, and calls no data server; the
// leader's pass sends the truncate with its generation to every chunk and
// deletes the intent; a truncate that finds one pending applies it first;
// an intent waits while a data server fails and is dropped with its file;
// a file another session holds open is truncated before the reply.
// Files of format 1 (legacy objects, no chains) follow the same rules.
#include <fcntl.h>

#include <set>

#include "mds/cluster/truncate_intents.h"
#include "tests/mds/mds_fixture.h"

namespace surge::mds::testing {
namespace {

class TruncateIntentTest : public NamespaceTest {
 protected:
  // A file of replicas 2 striped over 3 chains, in its own directory.
  pb::Attr chained_file(const std::string& name = "f") {
    auto d = mkdir(kRoot, "d" + name);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    pb::Layout l;
    l.set_stripe_count(3);
    l.set_stripe_size(1 << 20);
    l.set_scheme(pb::SCHEME_REPLICAS);
    l.set_replicas(2);
    EXPECT_TRUE(set_layout(d->ino(), l).ok());
    auto f = create(d->ino(), name);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->layout().format(), 2u);
    return *f;
  }
  // What a setstripe gives the file: replicas 2 in one 1 MiB slot.
  static pb::Layout one_slot() {
    pb::Layout l;
    l.set_stripe_count(1);
    l.set_stripe_size(1 << 20);
    l.set_scheme(pb::SCHEME_REPLICAS);
    l.set_replicas(2);
    return l;
  }
  Result<pb::Attr> resize(uint64_t ino, uint64_t size) {
    pb::SetAttrRequest r;
    *r.mutable_cred() = root_cred();
    r.set_ino(ino);
    r.set_valid(pb::SETATTR_SIZE);
    r.set_size(size);
    return setattr(r);
  }
  std::vector<Namespace::PendingTruncate> intents() {
    auto l = ns_->list_truncate_intents(100);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    return l.ok() ? *l : std::vector<Namespace::PendingTruncate>{};
  }
  // Opens ino for writing in a new session; its id.
  uint64_t open_in_new_session(uint64_t ino) {
    auto sid = sessions_->open_session("client " + std::to_string(ino));
    EXPECT_TRUE(sid.ok()) << sid.status().ToString();
    pb::OpenRequest r;
    *r.mutable_cred() = root_cred();
    r.set_ino(ino);
    r.set_flags(O_RDWR);
    r.set_session_id(*sid);
    pb::EntryReply out;
    Status st = ns_->open(r, &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return *sid;
  }
  Result<pb::Attr> resize_through(uint64_t ino, uint64_t size, uint64_t session) {
    pb::SetAttrRequest r;
    *r.mutable_cred() = root_cred();
    r.set_ino(ino);
    r.set_valid(pb::SETATTR_SIZE);
    r.set_size(size);
    r.set_open_session_id(session);
    return setattr(r);
  }
  Result<TruncateStats> pass() { return apply_truncate_intents(*ns_, *map_, objects_, 100); }
  // The sizes the chunk truncates asked for, by slot, and that each
  // carried generation seq.
  std::map<uint32_t, uint64_t> chunk_sizes(uint64_t seq) {
    std::map<uint32_t, uint64_t> by_slot;
    EXPECT_EQ(objects_.chunk_truncate_seqs.size(), objects_.chunk_truncates.size());
    for (size_t i = 0; i < objects_.chunk_truncates.size(); ++i) {
      EXPECT_EQ(objects_.chunk_truncate_seqs[i], seq);
      by_slot[objects_.chunk_truncates[i].first.slot] = objects_.chunk_truncates[i].second;
    }
    return by_slot;
  }
};

TEST_F(TruncateIntentTest, ATruncateCallsNoDataServerAndLeavesAnIntentThePassApplies) {
  const pb::Attr f = chained_file();
  auto a = resize(f.ino(), (2 << 20) + 100);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->size(), (2u << 20) + 100);
  EXPECT_EQ(a->truncate_seq(), 1u);
  EXPECT_EQ(a->truncate_size(), (2u << 20) + 100);
  EXPECT_TRUE(objects_.chunk_truncates.empty()) << "the request called a data server";
  auto pending = intents();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].ino, f.ino());
  EXPECT_EQ(pending[0].intent.seq(), 1u);
  EXPECT_EQ(pending[0].intent.size(), (2u << 20) + 100);
  auto g = getattr(f.ino());
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->truncate_seq(), 1u) << "a later opener learns the generation";

  auto st = pass();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->applied, 1u);
  EXPECT_EQ(chunk_sizes(1), (std::map<uint32_t, uint64_t>{{0, 1 << 20}, {1, 1 << 20}, {2, 100}}));
  EXPECT_TRUE(intents().empty());
}

TEST_F(TruncateIntentTest, ATruncateFindingOnePendingAppliesItFirst) {
  const pb::Attr f = chained_file();
  ASSERT_TRUE(resize(f.ino(), 5000).ok());
  auto a = resize(f.ino(), 300);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->truncate_seq(), 2u);
  EXPECT_EQ(chunk_sizes(1), (std::map<uint32_t, uint64_t>{{0, 5000}, {1, 0}, {2, 0}}))
      << "the pending truncate was not applied before the next";
  auto pending = intents();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].intent.seq(), 2u);
  EXPECT_EQ(pending[0].intent.size(), 300u);
}

TEST_F(TruncateIntentTest, AnOpenWithTruncMakesAGenerationToo) {
  const pb::Attr f = chained_file();
  ASSERT_TRUE(resize(f.ino(), 4096).ok());
  ASSERT_TRUE(pass().ok());
  auto lk = lookup(kRoot, "df");
  ASSERT_TRUE(lk.ok());
  auto o = create(lk->ino(), "f", 0644, root_cred(), false, 0, O_WRONLY | O_TRUNC);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->size(), 0u);
  EXPECT_EQ(o->truncate_seq(), 2u);
  EXPECT_EQ(o->truncate_size(), 0u);
  ASSERT_EQ(intents().size(), 1u);
}

TEST_F(TruncateIntentTest, AFailingDataServerKeepsTheIntentForALaterPass) {
  const pb::Attr f = chained_file();
  ASSERT_TRUE(resize(f.ino(), 10).ok());
  for (uint32_t t = 1; t <= 3; ++t) objects_.failing.insert(t);
  auto st = pass();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->deferred, 1u);
  EXPECT_EQ(intents().size(), 1u);
  objects_.failing.clear();
  st = pass();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->applied, 1u);
  EXPECT_TRUE(intents().empty());
}

TEST_F(TruncateIntentTest, TheIntentOfAFileGoneIsDropped) {
  const pb::Attr f = chained_file();
  ASSERT_TRUE(resize(f.ino(), 10).ok());
  auto lk = lookup(kRoot, "df");
  ASSERT_TRUE(lk.ok());
  ASSERT_TRUE(unlink(lk->ino(), "f").ok());
  ASSERT_TRUE(ns_->purge_orphan(f.ino()).ok());
  auto st = pass();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->applied, 1u);
  EXPECT_TRUE(objects_.chunk_truncates.empty()) << "a gone file's chunks were truncated";
  EXPECT_TRUE(intents().empty());
}

// Its writers do not know the new generation: the pass, coming after their
// next write, would cut it.
TEST_F(TruncateIntentTest, AFileHeldOpenByAnotherSessionIsTruncatedBeforeTheReply) {
  const pb::Attr f = chained_file();
  open_in_new_session(f.ino());
  auto a = resize(f.ino(), 70000);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->truncate_seq(), 1u);
  EXPECT_EQ(chunk_sizes(1), (std::map<uint32_t, uint64_t>{{0, 70000}, {1, 0}, {2, 0}}));
  EXPECT_TRUE(intents().empty()) << "applied, its intent stays";
}

TEST_F(TruncateIntentTest, AFileHeldOpenOnlyByTheTruncatingSessionIsLeftToThePass) {
  const pb::Attr f = chained_file();
  const uint64_t sid = open_in_new_session(f.ino());
  ASSERT_TRUE(resize_through(f.ino(), 70000, sid).ok());
  EXPECT_TRUE(objects_.chunk_truncates.empty()) << "the request called a data server";
  EXPECT_EQ(intents().size(), 1u);
}

// setstripe of an empty file: the old layout's chunks go through an intent
// (each removed unless the new generation wrote it), not in the request.
TEST_F(TruncateIntentTest, ASetstripeOfAFileLeavesAnIntentRemovingTheOldLayout) {
  const pb::Attr f = chained_file();
  ASSERT_TRUE(set_layout(f.ino(), one_slot()).ok());
  EXPECT_TRUE(objects_.removed_chunks.empty()) << "the request called a data server";
  auto g = getattr(f.ino());
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->truncate_seq(), 1u) << "the new layout's writers carry the generation";
  EXPECT_EQ(g->layout().stripe_count(), 1u);
  auto pending = intents();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_TRUE(pending[0].intent.has_old_layout());

  auto st = pass();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->applied, 1u);
  std::set<uint32_t> slots;
  for (const ChunkAddress& a : objects_.removed_chunks) {
    EXPECT_EQ(a.chain_id, f.layout().chains(static_cast<int>(a.slot))) << "not the old layout's";
    slots.insert(a.slot);
  }
  EXPECT_EQ(slots, (std::set<uint32_t>{0, 1, 2}));
  EXPECT_EQ(objects_.remove_seqs, std::vector<uint64_t>(objects_.removed_chunks.size(), 1u));
  EXPECT_TRUE(intents().empty());
}

TEST_F(TruncateIntentTest, ATruncateAfterASetstripeAppliesItsRemovalFirst) {
  const pb::Attr f = chained_file();
  ASSERT_TRUE(set_layout(f.ino(), one_slot()).ok());
  auto a = resize(f.ino(), 100);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->truncate_seq(), 2u);
  EXPECT_EQ(objects_.removed_chunks.size(), 3u) << "one chunk per slot, to its chain's head";
  auto pending = intents();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_FALSE(pending[0].intent.has_old_layout());
}

// Legacy objects keep a generation too (ods/store/object_generation.cpp),
// so format 1 files follow the same rules: no data server in the request,
// the pass sends each slot's object truncate with the generation.
TEST_F(TruncateIntentTest, AFileOfFormatOneLeavesAnIntentThePassAppliesWithItsGeneration) {
  auto f = create(kRoot, "plain");
  ASSERT_TRUE(f.ok());
  ASSERT_LE(f->layout().format(), 1u);
  auto a = resize(f->ino(), 100);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->truncate_seq(), 1u);
  EXPECT_TRUE(objects_.truncates.empty()) << "the request called a data server";
  ASSERT_EQ(intents().size(), 1u);

  auto st = pass();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->applied, 1u);
  ASSERT_EQ(objects_.truncates.size(), 3u) << "one object per slot";
  for (size_t i = 0; i < objects_.truncates.size(); ++i) {
    EXPECT_EQ(std::get<1>(objects_.truncates[i]), f->ino());
    EXPECT_EQ(objects_.truncate_seqs[i], 1u);
  }
  EXPECT_TRUE(objects_.chunk_truncates.empty());
  EXPECT_TRUE(intents().empty());
}

TEST_F(TruncateIntentTest, AFileOfFormatOneHeldOpenByAnotherSessionIsTruncatedBeforeTheReply) {
  auto f = create(kRoot, "plain");
  ASSERT_TRUE(f.ok());
  ASSERT_LE(f->layout().format(), 1u);
  open_in_new_session(f->ino());
  auto a = resize(f->ino(), 100);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(objects_.truncates.size(), 3u);
  EXPECT_EQ(objects_.truncate_seqs, (std::vector<uint64_t>{1, 1, 1}));
  EXPECT_TRUE(intents().empty());
}

}  // namespace
}  // namespace surge::mds::testing
