// Extended attributes (flags, Linux limits and errnos, namespaces) and
// layouts (directory defaults, inheritance, refusal on non-empty files).
#include "tests/mds/mds_fixture.h"

namespace surge::mds::testing {
namespace {

class XattrTest : public NamespaceTest {
 protected:
  Status set(uint64_t ino, const std::string& name, const std::string& value, uint32_t flags = 0,
             pb::Credentials c = root_cred()) {
    pb::SetXattrRequest r;
    *r.mutable_cred() = c;
    r.set_ino(ino);
    r.set_name(name);
    r.set_value(value);
    r.set_flags(flags);
    return ns_->setxattr(r);
  }
  Result<pb::GetXattrReply> get(uint64_t ino, const std::string& name, uint32_t size = 65536,
                                pb::Credentials c = root_cred()) {
    pb::GetXattrRequest r;
    *r.mutable_cred() = c;
    r.set_ino(ino);
    r.set_name(name);
    r.set_size(size);
    pb::GetXattrReply out;
    SURGE_RETURN_IF_ERROR(ns_->getxattr(r, &out));
    return out;
  }
  Result<pb::ListXattrReply> list_x(uint64_t ino, uint32_t size = 65536,
                                    pb::Credentials c = root_cred()) {
    pb::ListXattrRequest r;
    *r.mutable_cred() = c;
    r.set_ino(ino);
    r.set_size(size);
    pb::ListXattrReply out;
    SURGE_RETURN_IF_ERROR(ns_->listxattr(r, &out));
    return out;
  }
  Status remove(uint64_t ino, const std::string& name, pb::Credentials c = root_cred()) {
    pb::RemoveXattrRequest r;
    *r.mutable_cred() = c;
    r.set_ino(ino);
    r.set_name(name);
    return ns_->removexattr(r);
  }
  uint64_t file() {
    auto f = create(kRoot, "f" + std::to_string(n_++), 0644, cred(1000, 1000));
    EXPECT_TRUE(f.ok());
    return f->ino();
  }
  int n_ = 0;
};

TEST_F(XattrTest, SetGetListRemove) {
  const uint64_t f = file();
  ASSERT_TRUE(set(f, "user.a", "1").ok());
  ASSERT_TRUE(set(f, "user.bb", std::string("\0x", 2)).ok());
  auto v = get(f, "user.bb");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->value(), std::string("\0x", 2));
  auto l = list_x(f);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->size(), 7u + 8u);
  EXPECT_EQ(l->names_size(), 2);
  ASSERT_TRUE(remove(f, "user.a").ok());
  EXPECT_EQ(code_of(get(f, "user.a")), Code::kNoData);
}

TEST_F(XattrTest, CreateFlagOnExistingIsEexist) {
  const uint64_t f = file();
  ASSERT_TRUE(set(f, "user.a", "1").ok());
  EXPECT_EQ(set(f, "user.a", "2", 1).code(), Code::kAlreadyExists);
}

TEST_F(XattrTest, ReplaceFlagOnMissingIsEnodata) {
  EXPECT_EQ(set(file(), "user.a", "2", 2).code(), Code::kNoData);
}

TEST_F(XattrTest, SizeZeroReturnsOnlyTheSize) {
  const uint64_t f = file();
  ASSERT_TRUE(set(f, "user.a", "hello").ok());
  auto v = get(f, "user.a", 0);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->size(), 5u);
  EXPECT_TRUE(v->value().empty());
}

TEST_F(XattrTest, SmallBufferIsErange) {
  const uint64_t f = file();
  ASSERT_TRUE(set(f, "user.a", "hello").ok());
  EXPECT_EQ(code_of(get(f, "user.a", 4)), Code::kOutOfRange);
  EXPECT_EQ(code_of(list_x(f, 3)), Code::kOutOfRange);
}

TEST_F(XattrTest, LinuxLimits) {
  const uint64_t f = file();
  EXPECT_EQ(set(f, "user." + std::string(251, 'n'), "v").code(), Code::kOutOfRange);  // 256 bytes
  EXPECT_TRUE(set(f, "user." + std::string(250, 'n'), "v").ok());                     // 255
  EXPECT_EQ(set(f, "user.big", std::string(65537, 'v')).code(), Code::kTooBig);
  EXPECT_TRUE(set(f, "user.big", std::string(65536, 'v')).ok());
  EXPECT_EQ(set(f, "", "v").code(), Code::kOutOfRange);
}

TEST_F(XattrTest, UnknownNamespaceIsEopnotsupp) {
  EXPECT_EQ(set(file(), "bogus.a", "v").code(), Code::kNotSupported);
}

TEST_F(XattrTest, TrustedIsRootOnly) {
  const uint64_t f = file();
  EXPECT_EQ(set(f, "trusted.a", "v", 0, cred(1000, 1000)).code(), Code::kNotPermitted);
  ASSERT_TRUE(set(f, "trusted.a", "v").ok());
  EXPECT_EQ(code_of(get(f, "trusted.a", 100, cred(1000, 1000))), Code::kNoData);
  auto l = list_x(f, 1000, cred(1000, 1000));
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->names_size(), 0);
}

TEST_F(XattrTest, UserXattrNeedsWritePermission) {
  const uint64_t f = file();  // 0644 owned by 1000
  EXPECT_EQ(set(f, "user.a", "v", 0, cred(1001, 1001)).code(), Code::kPermissionDenied);
  ASSERT_TRUE(set(f, "user.a", "v", 0, cred(1000, 1000)).ok());
  EXPECT_TRUE(get(f, "user.a", 100, cred(1001, 1001)).ok());  // read permission suffices
}

TEST_F(XattrTest, UnknownInodeIsEnoent) {
  EXPECT_EQ(set(987654, "user.a", "v").code(), Code::kNotFound);
}

TEST_F(XattrTest, XattrsGoWithTheDirectory) {
  auto d = mkdir(kRoot, "d");
  ASSERT_TRUE(set(d->ino(), "user.a", "v").ok());
  ASSERT_TRUE(rmdir(kRoot, "d").ok());
  expect_clean();  // the checker flags xattrs of missing inodes
}

class LayoutTest : public NamespaceTest {
 protected:
  Result<pb::Layout> set_layout(uint64_t ino, uint32_t size, uint32_t count,
                                pb::Credentials c = root_cred()) {
    pb::SetLayoutRequest r;
    *r.mutable_cred() = c;
    r.set_ino(ino);
    r.mutable_layout()->set_stripe_size(size);
    r.mutable_layout()->set_stripe_count(count);
    pb::SetLayoutReply out;
    SURGE_RETURN_IF_ERROR(ns_->set_layout(r, &out));
    return out.layout();
  }
  using NamespaceTest::get_layout;
};

TEST_F(LayoutTest, DirectoryDefaultAppliesToNewFiles) {
  auto d = mkdir(kRoot, "d");
  ASSERT_TRUE(set_layout(d->ino(), 256 << 10, 2).ok());
  auto f = create(d->ino(), "f");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->layout().stripe_size(), 256u << 10);
  EXPECT_EQ(f->layout().stripe_count(), 2u);
  EXPECT_EQ(f->layout().targets_size(), 2);
}

TEST_F(LayoutTest, SubdirectoriesInheritTheDefault) {
  auto d = mkdir(kRoot, "d");
  ASSERT_TRUE(set_layout(d->ino(), 128 << 10, 1).ok());
  auto s = mkdir(d->ino(), "s");
  auto f = create(s->ino(), "f");
  EXPECT_EQ(f->layout().stripe_size(), 128u << 10);
  EXPECT_EQ(f->layout().stripe_count(), 1u);
}

TEST_F(LayoutTest, GetLayoutOfPlainDirectoryIsInheritedFsDefault) {
  auto d = mkdir(kRoot, "d");
  auto l = get_layout(d->ino());
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(l->inherited());
  EXPECT_EQ(l->layout().stripe_size(), 1u << 20);
}

TEST_F(LayoutTest, EmptyFileLayoutCanChange) {
  auto f = create(kRoot, "f");
  auto l = set_layout(f->ino(), 64 << 10, 1);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(get_layout(f->ino())->layout().stripe_count(), 1u);
}

TEST_F(LayoutTest, NonEmptyFileLayoutIsRefused) {
  auto f = create(kRoot, "f");
  pb::ReportSizeRequest rs;
  *rs.mutable_cred() = root_cred();
  rs.set_ino(f->ino());
  rs.set_end(1);
  pb::EntryReply out;
  ASSERT_TRUE(ns_->report_size(rs, &out).ok());
  EXPECT_EQ(code_of(set_layout(f->ino(), 64 << 10, 1)), Code::kBusy);
}

TEST_F(LayoutTest, BadStripeSizeIsEinval) {
  auto d = mkdir(kRoot, "d");
  EXPECT_EQ(code_of(set_layout(d->ino(), 1000, 1)), Code::kInvalidArgument);
}

TEST_F(LayoutTest, OnlyOwnerChangesLayout) {
  auto d = mkdir(kRoot, "d", 0777);
  EXPECT_EQ(code_of(set_layout(d->ino(), 64 << 10, 1, cred(1000, 1000))), Code::kNotPermitted);
}

}  // namespace
}  // namespace surge::mds::testing
