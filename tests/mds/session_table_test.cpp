// Sessions and open files in the store (mds/cluster/session_table.h): two
// SessionTables on one store are two MDS serving one file system. What one
// records the other must see, a client that fails over keeps its session
// and its opens, and only silence judged by the leader's clock expires a
// session. Runs on RocksDB and, as mds_concurrency_etcd_test, on etcd.
#include <fcntl.h>

#include <thread>

#include "mds/namespace/keys.h"
#include "tests/mds/mds_fixture.h"

namespace surge::mds::testing {
namespace {

class SessionStoreTest : public NamespaceTest {
 protected:
  void SetUp() override {
    sessions_shared_ = true;  // on RocksDB too: the same code as on etcd
    NamespaceTest::SetUp();
  }
  // The sessions of a second MDS on the fixture's store.
  std::unique_ptr<SessionTable> other() {
    return std::make_unique<SessionTable>(kv_.get(), session_opts_, true);
  }
  // Keys of the store's open records (by inode).
  size_t stored_opens() {
    size_t n = 0;
    EXPECT_TRUE(kv_->scan(Space::kSystem, keys::kOpenPrefix, keys::kOpenEnd,
                          [&](std::string_view, std::string_view) {
                            ++n;
                            return true;
                          })
                    .ok());
    return n;
  }
  static SessionTable::Clock::time_point at(int seconds) {
    return t0_ + std::chrono::seconds(seconds);
  }
  static inline const SessionTable::Clock::time_point t0_ = SessionTable::Clock::now();
};

TEST_F(SessionStoreTest, AnOpenRecordedThroughOneMdsIsSeenByAnother) {
  auto b = other();
  const uint64_t s = *sessions_->open_session("client-a");
  ASSERT_TRUE(sessions_->add_open(s, 42).ok());
  EXPECT_TRUE(*b->is_open(42));
  EXPECT_FALSE(*b->is_open(43));
  sessions_->release_open(s, 42);
  EXPECT_TRUE(*b->is_open(42)) << "a release is stored by the next pass, not at once";
  ASSERT_TRUE(sessions_->flush(at(0)).ok());
  EXPECT_FALSE(*b->is_open(42));
}

TEST_F(SessionStoreTest, AnOpenAfterAReleaseNotYetStoredCostsNoStoreWrite) {
  const uint64_t s = *sessions_->open_session("client-a");
  ASSERT_TRUE(sessions_->add_open(s, 42).ok());
  sessions_->release_open(s, 42);
  // The store still says open: the next open only counts in memory, and
  // the pass then has nothing to write for it.
  ASSERT_TRUE(sessions_->add_open(s, 42).ok());
  ASSERT_TRUE(sessions_->flush(at(0)).ok());
  EXPECT_TRUE(*sessions_->is_open(42));
  EXPECT_TRUE(sessions_->holds_open(s, 42));
  sessions_->release_open(s, 42);
  EXPECT_FALSE(sessions_->holds_open(s, 42));
  ASSERT_TRUE(sessions_->flush(at(1)).ok());
  EXPECT_FALSE(*sessions_->is_open(42));
}

TEST_F(SessionStoreTest, AReopenFromMemoryIsRefusedOnceTheLeaderCouldHaveExpiredTheSession) {
  session_opts_.session_timeout_ms = 200;
  auto a = other();  // with the short timeout
  const uint64_t s = *a->open_session("client-a");
  ASSERT_TRUE(a->add_open(s, 42).ok());
  a->release_open(s, 42);  // not written yet: the store still says open
  auto leader = other();
  ASSERT_EQ(*leader->expire(at(0)), 0);
  ASSERT_EQ(*leader->expire(at(100)), 1);
  // Past half the timeout since the store last confirmed the session, a
  // reopen must ask the store, which no longer has it.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_EQ(a->add_open(s, 42).code(), Code::kNotFound);
  EXPECT_FALSE(*leader->is_open(42));
}

TEST_F(SessionStoreTest, AClientThatFailsOverKeepsItsSessionAndItsOpenCounts) {
  const uint64_t s = *sessions_->open_session("client-a");
  ASSERT_TRUE(sessions_->add_open(s, 42).ok());
  ASSERT_TRUE(sessions_->add_open(s, 42).ok());  // opened twice
  auto b = other();
  ASSERT_TRUE(b->heartbeat(s).ok()) << "the second MDS must adopt the stored session";
  EXPECT_TRUE(b->holds_open(s, 42));
  b->release_open(s, 42);
  ASSERT_TRUE(b->flush(at(0)).ok());
  EXPECT_TRUE(*sessions_->is_open(42)) << "one of two opens released: still open";
  b->release_open(s, 42);
  ASSERT_TRUE(b->flush(at(1)).ok());
  EXPECT_FALSE(*sessions_->is_open(42));
}

TEST_F(SessionStoreTest, AReleaseOnACountAnotherMdsChangedNeverClosesAHeldFile) {
  const uint64_t s = *sessions_->open_session("client-a");
  ASSERT_TRUE(sessions_->add_open(s, 42).ok());
  auto b = other();
  ASSERT_TRUE(b->add_open(s, 42).ok());  // count 2, written by b
  sessions_->release_open(s, 42);        // a knew 1: writing 0 would drop b's open
  ASSERT_TRUE(sessions_->flush(at(0)).ok());
  EXPECT_TRUE(*b->is_open(42)) << "the open held through b was released";
}

TEST_F(SessionStoreTest, ReleasesThroughTwoMdsInTurnCloseTheFile) {
  const uint64_t s = *sessions_->open_session("client-a");
  ASSERT_TRUE(sessions_->add_open(s, 42).ok());
  auto b = other();
  ASSERT_TRUE(b->add_open(s, 42).ok());  // count 2
  b->release_open(s, 42);
  ASSERT_TRUE(b->flush(at(0)).ok());  // 1, as a knows it
  EXPECT_TRUE(*b->is_open(42));
  sessions_->release_open(s, 42);
  ASSERT_TRUE(sessions_->flush(at(0)).ok());
  EXPECT_FALSE(*b->is_open(42));
}

TEST_F(SessionStoreTest, BeatsStoredByAnyMdsKeepASessionAliveAtTheLeader) {
  const uint64_t s = *sessions_->open_session("client-a");
  ASSERT_TRUE(sessions_->add_open(s, 42).ok());
  auto leader = other();
  auto served_by_b = other();
  // 100 s of passes, each second; the client heartbeats through the first
  // MDS for 50 s, then through the second.
  for (int t = 0; t <= 100; ++t) {
    SessionTable& via = t < 50 ? *sessions_ : *served_by_b;
    ASSERT_TRUE(via.heartbeat(s).ok()) << "t=" << t;
    ASSERT_TRUE(via.flush(at(t)).ok());
    auto expired = leader->expire(at(t));
    ASSERT_TRUE(expired.ok()) << expired.status().ToString();
    ASSERT_EQ(*expired, 0) << "t=" << t;
  }
  EXPECT_TRUE(*leader->is_open(42));
}

TEST_F(SessionStoreTest, TheLeaderExpiresASessionWhoseBeatStoppedAndItsOpensGo) {
  const uint64_t s = *sessions_->open_session("client-a");
  ASSERT_TRUE(sessions_->add_open(s, 42).ok());
  auto leader = other();
  const int timeout_s = static_cast<int>(session_opts_.session_timeout_ms / 1000);
  ASSERT_EQ(*leader->expire(at(0)), 0);
  ASSERT_EQ(*leader->expire(at(timeout_s)), 0) << "silent for exactly the timeout: not yet";
  ASSERT_EQ(*leader->expire(at(timeout_s + 1)), 1);
  EXPECT_FALSE(*leader->is_open(42));
  EXPECT_EQ(sessions_->add_open(s, 43).code(), Code::kNotFound)
      << "an expired session takes no new open";
  EXPECT_FALSE(*leader->is_open(43));
  EXPECT_EQ(leader->heartbeat(s).code(), Code::kNotFound);
}

TEST_F(SessionStoreTest, ANewLeaderWaitsAFullTimeoutBeforeExpiring) {
  const uint64_t s = *sessions_->open_session("client-a");
  ASSERT_TRUE(sessions_->add_open(s, 42).ok());
  auto leader = other();
  ASSERT_EQ(*leader->expire(at(0)), 0);
  leader->forget_observations();  // leadership lost and won again
  ASSERT_EQ(*leader->expire(at(1000)), 0) << "first sight after forgetting";
  EXPECT_TRUE(*leader->is_open(42));
}

TEST_F(SessionStoreTest, AMdsThatHeardTheClientLearnsOfTheExpiryAtItsNextFlush) {
  const uint64_t s = *sessions_->open_session("client-a");
  auto leader = other();
  ASSERT_EQ(*leader->expire(at(0)), 0);
  ASSERT_EQ(*leader->expire(at(100)), 1);
  // This MDS still serves it in memory; its flush finds it gone.
  ASSERT_TRUE(sessions_->heartbeat(s).ok());
  (void)sessions_->flush(at(100));
  EXPECT_EQ(sessions_->heartbeat(s).code(), Code::kNotFound);
}

TEST_F(SessionStoreTest, ACreateRecordsItsOpenInTheSameCommit) {
  const uint64_t s = *sessions_->open_session("client-a");
  auto f = create(kRoot, "f", 0644, root_cred(), true, s, O_RDWR);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto b = other();
  EXPECT_TRUE(*b->is_open(f->ino()));
  EXPECT_TRUE(sessions_->holds_open(s, f->ino()));
  pb::CloseRequest cl;
  cl.set_session_id(s);
  cl.set_ino(f->ino());
  ASSERT_TRUE(ns_->close(cl).ok());
  ASSERT_TRUE(sessions_->flush(at(0)).ok());
  EXPECT_FALSE(*b->is_open(f->ino()));
}

TEST_F(SessionStoreTest, ABatchOfClosesEndsOneOpenPerIno) {
  const uint64_t s = *sessions_->open_session("client-a");
  auto f = create(kRoot, "f", 0644, root_cred(), true, s, O_RDWR);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto g = create(kRoot, "g", 0644, root_cred(), true, s, O_RDWR);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_TRUE(sessions_->add_open(s, f->ino()).ok());  // f is open twice
  pb::CloseManyRequest cl;
  cl.set_session_id(s);
  cl.add_inos(f->ino());
  cl.add_inos(g->ino());
  ASSERT_TRUE(ns_->close_many(cl).ok());
  ASSERT_TRUE(sessions_->flush(at(0)).ok());
  auto b = other();
  EXPECT_TRUE(*b->is_open(f->ino())) << "one of f's two opens is left";
  EXPECT_FALSE(*b->is_open(g->ino()));
  cl.clear_inos();
  cl.add_inos(f->ino());
  ASSERT_TRUE(ns_->close_many(cl).ok());
  ASSERT_TRUE(sessions_->flush(at(1)).ok());
  EXPECT_FALSE(*b->is_open(f->ino()));
}

TEST_F(SessionStoreTest, OpensLeftByAGoneSessionAreSweptByTheLeader) {
  // An open written as its session expired: a record of a session that is
  // not stored.
  KvBatch stray;
  stray.put(Space::kSystem, keys::session_open(777, 42), std::string("\0\0\0\1", 4));
  stray.put(Space::kSystem, keys::open_by(42, 777), "");
  ASSERT_TRUE(kv_->commit(stray).ok());
  const uint64_t s = *sessions_->open_session("client-a");
  ASSERT_TRUE(sessions_->add_open(s, 43).ok());
  auto leader = other();
  ASSERT_TRUE(*leader->is_open(42));
  for (int t = 0; t < 60; ++t) {
    ASSERT_TRUE(sessions_->heartbeat(s).ok());
    ASSERT_TRUE(sessions_->flush(at(t)).ok());
    ASSERT_TRUE(leader->expire(at(t)).ok());
  }
  EXPECT_FALSE(*leader->is_open(42)) << "the stray open must be swept";
  EXPECT_TRUE(*leader->is_open(43)) << "a live session's open must stay";
}

TEST_F(SessionStoreTest, ClosingASessionReleasesItsOpensForEveryMds) {
  const uint64_t s = *sessions_->open_session("client-a");
  ASSERT_TRUE(sessions_->add_open(s, 42).ok());
  ASSERT_TRUE(sessions_->add_open(s, 43).ok());
  ASSERT_TRUE(sessions_->close_session(s).ok());
  auto b = other();
  EXPECT_FALSE(*b->is_open(42));
  EXPECT_FALSE(*b->is_open(43));
  EXPECT_EQ(b->heartbeat(s).code(), Code::kNotFound);
}

TEST_F(SessionStoreTest, ClearingTheStoredSessionsDropsEveryRecord) {
  const uint64_t s = *sessions_->open_session("client-a");
  ASSERT_TRUE(sessions_->add_open(s, 42).ok());
  SessionTable restarted(kv_.get(), session_opts_, false);
  ASSERT_TRUE(restarted.clear_stored().ok());
  EXPECT_EQ(stored_opens(), 0u);
  auto b = other();
  EXPECT_FALSE(*b->is_open(42));
  EXPECT_EQ(b->heartbeat(s).code(), Code::kNotFound);
}

// One MDS on RocksDB: nobody else reads the opens, so they are counted in
// memory, with no store write per open or close.
TEST_F(SessionStoreTest, ASoleMdsCountsOpensInMemoryAndStoresNone) {
  SessionTable sole(kv_.get(), session_opts_, false);
  const uint64_t s = *sole.open_session("client-a");
  ASSERT_TRUE(sole.add_open(s, 42).ok());
  ASSERT_TRUE(sole.add_open(s, 42).ok());
  EXPECT_TRUE(*sole.is_open(42));
  EXPECT_EQ(stored_opens(), 0u);
  sole.release_open(s, 42);
  EXPECT_TRUE(*sole.is_open(42));
  sole.release_open(s, 42);
  EXPECT_FALSE(*sole.is_open(42)) << "released at once, no pass needed";
  ASSERT_TRUE(sole.add_open(s, 43).ok());
  ASSERT_EQ(*sole.expire(at(0)), 0);
  ASSERT_EQ(*sole.expire(at(100)), 1);
  EXPECT_FALSE(*sole.is_open(43)) << "an expired session's opens must go";
}

}  // namespace
}  // namespace surge::mds::testing
