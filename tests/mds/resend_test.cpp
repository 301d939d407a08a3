// A create-like request resent after its reply was lost (a dropped
// connection, an MDS crash) answers as the first did, because the new inode
// keeps the request's op id; any other request for the name still gets
// EEXIST. Unlink, rmdir, rename and link leave no such trace, so the MDS
// keeps their op ids for a while (done ops): their resends answer OK, not
// ENOENT or EEXIST. On a real RocksDB, across a reopen (the crash).
#include <fcntl.h>

#include "tests/mds/mds_fixture.h"

namespace surge::mds::testing {
namespace {

using Resend = NamespaceTest;

pb::MkdirRequest mkdir_req(const std::string& name, uint64_t op_id) {
  pb::MkdirRequest r;
  *r.mutable_cred() = root_cred();
  r.set_parent(kRoot);
  r.set_name(name);
  r.set_mode(0755);
  r.set_op_id(op_id);
  return r;
}

TEST_F(Resend, MkdirResentAfterACrashAnswersWithTheSameInode) {
  pb::EntryReply first, again;
  ASSERT_TRUE(ns_->mkdir(mkdir_req("d", 41), &first).ok());
  reopen();
  Status st = ns_->mkdir(mkdir_req("d", 41), &again);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(again.attr().ino(), first.attr().ino());
  EXPECT_TRUE(again.created());
}

TEST_F(Resend, MkdirWithAnotherOrNoOpIdIsStillEexist) {
  pb::EntryReply out;
  ASSERT_TRUE(ns_->mkdir(mkdir_req("d", 41), &out).ok());
  EXPECT_EQ(ns_->mkdir(mkdir_req("d", 42), &out).code(), Code::kAlreadyExists);
  EXPECT_EQ(ns_->mkdir(mkdir_req("d", 0), &out).code(), Code::kAlreadyExists);
}

TEST_F(Resend, ExclusiveCreateResentAnswersWithTheSameFile) {
  const uint64_t sid = *sessions_->open_session("resend-test");
  pb::CreateRequest r;
  *r.mutable_cred() = root_cred();
  r.set_parent(kRoot);
  r.set_name("f");
  r.set_mode(0644);
  r.set_exclusive(true);
  r.set_session_id(sid);
  r.set_flags(O_RDWR);
  r.set_op_id(7);
  pb::EntryReply first, again;
  ASSERT_TRUE(ns_->create(r, &first).ok());
  Status st = ns_->create(r, &again);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(again.attr().ino(), first.attr().ino());
  EXPECT_TRUE(again.created());
  r.set_op_id(8);
  EXPECT_EQ(ns_->create(r, &again).code(), Code::kAlreadyExists);
}

TEST_F(Resend, SymlinkResentAnswersWithTheSameLink) {
  pb::SymlinkRequest r;
  *r.mutable_cred() = root_cred();
  r.set_parent(kRoot);
  r.set_name("l");
  r.set_target("/somewhere");
  r.set_op_id(99);
  pb::EntryReply first, again;
  ASSERT_TRUE(ns_->symlink(r, &first).ok());
  ASSERT_TRUE(ns_->symlink(r, &again).ok());
  EXPECT_EQ(again.attr().ino(), first.attr().ino());
}

pb::UnlinkRequest unlink_req(const std::string& name, uint64_t op_id) {
  pb::UnlinkRequest r;
  *r.mutable_cred() = root_cred();
  r.set_parent(kRoot);
  r.set_name(name);
  r.set_op_id(op_id);
  return r;
}

TEST_F(Resend, UnlinkResentAfterACrashIsOkAndAnotherUnlinkIsEnoent) {
  ASSERT_TRUE(create(kRoot, "f").ok());
  ASSERT_TRUE(ns_->unlink(unlink_req("f", 51)).ok());
  reopen();
  Status st = ns_->unlink(unlink_req("f", 51));
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(ns_->unlink(unlink_req("f", 52)).code(), Code::kNotFound);
  EXPECT_EQ(ns_->unlink(unlink_req("f", 0)).code(), Code::kNotFound);
  expect_clean();
}

TEST_F(Resend, RmdirResentIsOk) {
  ASSERT_TRUE(mkdir(kRoot, "d").ok());
  ASSERT_TRUE(ns_->rmdir(unlink_req("d", 61)).ok());
  Status st = ns_->rmdir(unlink_req("d", 61));
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(ns_->rmdir(unlink_req("d", 62)).code(), Code::kNotFound);
}

TEST_F(Resend, RenameResentIsOkAndDoesNotMoveAgain) {
  ASSERT_TRUE(create(kRoot, "a").ok());
  pb::RenameRequest r;
  *r.mutable_cred() = root_cred();
  r.set_old_parent(kRoot);
  r.set_old_name("a");
  r.set_new_parent(kRoot);
  r.set_new_name("b");
  r.set_op_id(71);
  ASSERT_TRUE(ns_->rename(r).ok());
  ASSERT_TRUE(create(kRoot, "a").ok());  // a new "a" after the rename
  reopen();
  Status st = ns_->rename(r);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(lookup(kRoot, "a").ok()) << "the resend did not move the new a over b";
  r.set_op_id(72);
  r.set_old_name("gone");
  EXPECT_EQ(ns_->rename(r).code(), Code::kNotFound);
  expect_clean();
}

TEST_F(Resend, LinkResentAnswersWithTheInodeNotEexist) {
  auto f = create(kRoot, "f");
  ASSERT_TRUE(f.ok());
  pb::LinkRequest r;
  *r.mutable_cred() = root_cred();
  r.set_ino(f->ino());
  r.set_new_parent(kRoot);
  r.set_new_name("g");
  r.set_op_id(81);
  pb::EntryReply first, again;
  ASSERT_TRUE(ns_->link(r, &first).ok());
  Status st = ns_->link(r, &again);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(again.attr().ino(), f->ino());
  EXPECT_EQ(again.attr().nlink(), 2u) << "linked once, not twice";
  r.set_op_id(82);
  EXPECT_EQ(ns_->link(r, &again).code(), Code::kAlreadyExists);
}

TEST_F(Resend, DoneOpIdsExpireAfterTheirTime) {
  ASSERT_TRUE(create(kRoot, "f").ok());
  ASSERT_TRUE(ns_->unlink(unlink_req("f", 91)).ok());
  const uint64_t later = Namespace::now_ns();
  auto none = ns_->expire_done_ops(later);  // not yet ten minutes old
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0u);
  EXPECT_TRUE(ns_->unlink(unlink_req("f", 91)).ok());
  auto n = ns_->expire_done_ops(later + 601ull * 1000 * 1000 * 1000);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1u);
  EXPECT_EQ(ns_->unlink(unlink_req("f", 91)).code(), Code::kNotFound)
      << "forgotten, so a plain ENOENT";
}

}  // namespace
}  // namespace surge::mds::testing

namespace surge::mds::testing {
namespace {

// Expiry deletes two keys per op id; a backlog bigger than one transaction
// of the store may hold (etcd: 128 ops) still expires whole, in several
// batches, instead of failing every time and keeping the ids forever.
TEST_F(Resend, ABigBacklogOfDoneOpIdsExpiresWhole) {
  constexpr int kOps = 200;
  for (int i = 0; i < kOps; i++) {
    const std::string name = "f" + std::to_string(i);
    ASSERT_TRUE(create(kRoot, name).ok());
    ASSERT_TRUE(ns_->unlink(unlink_req(name, 5000 + i)).ok());
  }
  auto n = ns_->expire_done_ops(Namespace::now_ns() + 601ull * 1000 * 1000 * 1000);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, size_t(kOps));
  for (int i : {0, kOps / 2, kOps - 1}) {
    EXPECT_EQ(ns_->unlink(unlink_req("f" + std::to_string(i), 5000 + i)).code(), Code::kNotFound) << i;
  }
}

}  // namespace
}  // namespace surge::mds::testing
