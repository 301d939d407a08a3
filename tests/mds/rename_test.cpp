// The rename matrix (file over file, dir over empty dir, dir over non-empty
// dir, file over dir, dir over file, across parents, into own subtree,
// exchange, noreplace) and link counts through link/unlink/rename.
#include "tests/mds/mds_fixture.h"

namespace surge::mds::testing {
namespace {

constexpr uint32_t kNoReplace = 1;
constexpr uint32_t kExchange = 2;

using RenameTest = NamespaceTest;

TEST_F(RenameTest, FileWithinDirectory) {
  auto f = create(kRoot, "a");
  ASSERT_TRUE(rename(kRoot, "a", kRoot, "b").ok());
  EXPECT_EQ(code_of(lookup(kRoot, "a")), Code::kNotFound);
  EXPECT_EQ(lookup(kRoot, "b")->ino(), f->ino());
  expect_clean();
}

TEST_F(RenameTest, FileOverFileOrphansTheVictim) {
  auto a = create(kRoot, "a");
  auto b = create(kRoot, "b");
  ASSERT_TRUE(rename(kRoot, "a", kRoot, "b").ok());
  EXPECT_EQ(lookup(kRoot, "b")->ino(), a->ino());
  EXPECT_EQ(getattr(b->ino())->nlink(), 0u);
  EXPECT_EQ(*ns_->list_orphans(10), std::vector<uint64_t>{b->ino()});
  expect_clean();
}

TEST_F(RenameTest, FileOverHardLinkedFileKeepsVictim) {
  auto a = create(kRoot, "a");
  auto b = create(kRoot, "b");
  ASSERT_TRUE(link(b->ino(), kRoot, "b2").ok());
  ASSERT_TRUE(rename(kRoot, "a", kRoot, "b").ok());
  EXPECT_EQ(getattr(b->ino())->nlink(), 1u);
  EXPECT_TRUE(ns_->list_orphans(10)->empty());
  expect_clean();
}

TEST_F(RenameTest, RenameOntoOtherNameOfSameInodeIsNoop) {
  auto a = create(kRoot, "a");
  ASSERT_TRUE(link(a->ino(), kRoot, "b").ok());
  ASSERT_TRUE(rename(kRoot, "a", kRoot, "b").ok());
  EXPECT_TRUE(lookup(kRoot, "a").ok());
  EXPECT_TRUE(lookup(kRoot, "b").ok());
  EXPECT_EQ(getattr(a->ino())->nlink(), 2u);
  expect_clean();
}

TEST_F(RenameTest, DirOverEmptyDir) {
  auto a = mkdir(kRoot, "a");
  auto b = mkdir(kRoot, "b");
  ASSERT_TRUE(rename(kRoot, "a", kRoot, "b").ok());
  EXPECT_EQ(lookup(kRoot, "b")->ino(), a->ino());
  EXPECT_EQ(code_of(getattr(b->ino())), Code::kNotFound);
  EXPECT_EQ(getattr(kRoot)->nlink(), 3u);
  expect_clean();
}

TEST_F(RenameTest, DirOverNonEmptyDirIsEnotempty) {
  ASSERT_TRUE(mkdir(kRoot, "a").ok());
  auto b = mkdir(kRoot, "b");
  ASSERT_TRUE(create(b->ino(), "x").ok());
  EXPECT_EQ(rename(kRoot, "a", kRoot, "b").code(), Code::kNotEmpty);
}

TEST_F(RenameTest, FileOverDirIsEisdir) {
  ASSERT_TRUE(create(kRoot, "a").ok());
  ASSERT_TRUE(mkdir(kRoot, "b").ok());
  EXPECT_EQ(rename(kRoot, "a", kRoot, "b").code(), Code::kIsDirectory);
}

TEST_F(RenameTest, DirOverFileIsEnotdir) {
  ASSERT_TRUE(mkdir(kRoot, "a").ok());
  ASSERT_TRUE(create(kRoot, "b").ok());
  EXPECT_EQ(rename(kRoot, "a", kRoot, "b").code(), Code::kNotDirectory);
}

TEST_F(RenameTest, MissingSourceIsEnoent) {
  EXPECT_EQ(rename(kRoot, "nope", kRoot, "b").code(), Code::kNotFound);
}

TEST_F(RenameTest, FileAcrossDirectories) {
  auto d1 = mkdir(kRoot, "d1");
  auto d2 = mkdir(kRoot, "d2");
  auto f = create(d1->ino(), "f");
  ASSERT_TRUE(rename(d1->ino(), "f", d2->ino(), "g").ok());
  EXPECT_EQ(lookup(d2->ino(), "g")->ino(), f->ino());
  EXPECT_EQ(code_of(lookup(d1->ino(), "f")), Code::kNotFound);
  expect_clean();
}

TEST_F(RenameTest, DirAcrossDirectoriesMovesNlink) {
  auto d1 = mkdir(kRoot, "d1");
  auto d2 = mkdir(kRoot, "d2");
  auto s = mkdir(d1->ino(), "s");
  ASSERT_TRUE(rename(d1->ino(), "s", d2->ino(), "s").ok());
  EXPECT_EQ(getattr(d1->ino())->nlink(), 2u);
  EXPECT_EQ(getattr(d2->ino())->nlink(), 3u);
  expect_clean();
}

TEST_F(RenameTest, DirIntoItselfIsEinval) {
  auto a = mkdir(kRoot, "a");
  EXPECT_EQ(rename(kRoot, "a", a->ino(), "x").code(), Code::kInvalidArgument);
}

TEST_F(RenameTest, DirIntoOwnSubtreeIsEinval) {
  auto a = mkdir(kRoot, "a");
  auto b = mkdir(a->ino(), "b");
  auto c = mkdir(b->ino(), "c");
  EXPECT_EQ(rename(kRoot, "a", c->ino(), "x").code(), Code::kInvalidArgument);
  expect_clean();
}

TEST_F(RenameTest, NoReplaceOnExistingIsEexist) {
  ASSERT_TRUE(create(kRoot, "a").ok());
  ASSERT_TRUE(create(kRoot, "b").ok());
  EXPECT_EQ(rename(kRoot, "a", kRoot, "b", kNoReplace).code(), Code::kAlreadyExists);
}

TEST_F(RenameTest, NoReplaceOnFreeNameMoves) {
  ASSERT_TRUE(create(kRoot, "a").ok());
  EXPECT_TRUE(rename(kRoot, "a", kRoot, "b", kNoReplace).ok());
  expect_clean();
}

TEST_F(RenameTest, ExchangeSwapsFileAndDirAcrossParents) {
  auto d1 = mkdir(kRoot, "d1");
  auto d2 = mkdir(kRoot, "d2");
  auto f = create(d1->ino(), "x");
  auto s = mkdir(d2->ino(), "y");
  ASSERT_TRUE(rename(d1->ino(), "x", d2->ino(), "y", kExchange).ok());
  EXPECT_EQ(lookup(d1->ino(), "x")->ino(), s->ino());
  EXPECT_EQ(lookup(d2->ino(), "y")->ino(), f->ino());
  EXPECT_EQ(getattr(d1->ino())->nlink(), 3u);
  EXPECT_EQ(getattr(d2->ino())->nlink(), 2u);
  expect_clean();
}

TEST_F(RenameTest, ExchangeWithMissingTargetIsEnoent) {
  ASSERT_TRUE(create(kRoot, "a").ok());
  EXPECT_EQ(rename(kRoot, "a", kRoot, "b", kExchange).code(), Code::kNotFound);
}

TEST_F(RenameTest, ExchangeParentWithChildIsEinval) {
  auto a = mkdir(kRoot, "a");
  ASSERT_TRUE(mkdir(a->ino(), "b").ok());
  EXPECT_EQ(rename(kRoot, "a", a->ino(), "b", kExchange).code(), Code::kInvalidArgument);
}

TEST_F(RenameTest, BothFlagsIsEinval) {
  ASSERT_TRUE(create(kRoot, "a").ok());
  EXPECT_EQ(rename(kRoot, "a", kRoot, "b", kNoReplace | kExchange).code(), Code::kInvalidArgument);
  EXPECT_EQ(rename(kRoot, "a", kRoot, "b", 8).code(), Code::kInvalidArgument);
}

TEST_F(RenameTest, BadTargetNameIsRefused) {
  ASSERT_TRUE(create(kRoot, "a").ok());
  EXPECT_EQ(rename(kRoot, "a", kRoot, "x/y").code(), Code::kInvalidArgument);
  EXPECT_EQ(rename(kRoot, "a", kRoot, std::string(300, 'y')).code(), Code::kNameTooLong);
}

TEST_F(RenameTest, ParentNotDirectoryIsEnotdir) {
  auto f = create(kRoot, "f");
  ASSERT_TRUE(create(kRoot, "a").ok());
  EXPECT_EQ(rename(kRoot, "a", f->ino(), "b").code(), Code::kNotDirectory);
}

TEST_F(RenameTest, DirAcrossParentsNeedsWriteOnItself) {
  auto d1 = mkdir(kRoot, "d1", 0777);
  auto d2 = mkdir(kRoot, "d2", 0777);
  ASSERT_TRUE(mkdir(d1->ino(), "s", 0555, cred(1000, 1000)).ok());
  EXPECT_EQ(rename(d1->ino(), "s", d2->ino(), "s", 0, cred(1000, 1000)).code(),
            Code::kPermissionDenied);
}

TEST_F(RenameTest, LinkCountsThroughLinkUnlinkRename) {
  auto d = mkdir(kRoot, "d");
  auto f = create(kRoot, "f");
  ASSERT_TRUE(link(f->ino(), d->ino(), "f2").ok());
  ASSERT_TRUE(link(f->ino(), kRoot, "f3").ok());
  EXPECT_EQ(getattr(f->ino())->nlink(), 3u);
  ASSERT_TRUE(rename(kRoot, "f3", d->ino(), "f4").ok());
  EXPECT_EQ(getattr(f->ino())->nlink(), 3u);
  ASSERT_TRUE(rename(d->ino(), "f4", d->ino(), "f2").ok());  // same inode: no-op
  EXPECT_EQ(getattr(f->ino())->nlink(), 3u);
  auto g = create(kRoot, "g");
  ASSERT_TRUE(rename(kRoot, "g", d->ino(), "f2").ok());  // replaces one link of f
  EXPECT_EQ(getattr(f->ino())->nlink(), 2u);
  ASSERT_TRUE(unlink(kRoot, "f").ok());
  ASSERT_TRUE(unlink(d->ino(), "f4").ok());
  EXPECT_EQ(getattr(f->ino())->nlink(), 0u);
  expect_clean();
}

}  // namespace
}  // namespace surge::mds::testing
