// A create-like request resent after its reply was lost (a dropped
// connection, an MDS crash) answers as the first did, because the new inode
// keeps the request's op id; any other request for the name still gets
// EEXIST. On a real RocksDB, across a reopen (the crash).
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
  const uint64_t sid = sessions_->open_session("resend-test");
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

}  // namespace
}  // namespace surge::mds::testing
