// Every namespace operation: its success case and its errno-exact errors,
// on a real RocksDB. Rename and readdir have their own files.
#include <fcntl.h>

#include <chrono>
#include <future>
#include <thread>

#include "mds/cluster/truncate_intents.h"
#include "tests/mds/mds_fixture.h"

namespace surge::mds::testing {
namespace {

using NsOps = NamespaceTest;

TEST_F(NsOps, FreshStoreHasRootDirectory) {
  EXPECT_EQ(fresh_root_.mode(), static_cast<uint32_t>(S_IFDIR | 0755));
  EXPECT_EQ(fresh_root_.uid(), 0u);
  EXPECT_EQ(fresh_root_.nlink(), 2u);
}

TEST_F(NsOps, FsIdSurvivesReopen) {
  const uint64_t id = ns_->fs_id();
  reopen();
  EXPECT_EQ(ns_->fs_id(), id);
}

TEST_F(NsOps, OtherFsIdIsRefused) {
  auto r = Namespace::FormatOrLoad(kv_.get(), ns_->fs_id() ^ 1);
  EXPECT_EQ(code_of(r), Code::kInvalidArgument);
}

TEST_F(NsOps, CreateThenLookup) {
  auto f = create(kRoot, "f", 0640, cred(1000, 100));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->mode(), static_cast<uint32_t>(S_IFREG | 0640));
  EXPECT_EQ(f->uid(), 1000u);
  EXPECT_EQ(f->gid(), 100u);
  EXPECT_EQ(f->nlink(), 1u);
  auto l = lookup(kRoot, "f");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->ino(), f->ino());
}

TEST_F(NsOps, CreateSurvivesReopen) {
  auto f = create(kRoot, "f");
  ASSERT_TRUE(f.ok());
  reopen();
  auto l = lookup(kRoot, "f");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->ino(), f->ino());
}

TEST_F(NsOps, InodeNumbersAreNotReusedAfterReopen) {
  auto a = create(kRoot, "a");
  ASSERT_TRUE(a.ok());
  reopen();
  auto b = create(kRoot, "b");
  ASSERT_TRUE(b.ok());
  EXPECT_GT(b->ino(), a->ino());
}

TEST_F(NsOps, CreateExclusiveOnExistingIsEexist) {
  ASSERT_TRUE(create(kRoot, "f").ok());
  EXPECT_EQ(code_of(create(kRoot, "f")), Code::kAlreadyExists);
}

TEST_F(NsOps, CreateNonExclusiveOpensExisting) {
  auto f = create(kRoot, "f");
  ASSERT_TRUE(f.ok());
  auto again = create(kRoot, "f", 0644, root_cred(), /*excl=*/false);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->ino(), f->ino());
}

TEST_F(NsOps, CreateNonExclusiveOnDirectoryIsEisdir) {
  ASSERT_TRUE(mkdir(kRoot, "d").ok());
  EXPECT_EQ(code_of(create(kRoot, "d", 0644, root_cred(), false)), Code::kIsDirectory);
}

TEST_F(NsOps, CreateWithTruncTruncatesExisting) {
  auto f = create(kRoot, "f");
  ASSERT_TRUE(f.ok());
  pb::ReportSizeRequest rs;
  *rs.mutable_cred() = root_cred();
  rs.set_ino(f->ino());
  rs.set_end(5000);
  pb::EntryReply out;
  ASSERT_TRUE(ns_->report_size(rs, &out).ok());
  auto again = create(kRoot, "f", 0644, root_cred(), false, 0, O_WRONLY | O_TRUNC);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->size(), 0u);
}

TEST_F(NsOps, CreateInMissingParentIsEnoent) {
  EXPECT_EQ(code_of(create(999999, "f")), Code::kNotFound);
}

TEST_F(NsOps, CreateUnderFileIsEnotdir) {
  auto f = create(kRoot, "f");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(code_of(create(f->ino(), "x")), Code::kNotDirectory);
}

TEST_F(NsOps, CreateWithoutWritePermissionIsEacces) {
  auto d = mkdir(kRoot, "d", 0755);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(code_of(create(d->ino(), "f", 0644, cred(1000, 1000))), Code::kPermissionDenied);
}

TEST_F(NsOps, CreateWithoutSearchPermissionIsEacces) {
  auto d = mkdir(kRoot, "d", 0766);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(code_of(create(d->ino(), "f", 0644, cred(1000, 1000))), Code::kPermissionDenied);
}

TEST_F(NsOps, SupplementaryGroupGrantsAccess) {
  auto d = mkdir(kRoot, "d", 0770);
  ASSERT_TRUE(d.ok());
  pb::SetAttrRequest sa;
  *sa.mutable_cred() = root_cred();
  sa.set_ino(d->ino());
  sa.set_valid(pb::SETATTR_GID);
  sa.set_gid(500);
  ASSERT_TRUE(setattr(sa).ok());
  EXPECT_TRUE(create(d->ino(), "f", 0644, cred(1000, 1000, {7, 500})).ok());
}

TEST_F(NsOps, BadNamesAreRefused) {
  EXPECT_EQ(code_of(create(kRoot, "")), Code::kInvalidArgument);
  EXPECT_EQ(code_of(create(kRoot, ".")), Code::kInvalidArgument);
  EXPECT_EQ(code_of(create(kRoot, "..")), Code::kInvalidArgument);
  EXPECT_EQ(code_of(create(kRoot, "a/b")), Code::kInvalidArgument);
  EXPECT_EQ(code_of(create(kRoot, std::string("a\0b", 3))), Code::kInvalidArgument);
  EXPECT_EQ(code_of(create(kRoot, std::string(256, 'x'))), Code::kNameTooLong);
  EXPECT_TRUE(create(kRoot, std::string(255, 'x')).ok());
}

TEST_F(NsOps, LookupMissingIsEnoent) {
  EXPECT_EQ(code_of(lookup(kRoot, "nope")), Code::kNotFound);
}

TEST_F(NsOps, LookupInUnknownInodeIsEnoent) {
  EXPECT_EQ(code_of(lookup(123456, "x")), Code::kNotFound);
}

TEST_F(NsOps, GetattrUnknownInodeIsEnoent) {
  EXPECT_EQ(code_of(getattr(424242)), Code::kNotFound);
}

TEST_F(NsOps, GetattrInodeZeroIsEinval) {
  EXPECT_EQ(code_of(getattr(0)), Code::kInvalidArgument);
}

TEST_F(NsOps, FileGetsLayoutOverDistinctTargets) {
  auto f = create(kRoot, "f");
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->has_layout());
  EXPECT_EQ(f->layout().stripe_size(), 1u << 20);
  EXPECT_EQ(f->layout().stripe_count(), 3u);  // default 4, clamped to 3 up
  std::set<uint32_t> t(f->layout().targets().begin(), f->layout().targets().end());
  EXPECT_EQ(t.size(), 3u);
}

TEST_F(NsOps, MkdirSetsNlinkAndParentNlink) {
  auto d = mkdir(kRoot, "d");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->nlink(), 2u);
  EXPECT_EQ(getattr(kRoot)->nlink(), 3u);
}

TEST_F(NsOps, MkdirExistingIsEexist) {
  ASSERT_TRUE(mkdir(kRoot, "d").ok());
  EXPECT_EQ(code_of(mkdir(kRoot, "d")), Code::kAlreadyExists);
}

TEST_F(NsOps, SetgidDirectoryPassesGroupOn) {
  auto d = mkdir(kRoot, "d", 02777);
  ASSERT_TRUE(d.ok());
  auto f = create(d->ino(), "f", 0644, cred(1000, 1000));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->gid(), d->gid());
  auto sub = mkdir(d->ino(), "s", 0755, cred(1000, 1000));
  ASSERT_TRUE(sub.ok());
  EXPECT_TRUE(sub->mode() & S_ISGID);
}

TEST_F(NsOps, MknodFifoAndSocket) {
  auto p = mknod(kRoot, "p", S_IFIFO | 0600, cred(1000, 1000));
  auto s = mknod(kRoot, "s", S_IFSOCK | 0600, cred(1000, 1000));
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(S_ISFIFO(p->mode()));
  EXPECT_TRUE(S_ISSOCK(s->mode()));
}

TEST_F(NsOps, MknodRegularGetsLayout) {
  auto f = mknod(kRoot, "f", S_IFREG | 0600);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->has_layout());
}

TEST_F(NsOps, MknodDeviceNeedsRoot) {
  auto d = mkdir(kRoot, "d", 0777);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(code_of(mknod(d->ino(), "c", S_IFCHR | 0600, cred(1000, 1000), 0x0501)),
            Code::kNotPermitted);
  auto c = mknod(d->ino(), "c", S_IFCHR | 0600, root_cred(), 0x0501);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->rdev(), 0x0501u);
}

TEST_F(NsOps, MknodDirectoryIsEperm) {
  EXPECT_EQ(code_of(mknod(kRoot, "d", S_IFDIR | 0755)), Code::kNotPermitted);
}

TEST_F(NsOps, MknodBadTypeIsEinval) {
  EXPECT_EQ(code_of(mknod(kRoot, "x", 0170000 | 0644)), Code::kInvalidArgument);
}

TEST_F(NsOps, SymlinkAndReadlink) {
  auto s = symlink(kRoot, "s", "some/where");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(S_ISLNK(s->mode()));
  EXPECT_EQ(s->size(), 10u);
  pb::ReadlinkRequest r;
  r.set_ino(s->ino());
  pb::ReadlinkReply out;
  ASSERT_TRUE(ns_->readlink(r, &out).ok());
  EXPECT_EQ(out.target(), "some/where");
}

TEST_F(NsOps, SymlinkEmptyTargetIsEnoent) {
  EXPECT_EQ(code_of(symlink(kRoot, "s", "")), Code::kNotFound);
}

TEST_F(NsOps, SymlinkLongTargetIsEnametoolong) {
  EXPECT_EQ(code_of(symlink(kRoot, "s", std::string(4096, 'a'))), Code::kNameTooLong);
}

TEST_F(NsOps, ReadlinkOfFileIsEinval) {
  auto f = create(kRoot, "f");
  ASSERT_TRUE(f.ok());
  pb::ReadlinkRequest r;
  r.set_ino(f->ino());
  pb::ReadlinkReply out;
  EXPECT_EQ(ns_->readlink(r, &out).code(), Code::kInvalidArgument);
}

TEST_F(NsOps, UnlinkRemovesNameAndOrphansInode) {
  auto f = create(kRoot, "f");
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(unlink(kRoot, "f").ok());
  EXPECT_EQ(code_of(lookup(kRoot, "f")), Code::kNotFound);
  auto orphans = ns_->list_orphans(10);
  ASSERT_TRUE(orphans.ok());
  EXPECT_EQ(*orphans, std::vector<uint64_t>{f->ino()});
  expect_clean();
}

TEST_F(NsOps, UnlinkMissingIsEnoent) {
  EXPECT_EQ(unlink(kRoot, "nope").code(), Code::kNotFound);
}

TEST_F(NsOps, UnlinkDirectoryIsEisdir) {
  ASSERT_TRUE(mkdir(kRoot, "d").ok());
  EXPECT_EQ(unlink(kRoot, "d").code(), Code::kIsDirectory);
}

TEST_F(NsOps, UnlinkWithoutWritePermissionIsEacces) {
  auto d = mkdir(kRoot, "d", 0755);
  ASSERT_TRUE(create(d->ino(), "f").ok());
  EXPECT_EQ(unlink(d->ino(), "f", cred(1000, 1000)).code(), Code::kPermissionDenied);
}

TEST_F(NsOps, StickyDirectoryProtectsOthersEntries) {
  auto d = mkdir(kRoot, "tmp", 01777);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(create(d->ino(), "mine", 0644, cred(1000, 1000)).ok());
  EXPECT_EQ(unlink(d->ino(), "mine", cred(1001, 1001)).code(), Code::kNotPermitted);
  EXPECT_EQ(rename(d->ino(), "mine", d->ino(), "x", 0, cred(1001, 1001)).code(),
            Code::kNotPermitted);
  EXPECT_TRUE(unlink(d->ino(), "mine", cred(1000, 1000)).ok());
}

TEST_F(NsOps, RmdirEmptyDirectory) {
  auto d = mkdir(kRoot, "d");
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(rmdir(kRoot, "d").ok());
  EXPECT_EQ(code_of(getattr(d->ino())), Code::kNotFound);
  EXPECT_EQ(getattr(kRoot)->nlink(), 2u);
  expect_clean();
}

TEST_F(NsOps, RmdirNonEmptyIsEnotempty) {
  auto d = mkdir(kRoot, "d");
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(create(d->ino(), "f").ok());
  EXPECT_EQ(rmdir(kRoot, "d").code(), Code::kNotEmpty);
}

TEST_F(NsOps, RmdirOfFileIsEnotdir) {
  ASSERT_TRUE(create(kRoot, "f").ok());
  EXPECT_EQ(rmdir(kRoot, "f").code(), Code::kNotDirectory);
}

TEST_F(NsOps, RmdirMissingIsEnoent) {
  EXPECT_EQ(rmdir(kRoot, "nope").code(), Code::kNotFound);
}

TEST_F(NsOps, LinkCountsAndSurvivesUnlinkOfOneName) {
  auto f = create(kRoot, "f");
  ASSERT_TRUE(f.ok());
  auto l = link(f->ino(), kRoot, "g");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->nlink(), 2u);
  ASSERT_TRUE(unlink(kRoot, "f").ok());
  EXPECT_EQ(getattr(f->ino())->nlink(), 1u);
  EXPECT_EQ(lookup(kRoot, "g")->ino(), f->ino());
  auto orphans = ns_->list_orphans(10);
  EXPECT_TRUE(orphans->empty());
  expect_clean();
}

TEST_F(NsOps, LinkToDirectoryIsEperm) {
  auto d = mkdir(kRoot, "d");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(code_of(link(d->ino(), kRoot, "e")), Code::kNotPermitted);
}

TEST_F(NsOps, LinkOntoExistingIsEexist) {
  auto f = create(kRoot, "f");
  ASSERT_TRUE(create(kRoot, "g").ok());
  EXPECT_EQ(code_of(link(f->ino(), kRoot, "g")), Code::kAlreadyExists);
}

TEST_F(NsOps, LinkOfUnlinkedInodeIsEnoent) {
  auto f = create(kRoot, "f");
  ASSERT_TRUE(unlink(kRoot, "f").ok());
  EXPECT_EQ(code_of(link(f->ino(), kRoot, "g")), Code::kNotFound);
}

TEST_F(NsOps, SetattrChmodByOwner) {
  auto f = create(kRoot, "f", 0644, cred(1000, 1000));
  pb::SetAttrRequest r;
  *r.mutable_cred() = cred(1000, 1000);
  r.set_ino(f->ino());
  r.set_valid(pb::SETATTR_MODE);
  r.set_mode(0600);
  auto a = setattr(r);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->mode(), static_cast<uint32_t>(S_IFREG | 0600));
}

TEST_F(NsOps, SetattrChmodByOtherIsEperm) {
  auto f = create(kRoot, "f", 0666, cred(1000, 1000));
  pb::SetAttrRequest r;
  *r.mutable_cred() = cred(1001, 1001);
  r.set_ino(f->ino());
  r.set_valid(pb::SETATTR_MODE);
  r.set_mode(0600);
  EXPECT_EQ(code_of(setattr(r)), Code::kNotPermitted);
}

TEST_F(NsOps, SetattrChownNeedsRoot) {
  auto f = create(kRoot, "f", 0644, cred(1000, 1000));
  pb::SetAttrRequest r;
  *r.mutable_cred() = cred(1000, 1000);
  r.set_ino(f->ino());
  r.set_valid(pb::SETATTR_UID);
  r.set_uid(1001);
  EXPECT_EQ(code_of(setattr(r)), Code::kNotPermitted);
  *r.mutable_cred() = root_cred();
  auto a = setattr(r);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->uid(), 1001u);
}

TEST_F(NsOps, SetattrChgrpToOwnGroupOnly) {
  auto f = create(kRoot, "f", 0644, cred(1000, 1000, {50}));
  pb::SetAttrRequest r;
  *r.mutable_cred() = cred(1000, 1000, {50});
  r.set_ino(f->ino());
  r.set_valid(pb::SETATTR_GID);
  r.set_gid(50);
  EXPECT_TRUE(setattr(r).ok());
  r.set_gid(60);
  EXPECT_EQ(code_of(setattr(r)), Code::kNotPermitted);
}

TEST_F(NsOps, ChownClearsSetuid) {
  auto f = create(kRoot, "f", 04755);
  pb::SetAttrRequest r;
  *r.mutable_cred() = root_cred();
  r.set_ino(f->ino());
  r.set_valid(pb::SETATTR_UID);
  r.set_uid(5);
  auto a = setattr(r);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->mode() & S_ISUID, 0u);
}

TEST_F(NsOps, SetattrTimesInNanoseconds) {
  auto f = create(kRoot, "f");
  pb::SetAttrRequest r;
  *r.mutable_cred() = root_cred();
  r.set_ino(f->ino());
  r.set_valid(pb::SETATTR_ATIME | pb::SETATTR_MTIME | pb::SETATTR_CTIME);
  r.set_atime_ns(1'000'000'001);
  r.set_mtime_ns(2'000'000'002);
  r.set_ctime_ns(3'000'000'003);
  ASSERT_TRUE(setattr(r).ok());
  auto a = getattr(f->ino());
  EXPECT_EQ(a->atime_ns(), 1'000'000'001u);
  EXPECT_EQ(a->mtime_ns(), 2'000'000'002u);
  EXPECT_EQ(a->ctime_ns(), 3'000'000'003u);
}

TEST_F(NsOps, SetattrExplicitTimesByNonOwnerIsEperm) {
  auto f = create(kRoot, "f", 0666);
  pb::SetAttrRequest r;
  *r.mutable_cred() = cred(1000, 1000);
  r.set_ino(f->ino());
  r.set_valid(pb::SETATTR_MTIME);
  r.set_mtime_ns(5);
  EXPECT_EQ(code_of(setattr(r)), Code::kNotPermitted);
  r.set_valid(pb::SETATTR_MTIME_NOW);  // write permission is enough for "now"
  EXPECT_TRUE(setattr(r).ok());
}

// The truncate is an intent (namespace_truncate.cpp); the pass sends it.
TEST_F(NsOps, TruncateCallsEveryTargetWithObjectSizes) {
  auto f = create(kRoot, "f");
  ASSERT_TRUE(f.ok());
  pb::SetAttrRequest r;
  *r.mutable_cred() = root_cred();
  r.set_ino(f->ino());
  r.set_valid(pb::SETATTR_SIZE);
  r.set_size((1 << 20) + 100);  // stripe 0 full, stripe 1 has 100 bytes, stripe 2 empty
  auto a = setattr(r);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->size(), (1u << 20) + 100);
  auto pass = apply_truncate_intents(*ns_, *map_, objects_, 100);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  std::map<uint32_t, uint64_t> sizes;
  for (auto& [t, o, s] : objects_.truncates) {
    EXPECT_EQ(o, f->ino());
    sizes[t] = s;
  }
  ASSERT_EQ(sizes.size(), 3u);
  EXPECT_EQ(sizes[f->layout().targets(0)], 1u << 20);
  EXPECT_EQ(sizes[f->layout().targets(1)], 100u);
  EXPECT_EQ(sizes[f->layout().targets(2)], 0u);
}

// A slow data server must not hold the inode's lock stripe: with the
// fake data server holding truncates, `truncating` (run on its own thread)
// reaches it, and a chmod of the same inode to 0600 must finish meanwhile.
// A truncate calls data servers in the request only to apply the file's
// previous truncate still pending (namespace_truncate.cpp): pending() makes one.
// Returns the truncating operation's result once the truncates are let go.
class HeldTruncateTest : public NsOps {
 protected:
  template <typename Op>
  auto chmod_while_held(uint64_t ino, Op truncating) -> decltype(truncating()) {
    objects_.hold_truncates();
    auto held = std::async(std::launch::async, truncating);
    for (int i = 0; i < 500 && objects_.truncates_waiting() == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_GT(objects_.truncates_waiting(), 0u) << "the truncate never reached the data servers";
    pb::SetAttrRequest m;
    *m.mutable_cred() = root_cred();
    m.set_ino(ino);
    m.set_valid(pb::SETATTR_MODE);
    m.set_mode(0600);
    auto chmod = std::async(std::launch::async, [&] { return setattr(m); });
    const bool chmod_done = chmod.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
    objects_.release_truncates();
    EXPECT_TRUE(chmod_done) << "a chmod waited for a truncate's data-server call";
    EXPECT_TRUE(chmod.get().ok());
    return held.get();
  }
  void pending(uint64_t ino, uint64_t size) {
    pb::SetAttrRequest t;
    *t.mutable_cred() = root_cred();
    t.set_ino(ino);
    t.set_valid(pb::SETATTR_SIZE);
    t.set_size(size);
    ASSERT_TRUE(setattr(t).ok());
    ASSERT_TRUE(objects_.truncates.empty()) << "the truncate called a data server";
  }
};

// The truncate then finds its record changed, truncates again and commits.
TEST_F(HeldTruncateTest, ATruncateWaitingOnADataServerHoldsNoInodeLock) {
  auto f = create(kRoot, "f", 0644);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  pb::SetAttrRequest t;
  *t.mutable_cred() = root_cred();
  t.set_ino(f->ino());
  t.set_valid(pb::SETATTR_SIZE);
  t.set_size(4096);
  pending(f->ino(), 8192);
  auto done = chmod_while_held(f->ino(), [&] { return setattr(t); });
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  auto a = getattr(f->ino());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->size(), 4096u);
  EXPECT_EQ(a->mode() & 07777, 0600u) << "the truncate's commit undid the chmod";
}

// The same for open(O_TRUNC) of an existing file (through create, as
// open(O_CREAT|O_TRUNC) does).
TEST_F(HeldTruncateTest, AnOpenWithTruncWaitingOnADataServerHoldsNoInodeLock) {
  auto f = create(kRoot, "f", 0644);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  pending(f->ino(), 8192);
  auto opened = chmod_while_held(f->ino(), [&] {
    return create(kRoot, "f", 0644, root_cred(), false, 0, O_WRONLY | O_TRUNC);
  });
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->size(), 0u);
  EXPECT_EQ(opened->mode() & 07777, 0600u) << "the open's commit undid the chmod";
}

// A truncate that cannot apply the previous one (still pending) fails and
// leaves the size that one set.
TEST_F(NsOps, TruncateFailingTargetKeepsSize) {
  auto f = create(kRoot, "f");
  pb::SetAttrRequest r;
  *r.mutable_cred() = root_cred();
  r.set_ino(f->ino());
  r.set_valid(pb::SETATTR_SIZE);
  r.set_size(100);
  ASSERT_TRUE(setattr(r).ok());
  objects_.failing.insert(f->layout().targets(1));
  r.set_size(10);
  EXPECT_EQ(code_of(setattr(r)), Code::kUnavailable);
  EXPECT_EQ(getattr(f->ino())->size(), 100u);
}

TEST_F(NsOps, TruncateDirectoryIsEisdir) {
  auto d = mkdir(kRoot, "d");
  pb::SetAttrRequest r;
  *r.mutable_cred() = root_cred();
  r.set_ino(d->ino());
  r.set_valid(pb::SETATTR_SIZE);
  EXPECT_EQ(code_of(setattr(r)), Code::kIsDirectory);
}

TEST_F(NsOps, TruncateWithoutWritePermissionIsEacces) {
  auto f = create(kRoot, "f", 0644);
  pb::SetAttrRequest r;
  *r.mutable_cred() = cred(1000, 1000);
  r.set_ino(f->ino());
  r.set_valid(pb::SETATTR_SIZE);
  EXPECT_EQ(code_of(setattr(r)), Code::kPermissionDenied);
}

TEST_F(NsOps, ReportSizeMergesAsMaximum) {
  auto f = create(kRoot, "f");
  pb::ReportSizeRequest r;
  *r.mutable_cred() = root_cred();
  r.set_ino(f->ino());
  pb::EntryReply out;
  r.set_end(4096);
  ASSERT_TRUE(ns_->report_size(r, &out).ok());
  r.set_end(100);
  r.set_mtime_ns(777);
  ASSERT_TRUE(ns_->report_size(r, &out).ok());
  EXPECT_EQ(out.attr().size(), 4096u);
  EXPECT_EQ(out.attr().mtime_ns(), 777u);
}

TEST_F(NsOps, ReportSizeOnDirectoryIsEisdir) {
  auto d = mkdir(kRoot, "d");
  pb::ReportSizeRequest r;
  r.set_ino(d->ino());
  pb::EntryReply out;
  EXPECT_EQ(ns_->report_size(r, &out).code(), Code::kIsDirectory);
}

TEST_F(NsOps, AccessChecksModeBits) {
  auto f = create(kRoot, "f", 0640, cred(1000, 100));
  pb::AccessRequest r;
  r.set_ino(f->ino());
  r.set_mask(4);
  *r.mutable_cred() = cred(1001, 100);  // group: read only
  EXPECT_TRUE(ns_->access(r).ok());
  r.set_mask(2);
  EXPECT_EQ(ns_->access(r).code(), Code::kPermissionDenied);
  *r.mutable_cred() = cred(1001, 200);  // other: nothing
  r.set_mask(4);
  EXPECT_EQ(ns_->access(r).code(), Code::kPermissionDenied);
  *r.mutable_cred() = root_cred();
  r.set_mask(6);
  EXPECT_TRUE(ns_->access(r).ok());
  r.set_mask(1);  // root needs some x bit to execute
  EXPECT_EQ(ns_->access(r).code(), Code::kPermissionDenied);
}

TEST_F(NsOps, OpenChecksAccessMode) {
  auto f = create(kRoot, "f", 0644, cred(1000, 1000));
  pb::OpenRequest r;
  r.set_ino(f->ino());
  *r.mutable_cred() = cred(1001, 1001);
  pb::EntryReply out;
  r.set_flags(O_RDONLY);
  EXPECT_TRUE(ns_->open(r, &out).ok());
  r.set_flags(O_RDWR);
  EXPECT_EQ(ns_->open(r, &out).code(), Code::kPermissionDenied);
}

TEST_F(NsOps, OpenDirectoryForWriteIsEisdir) {
  auto d = mkdir(kRoot, "d");
  pb::OpenRequest r;
  r.set_ino(d->ino());
  r.set_flags(O_WRONLY);
  pb::EntryReply out;
  EXPECT_EQ(ns_->open(r, &out).code(), Code::kIsDirectory);
}

TEST_F(NsOps, OpenWithUnknownSessionIsEnoent) {
  auto f = create(kRoot, "f");
  pb::OpenRequest r;
  r.set_ino(f->ino());
  r.set_session_id(12345);
  pb::EntryReply out;
  EXPECT_EQ(ns_->open(r, &out).code(), Code::kNotFound);
}

TEST_F(NsOps, StatfsSumsTargetsAndCountsInodes) {
  ASSERT_TRUE(create(kRoot, "f").ok());
  pb::StatFsRequest r;
  pb::StatFsReply out;
  ASSERT_TRUE(ns_->statfs(r, &out).ok());
  EXPECT_EQ(out.capacity_bytes(), 300ull << 30);
  EXPECT_EQ(out.free_bytes(), 150ull << 30);
  EXPECT_GE(out.inodes_used(), 1u);
  EXPECT_EQ(out.name_max(), 255u);
}

// df -i's "used": every inode the store holds, counted exactly after
// creates of each type, a hard link (no new inode), rmdir, a directory
// renamed over an empty one, an unlinked file (kept until its orphan is
// purged) and the purge; and the same after the store is opened again.
TEST_F(NsOps, StatfsCountsInodesExactly) {
  auto inodes_in_store = [&] {
    uint64_t n = 0;
    EXPECT_TRUE(kv_->scan(Space::kInodes, "", "",
                          [&](std::string_view, std::string_view) {
                            ++n;
                            return true;
                          })
                    .ok());
    return n;
  };
  auto used = [&]() -> uint64_t {
    pb::StatFsReply out;
    Status st = ns_->statfs(pb::StatFsRequest(), &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out.inodes_used();
  };
  auto d = mkdir(kRoot, "d");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(create(d->ino(), "f" + std::to_string(i)).ok());
  auto f0 = lookup(d->ino(), "f0");
  ASSERT_TRUE(f0.ok());
  ASSERT_TRUE(symlink(kRoot, "s", "d/f0").ok());
  ASSERT_TRUE(mknod(kRoot, "fifo", S_IFIFO | 0644).ok());
  ASSERT_TRUE(link(f0->ino(), kRoot, "hard").ok());
  ASSERT_TRUE(mkdir(kRoot, "e1").ok());
  ASSERT_TRUE(mkdir(kRoot, "e2").ok());
  ASSERT_TRUE(mkdir(kRoot, "e3").ok());
  EXPECT_EQ(used(), 1u + 1 + 20 + 1 + 1 + 3);  // root, d, files, symlink, fifo, e1-e3
  ASSERT_TRUE(rmdir(kRoot, "e3").ok());
  ASSERT_TRUE(rename(kRoot, "e1", kRoot, "e2").ok());  // e2's inode goes
  auto f1 = lookup(d->ino(), "f1");
  ASSERT_TRUE(f1.ok());
  ASSERT_TRUE(unlink(d->ino(), "f1").ok());
  EXPECT_EQ(used(), inodes_in_store());
  EXPECT_EQ(used(), 1u + 1 + 20 + 1 + 1 + 1);  // f1 stays until its orphan is purged
  ASSERT_TRUE(ns_->purge_orphan(f1->ino()).ok());
  EXPECT_EQ(used(), 1u + 1 + 19 + 1 + 1 + 1);
  EXPECT_EQ(used(), inodes_in_store());
  reopen();
  EXPECT_EQ(used(), 1u + 1 + 19 + 1 + 1 + 1);
}

TEST_F(NsOps, NoTargetUpFailsCreateWithNoSpace) {
  register_targets_ = false;
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
  reopen();
  EXPECT_EQ(code_of(create(kRoot, "f")), Code::kNoSpace);
  EXPECT_TRUE(mkdir(kRoot, "d").ok());  // directories need no data server
}

}  // namespace
}  // namespace surge::mds::testing

namespace surge::mds::testing {
namespace {

TEST_F(NamespaceTest, CreateWithUnknownSessionCreatesNothing) {
  EXPECT_EQ(code_of(create(kRoot, "f", 0644, root_cred(), true, /*session=*/777)), Code::kNotFound);
  EXPECT_EQ(code_of(lookup(kRoot, "f")), Code::kNotFound);
}

}  // namespace
}  // namespace surge::mds::testing
