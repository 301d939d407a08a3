// Directory leases (mds/namespace/dir_lease.h, client/lib/dir_leases.h)
// between two native clients of one real cluster: a session answers misses
// in a directory it made without asking the MDS (counted from the MDS's
// /metrics), and never one that another session has added meanwhile: the
// other's addition waits the lease out, so the holder's next lookup of that
// name finds it.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "tests/client/local_cluster.h"
#include "tests/client/metrics_page.h"

namespace surge::test {
namespace {

class DirLeases : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterConfig cfg;
    cfg.metrics = true;
    auto c = LocalCluster::Start(cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    auto h = cluster_->connect();
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    holder_ = std::move(*h);
    auto o = cluster_->connect();
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    other_ = std::move(*o);
    auto d = holder_->mkdir(Client::kRootIno, "d", 0755, root_);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    dir_ = d->ino;
  }
  long mds_lookups() {
    const long n = mds_requests(*cluster_, "lookup");
    EXPECT_GE(n, 0) << "the MDS serves no /metrics page";
    return n;
  }
  static void create(Client& c, Ino dir, const std::string& name) {
    auto f = c.create(dir, name, 0644, O_CREAT | O_EXCL | O_WRONLY, Caller{}, nullptr);
    ASSERT_TRUE(f.ok()) << name << ": " << f.status().ToString();
    ASSERT_TRUE(c.close(*f).ok());
  }
  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<Client> holder_, other_;
  Caller root_;
  Ino dir_ = 0;
};

TEST_F(DirLeases, AMissInADirectoryItMadeIsAnsweredWithoutTheMds) {
  const long before = mds_lookups();
  for (int i = 0; i < 20; ++i) {
    create(*holder_, dir_, "f" + std::to_string(i));  // renews the lease
    auto a = holder_->lookup(dir_, "g" + std::to_string(i), root_);
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), Code::kNotFound) << a.status().ToString();
  }
  EXPECT_EQ(mds_lookups() - before, 0);
}

TEST_F(DirLeases, ItsOwnNamesStillResolve) {
  create(*holder_, dir_, "mine");
  auto a = holder_->lookup(dir_, "mine", root_);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto sub = holder_->mkdir(dir_, "sub", 0755, root_);
  ASSERT_TRUE(sub.ok());
  auto s = holder_->lookup(dir_, "sub", root_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->ino, sub->ino);
}

TEST_F(DirLeases, AnotherSessionsCreateIsSeenByTheHolder) {
  create(*holder_, dir_, "first");
  ASSERT_EQ(holder_->lookup(dir_, "x", root_).status().code(), Code::kNotFound);
  create(*other_, dir_, "x");  // waits the holder's lease out
  auto a = holder_->lookup(dir_, "x", root_);
  ASSERT_TRUE(a.ok()) << "a miss answered past another session's create: " << a.status().ToString();
}

TEST_F(DirLeases, AnotherSessionsMkdirSymlinkAndLinkAreSeenByTheHolder) {
  create(*other_, Client::kRootIno, "elsewhere");
  auto e = other_->lookup(Client::kRootIno, "elsewhere", root_);
  ASSERT_TRUE(e.ok());
  ASSERT_TRUE(other_->mkdir(dir_, "m", 0755, root_).ok());
  ASSERT_TRUE(other_->symlink(dir_, "s", "target", root_).ok());
  ASSERT_TRUE(other_->link(e->ino, dir_, "l", root_).ok());
  for (const char* n : {"m", "s", "l"}) {
    EXPECT_TRUE(holder_->lookup(dir_, n, root_).ok()) << n;
  }
}

TEST_F(DirLeases, ARenameIntoItByAnotherSessionIsSeenByTheHolder) {
  create(*holder_, dir_, "first");
  create(*other_, Client::kRootIno, "moving");
  ASSERT_EQ(holder_->lookup(dir_, "moved", root_).status().code(), Code::kNotFound);
  ASSERT_TRUE(other_->rename(Client::kRootIno, "moving", dir_, "moved", 0, root_).ok());
  EXPECT_TRUE(holder_->lookup(dir_, "moved", root_).ok());
}

TEST_F(DirLeases, TheHoldersOwnRenameIntoItResolves) {
  create(*holder_, Client::kRootIno, "mine-elsewhere");
  ASSERT_TRUE(holder_->rename(Client::kRootIno, "mine-elsewhere", dir_, "mine", 0, root_).ok());
  EXPECT_TRUE(holder_->lookup(dir_, "mine", root_).ok());
}

TEST_F(DirLeases, AfterARecallTheHolderAsksTheMdsAgain) {
  create(*other_, dir_, "y");   // recalls the lease and waits it out
  create(*holder_, dir_, "z");  // the reply says the lease is over
  const long before = mds_lookups();
  EXPECT_EQ(holder_->lookup(dir_, "nothing", root_).status().code(), Code::kNotFound);
  EXPECT_EQ(mds_lookups() - before, 1);
}

TEST_F(DirLeases, ACallerWithoutSearchPermissionIsRefusedAsByTheMds) {
  auto locked = holder_->mkdir(Client::kRootIno, "locked", 0700, root_);
  ASSERT_TRUE(locked.ok());
  create(*holder_, locked->ino, "f");
  Caller stranger{.uid = 4242, .gid = 4242, .groups = {}};
  auto a = holder_->lookup(locked->ino, "missing", stranger);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), Code::kPermissionDenied) << a.status().ToString();
}

}  // namespace
}  // namespace surge::test
