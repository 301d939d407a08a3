// setattr and the rules Linux applies around writes: setuid/setgid cleared
// by a write or truncate of a caller without CAP_FSETID (SETATTR_KILL_SUIDGID,
// and any truncate by a uid other than 0), and a truncate through a file the
// session holds open for writing, whose permission was checked at its open.
#include <fcntl.h>

#include "tests/mds/mds_fixture.h"

namespace surge::mds::testing {
namespace {

using NsPrivs = NamespaceTest;

pb::SetAttrRequest truncate_req(uint64_t ino, const pb::Credentials& c, uint64_t size = 0) {
  pb::SetAttrRequest r;
  *r.mutable_cred() = c;
  r.set_ino(ino);
  r.set_valid(pb::SETATTR_SIZE);
  r.set_size(size);
  return r;
}

TEST_F(NsPrivs, KillSuidgidClearsSetuidAndExecutableSetgid) {
  auto f = create(kRoot, "f", 06777);
  ASSERT_TRUE(f.ok());
  pb::SetAttrRequest r;
  *r.mutable_cred() = cred(1000, 1000);  // not the owner, may write
  r.set_ino(f->ino());
  r.set_valid(pb::SETATTR_KILL_SUIDGID);
  auto a = setattr(r);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->mode(), static_cast<uint32_t>(S_IFREG | 0777));
}

TEST_F(NsPrivs, KillSuidgidKeepsSetgidWithoutGroupExecute) {
  auto f = create(kRoot, "f", 06766);
  pb::SetAttrRequest r;
  *r.mutable_cred() = cred(1000, 1000);
  r.set_ino(f->ino());
  r.set_valid(pb::SETATTR_KILL_SUIDGID);
  auto a = setattr(r);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->mode(), static_cast<uint32_t>(S_IFREG | 02766));
}

TEST_F(NsPrivs, KillSuidgidWithoutWritePermissionIsEacces) {
  auto f = create(kRoot, "f", 04755);
  pb::SetAttrRequest r;
  *r.mutable_cred() = cred(1000, 1000);
  r.set_ino(f->ino());
  r.set_valid(pb::SETATTR_KILL_SUIDGID);
  EXPECT_EQ(code_of(setattr(r)), Code::kPermissionDenied);
  EXPECT_EQ(getattr(f->ino())->mode() & S_ISUID, static_cast<uint32_t>(S_ISUID));
}

TEST_F(NsPrivs, TruncateByTheOwnerClearsSetuidAndSetgid) {
  auto f = create(kRoot, "f", 06755, cred(1000, 1000));
  ASSERT_TRUE(f.ok());
  auto a = setattr(truncate_req(f->ino(), cred(1000, 1000)));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->mode(), static_cast<uint32_t>(S_IFREG | 0755));
}

TEST_F(NsPrivs, TruncateByRootKeepsSetuid) {
  auto f = create(kRoot, "f", 04755);
  auto a = setattr(truncate_req(f->ino(), root_cred()));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->mode(), static_cast<uint32_t>(S_IFREG | 04755));
}

TEST_F(NsPrivs, OpenWithTruncByTheOwnerClearsSetuid) {
  auto f = create(kRoot, "f", 04755, cred(1000, 1000));
  pb::OpenRequest r;
  *r.mutable_cred() = cred(1000, 1000);
  r.set_ino(f->ino());
  r.set_flags(O_WRONLY | O_TRUNC);
  pb::EntryReply out;
  ASSERT_TRUE(ns_->open(r, &out).ok());
  EXPECT_EQ(out.attr().mode(), static_cast<uint32_t>(S_IFREG | 0755));
}

TEST_F(NsPrivs, TruncateThroughAnOpenFileSkipsTheWriteCheck) {
  // open(O_CREAT|O_RDWR, 0) then ftruncate: allowed on Linux.
  const uint64_t sid = *sessions_->open_session("c");
  auto f = create(kRoot, "f", 0, cred(1000, 1000), true, sid, O_RDWR);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto r = truncate_req(f->ino(), cred(1000, 1000), 4096);
  EXPECT_EQ(code_of(setattr(r)), Code::kPermissionDenied) << "truncate by path";
  r.set_open_session_id(sid);
  auto a = setattr(r);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->size(), 4096u);
}

TEST_F(NsPrivs, TruncateThroughAFileOfAnotherSessionIsChecked) {
  const uint64_t opener = *sessions_->open_session("opener");
  const uint64_t other = *sessions_->open_session("other");
  auto f = create(kRoot, "f", 0, cred(1000, 1000), true, opener, O_RDWR);
  ASSERT_TRUE(f.ok());
  auto r = truncate_req(f->ino(), cred(1000, 1000));
  r.set_open_session_id(other);  // holds no open of f
  EXPECT_EQ(code_of(setattr(r)), Code::kPermissionDenied);
}

}  // namespace
}  // namespace surge::mds::testing
