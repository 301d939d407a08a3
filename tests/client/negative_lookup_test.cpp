// Negative lookups cached by the kernel (the negative_timeout mount option)
// between two FUSE mounts of one file system: a miss is remembered for at
// most negative_timeout, never past this mount's own creates, and a create
// through a remembered miss still asks the MDS (O_EXCL sees the other
// mount's file).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "tests/client/local_cluster.h"

namespace surge::test {
namespace {

class NegativeLookups : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = LocalCluster::Start(ClusterConfig{});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    auto b = cluster_->mount("b");
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    b_ = *b;
  }
  // Mount a with these options.
  void mount_a(const std::string& opts) {
    auto a = cluster_->mount("a", opts);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    a_ = *a;
  }
  static int stat_errno(const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 ? 0 : errno;
  }
  static void create_in(const std::string& p) {
    int fd = ::open(p.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    ASSERT_GE(fd, 0) << p << ": " << std::strerror(errno);
    ASSERT_EQ(::close(fd), 0);
  }
  std::unique_ptr<LocalCluster> cluster_;
  std::string a_, b_;
};

TEST_F(NegativeLookups, AMissIsRememberedWithinTheTimeout) {
  mount_a("negative_timeout=600");
  ASSERT_EQ(stat_errno(a_ + "/x"), ENOENT);
  create_in(b_ + "/x");
  EXPECT_EQ(stat_errno(a_ + "/x"), ENOENT) << "the miss was not cached";
}

TEST_F(NegativeLookups, ACreateThroughARememberedMissStillAsksTheMds) {
  mount_a("negative_timeout=600");
  ASSERT_EQ(stat_errno(a_ + "/x"), ENOENT);
  create_in(b_ + "/x");
  errno = 0;
  EXPECT_LT(::open((a_ + "/x").c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644), 0);
  EXPECT_EQ(errno, EEXIST);
}

TEST_F(NegativeLookups, OwnCreateReplacesTheRememberedMiss) {
  mount_a("negative_timeout=600");
  ASSERT_EQ(stat_errno(a_ + "/y"), ENOENT);
  create_in(a_ + "/y");
  EXPECT_EQ(stat_errno(a_ + "/y"), 0);
  ASSERT_EQ(::mkdir((a_ + "/d").c_str(), 0755), 0);
  EXPECT_EQ(stat_errno(a_ + "/d"), 0);
}

TEST_F(NegativeLookups, AnotherMountsCreateShowsOnceTheTimeoutPassed) {
  mount_a("negative_timeout=1");
  ASSERT_EQ(stat_errno(a_ + "/x"), ENOENT);
  create_in(b_ + "/x");
  // Eventually, not by a deadline of 1 s: the machine may be slow.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (stat_errno(a_ + "/x") != 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(stat_errno(a_ + "/x"), 0);
}

TEST_F(NegativeLookups, ZeroAsksTheMdsOnEveryMiss) {
  mount_a("negative_timeout=0");
  ASSERT_EQ(stat_errno(a_ + "/x"), ENOENT);
  create_in(b_ + "/x");
  EXPECT_EQ(stat_errno(a_ + "/x"), 0);
}

}  // namespace
}  // namespace surge::test
