// The KvStore contract on RocksDB (atomic batches, conflict checks, scans,
// durability across reopen) and the checker's ability to see each kind of
// damage.
#include "mds/namespace/keys.h"
#include "mds/namespace/records.pb.h"
#include "tests/mds/mds_fixture.h"

namespace surge::mds::testing {
namespace {

class KvTest : public NamespaceTest {
 protected:
  void SetUp() override {
    sync_ = true;
    NamespaceTest::SetUp();
  }
};

TEST_F(KvTest, FailedCheckCommitsNothing) {
  KvBatch b;
  b.put(Space::kXattrs, "k1", "v");
  b.check(Space::kXattrs, "k2", std::string("expected"));
  EXPECT_EQ(kv_->commit(b).code(), Code::kBusy);
  EXPECT_FALSE(kv_->get(Space::kXattrs, "k1")->has_value());
}

TEST_F(KvTest, PassingChecksCommitAll) {
  KvBatch b;
  b.put(Space::kXattrs, "k1", "v1");
  b.put(Space::kXattrs, "k2", "v2");
  b.check(Space::kXattrs, "k1", std::nullopt);
  ASSERT_TRUE(kv_->commit(b).ok());
  EXPECT_EQ(**kv_->get(Space::kXattrs, "k2"), "v2");
}

TEST_F(KvTest, ScanIsOrderedAndBounded) {
  KvBatch b;
  for (const char* k : {"a", "b", "c", "d"}) b.put(Space::kXattrs, k, k);
  ASSERT_TRUE(kv_->commit(b).ok());
  std::string seen;
  ASSERT_TRUE(kv_->scan(Space::kXattrs, "b", "d",
                        [&](std::string_view k, std::string_view) {
                          seen += k;
                          return true;
                        })
                  .ok());
  EXPECT_EQ(seen, "bc");
}

TEST_F(KvTest, DeferredCommitIsDurableAfterMakeDurable) {
  KvBatch b;
  b.put(Space::kXattrs, "k", "v");
  ASSERT_TRUE(kv_->commit(b, false).ok());
  ASSERT_TRUE(kv_->make_durable().ok());
  reopen();
  EXPECT_EQ(**kv_->get(Space::kXattrs, "k"), "v");
}

TEST_F(KvTest, SpacesAreSeparate) {
  KvBatch b;
  b.put(Space::kXattrs, "same", "x");
  ASSERT_TRUE(kv_->commit(b).ok());
  EXPECT_FALSE(kv_->get(Space::kDentries, "same")->has_value());
}

TEST(Keys, CookiesAreStable63BitAndAvoidDotPositions) {
  EXPECT_EQ(keys::name_cookie("hello"), keys::name_cookie("hello"));
  EXPECT_NE(keys::name_cookie("hello"), keys::name_cookie("hellp"));
  for (int i = 0; i < 10000; ++i) {
    uint64_t c = keys::name_cookie("n" + std::to_string(i));
    EXPECT_GE(c, 3u);
    EXPECT_LT(c, 1ull << 63);
  }
}

class CheckerTest : public NamespaceTest {
 protected:
  bool problem_contains(const std::string& what) {
    auto r = check_namespace(kv_.get());
    EXPECT_TRUE(r.ok());
    for (const auto& p : r->problems) {
      if (p.find(what) != std::string::npos) return true;
    }
    ADD_FAILURE() << "no problem mentioning '" << what << "' in: " << r->summary();
    return false;
  }
  void put_raw(Space s, const std::string& k, const std::string& v) {
    KvBatch b;
    b.put(s, k, v);
    ASSERT_TRUE(kv_->commit(b).ok());
  }
  void del_raw(Space s, const std::string& k) {
    KvBatch b;
    b.del(s, k);
    ASSERT_TRUE(kv_->commit(b).ok());
  }
};

TEST_F(CheckerTest, DanglingEntry) {
  auto f = create(kRoot, "f");
  del_raw(Space::kInodes, keys::inode(f->ino()));
  EXPECT_TRUE(problem_contains("missing inode"));
}

TEST_F(CheckerTest, WrongNlink) {
  auto f = create(kRoot, "f");
  records::InodeRecord r;
  // The stored attributes keep the wire's field numbers (records.proto).
  ASSERT_TRUE(r.mutable_attr()->ParseFromString(f->SerializeAsString()));
  r.mutable_attr()->set_nlink(2);
  put_raw(Space::kInodes, keys::inode(f->ino()), r.SerializeAsString());
  EXPECT_TRUE(problem_contains("nlink"));
}

TEST_F(CheckerTest, UnreachableInode) {
  auto f = create(kRoot, "f");
  del_raw(Space::kDentries, keys::dentry(kRoot, "f"));
  EXPECT_TRUE(problem_contains("unreachable"));
}

TEST_F(CheckerTest, DirectoryWithTwoParents) {
  auto d = mkdir(kRoot, "d");
  put_raw(Space::kDentries, keys::dentry(kRoot, "d2"), keys::encode_dentry({d->ino(), S_IFDIR}));
  EXPECT_TRUE(problem_contains("entries (must be 1)"));
}

TEST_F(CheckerTest, DetachedDirectoryCycle) {
  auto a = mkdir(kRoot, "a");
  auto b = mkdir(a->ino(), "b");
  // Make a live inside b without going through rename: a cycle off the root.
  del_raw(Space::kDentries, keys::dentry(kRoot, "a"));
  put_raw(Space::kDentries, keys::dentry(b->ino(), "a"), keys::encode_dentry({a->ino(), S_IFDIR}));
  EXPECT_TRUE(problem_contains("does not reach the root"));
}

TEST_F(CheckerTest, CleanAfterOrdinaryWork) {
  auto d = mkdir(kRoot, "d");
  ASSERT_TRUE(create(d->ino(), "f").ok());
  ASSERT_TRUE(symlink(d->ino(), "s", "f").ok());
  ASSERT_TRUE(unlink(d->ino(), "f").ok());
  expect_clean();
}

}  // namespace
}  // namespace surge::mds::testing
