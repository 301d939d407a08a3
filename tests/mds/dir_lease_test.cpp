// Directory leases at the MDS (mds/namespace/dir_lease.h): the rules of one
// addition against a lease, then the namespace granting, renewing,
// recalling and waiting them out on a real store.
#include "mds/namespace/dir_lease.h"

#include <gtest/gtest.h>

#include "tests/mds/mds_fixture.h"

namespace surge::mds::testing {
namespace {

using dir_lease::kSkewMs;
using dir_lease::kTermMs;

constexpr uint64_t kHolder = 5;
constexpr uint64_t kOther = 6;
constexpr uint64_t kNow = 1'000'000;

records::InodeRecord leased_dir() {
  records::InodeRecord d;
  dir_lease::grant(d, kHolder, kNow, kTermMs);
  return d;
}

TEST(DirLeaseRules, AGrantLastsOneTerm) {
  records::InodeRecord d = leased_dir();
  EXPECT_EQ(d.lease().session(), kHolder);
  EXPECT_EQ(d.lease().until_ms(), kNow + kTermMs);
  records::InodeRecord none;
  dir_lease::grant(none, 0, kNow, kTermMs);
  EXPECT_FALSE(none.has_lease()) << "no session, no lease";
}

TEST(DirLeaseRules, TheHoldersAdditionRenewsIt) {
  records::InodeRecord d = leased_dir();
  auto v = dir_lease::before_add(d, kHolder, kNow + 100, kTermMs);
  EXPECT_EQ(v.wait_until_ms, 0u);
  EXPECT_EQ(v.lease_ms, kTermMs);
  EXPECT_EQ(d.lease().until_ms(), kNow + 100 + kTermMs);
}

TEST(DirLeaseRules, AnotherSessionRecallsItAndWaitsPastItsEnd) {
  records::InodeRecord d = leased_dir();
  auto v = dir_lease::before_add(d, kOther, kNow + 10, kTermMs);
  EXPECT_TRUE(v.store_first);
  EXPECT_EQ(v.wait_until_ms, kNow + kTermMs + kSkewMs);
  EXPECT_TRUE(d.lease().recalled());
  auto again = dir_lease::before_add(d, kOther, kNow + 20, kTermMs);
  EXPECT_FALSE(again.store_first) << "already recalled: nothing to store";
  EXPECT_EQ(again.wait_until_ms, kNow + kTermMs + kSkewMs);
}

TEST(DirLeaseRules, AClientWithoutASessionIsAnotherSession) {
  records::InodeRecord d = leased_dir();
  EXPECT_NE(dir_lease::before_add(d, 0, kNow + 10, kTermMs).wait_until_ms, 0u);
}

TEST(DirLeaseRules, ARecalledLeaseIsNotRenewed) {
  records::InodeRecord d = leased_dir();
  (void)dir_lease::before_add(d, kOther, kNow + 10, kTermMs);
  auto v = dir_lease::before_add(d, kHolder, kNow + 20, kTermMs);
  EXPECT_EQ(v.wait_until_ms, 0u);
  EXPECT_EQ(v.lease_ms, 0u);
  EXPECT_EQ(d.lease().until_ms(), kNow + kTermMs);
}

TEST(DirLeaseRules, AnotherSessionShedsOneThatIsOver) {
  records::InodeRecord d = leased_dir();
  auto v = dir_lease::before_add(d, kOther, kNow + kTermMs + kSkewMs, kTermMs);
  EXPECT_EQ(v.wait_until_ms, 0u);
  EXPECT_FALSE(d.has_lease());
}

TEST(DirLeaseRules, WithinTheSkewAfterItsEndAnotherSessionStillWaits) {
  records::InodeRecord d = leased_dir();
  EXPECT_NE(dir_lease::before_add(d, kOther, kNow + kTermMs + 1, kTermMs).wait_until_ms, 0u);
}

TEST(DirLeaseRules, WithLeasesOffNothingIsGrantedOrRenewed) {
  records::InodeRecord none;
  dir_lease::grant(none, kHolder, kNow, 0);
  EXPECT_FALSE(none.has_lease());
  records::InodeRecord d = leased_dir();
  EXPECT_EQ(dir_lease::before_add(d, kHolder, kNow + 10, 0).lease_ms, 0u);
  EXPECT_EQ(d.lease().until_ms(), kNow + kTermMs) << "an existing lease runs out";
}

TEST(DirLeaseRules, AnEndStoredBeforeTheClockSteppedBackIsCut) {
  records::InodeRecord d;
  dir_lease::grant(d, kHolder, kNow + 3'600'000, kTermMs);  // an hour ahead
  auto v = dir_lease::before_add(d, kOther, kNow, kTermMs);
  EXPECT_TRUE(v.store_first);
  EXPECT_EQ(v.wait_until_ms, kNow + dir_lease::kMaxTermMs + kSkewMs);
  auto again = dir_lease::before_add(d, kOther, kNow + 1, kTermMs);
  EXPECT_FALSE(again.store_first) << "cut and recalled already";
}

TEST(DirLeaseRules, TheHolderRenewsOneThatRanOutUnrecalled) {
  records::InodeRecord d = leased_dir();
  auto v = dir_lease::before_add(d, kHolder, kNow + 10 * kTermMs, kTermMs);
  EXPECT_EQ(v.lease_ms, kTermMs);
  EXPECT_EQ(d.lease().until_ms(), kNow + 11 * kTermMs);
}

class DirLeaseNamespace : public NamespaceTest {
 protected:
  pb::EntryReply mkdir_as(uint64_t parent, const std::string& name, uint64_t session) {
    pb::MkdirRequest r;
    *r.mutable_cred() = root_cred();
    r.set_parent(parent);
    r.set_name(name);
    r.set_mode(0755);
    r.set_session_id(session);
    pb::EntryReply out;
    Status st = ns_->mkdir(r, &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }
  pb::EntryReply create_as(uint64_t parent, const std::string& name, uint64_t session) {
    pb::CreateRequest r;
    *r.mutable_cred() = root_cred();
    r.set_parent(parent);
    r.set_name(name);
    r.set_mode(0644);
    r.set_exclusive(true);
    r.set_session_id(session);
    pb::EntryReply out;
    Status st = ns_->create(r, &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }
  records::DirLease lease_of(uint64_t dir) {
    records::InodeRecord r;
    auto found = ns_->inode_record(dir, &r);
    EXPECT_TRUE(found.ok() && *found);
    return r.lease();
  }
};

TEST_F(DirLeaseNamespace, AMkdirWithASessionGrantsTheNewDirectory) {
  const uint64_t s = *sessions_->open_session("holder");
  pb::EntryReply d = mkdir_as(kRoot, "d", s);
  EXPECT_EQ(d.lease_ms(), kTermMs);
  EXPECT_EQ(lease_of(d.attr().ino()).session(), s);
  EXPECT_EQ(mkdir_as(kRoot, "e", 0).lease_ms(), 0u) << "no session, no lease";
}

TEST_F(DirLeaseNamespace, TheHoldersCreatesRenewIt) {
  const uint64_t s = *sessions_->open_session("holder");
  const uint64_t dir = mkdir_as(kRoot, "d", s).attr().ino();
  EXPECT_EQ(create_as(dir, "a", s).parent_lease_ms(), kTermMs);
  EXPECT_EQ(mkdir_as(dir, "sub", s).parent_lease_ms(), kTermMs);
}

TEST_F(DirLeaseNamespace, AnotherSessionsCreateLandsOnlyAfterTheLeaseIsOver) {
  const uint64_t s = *sessions_->open_session("holder");
  const uint64_t t = *sessions_->open_session("other");
  const uint64_t dir = mkdir_as(kRoot, "d", s).attr().ino();
  const uint64_t until = lease_of(dir).until_ms();
  EXPECT_EQ(create_as(dir, "x", t).parent_lease_ms(), 0u);
  // The holder stops answering alone before `until` by its own clock; the
  // other's name must not exist before then on any MDS's.
  EXPECT_GE(dir_lease::now_ms(), until + kSkewMs);
  EXPECT_EQ(create_as(dir, "y", s).parent_lease_ms(), 0u) << "the holder's lease is over";
}

TEST_F(DirLeaseNamespace, RemovalsByAnotherSessionDoNotWait) {
  const uint64_t s = *sessions_->open_session("holder");
  const uint64_t dir = mkdir_as(kRoot, "d", s).attr().ino();
  create_as(dir, "a", s);
  pb::UnlinkRequest r;
  *r.mutable_cred() = root_cred();
  r.set_parent(dir);
  r.set_name("a");
  ASSERT_TRUE(ns_->unlink(r).ok());
  EXPECT_FALSE(lease_of(dir).recalled()) << "a removal does not recall";
}

}  // namespace
}  // namespace surge::mds::testing
