// Stat-ahead through the mount (the stat_ahead mount option): stat of every
// file another mount made costs a few readdir pages, not an MDS lookup
// each (counted from the MDS's /metrics), gives what the files are, and
// this mount's own changes show in the entries it then gives the kernel.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "tests/client/local_cluster.h"
#include "tests/client/metrics_page.h"

namespace surge::test {
namespace {

constexpr int kFiles = 200;

class StatAheadMount : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterConfig cfg;
    cfg.metrics = true;
    auto c = LocalCluster::Start(cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    auto b = cluster_->mount("b");
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    ASSERT_EQ(::mkdir((*b + "/d").c_str(), 0755), 0) << std::strerror(errno);
    for (int i = 0; i < kFiles; ++i) {
      const std::string p = *b + "/d/" + name(i);
      int fd = ::open(p.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
      ASSERT_GE(fd, 0) << p << ": " << std::strerror(errno);
      const std::string data(static_cast<size_t>(i), 'x');  // file i has i bytes
      ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
      ASSERT_EQ(::close(fd), 0);
    }
  }
  void mount_a(const std::string& opts) {
    auto a = cluster_->mount("a", opts);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    dir_ = *a + "/d/";
  }
  static std::string name(int i) { return "f" + std::to_string(i); }
  long mds_lookups() {
    const long n = mds_requests(*cluster_, "lookup");
    EXPECT_GE(n, 0) << "the MDS serves no /metrics page";
    return n;
  }
  // stat of every file through mount a, checking its size.
  void stat_all() {
    for (int i = 0; i < kFiles; ++i) {
      struct stat st;
      ASSERT_EQ(::stat((dir_ + name(i)).c_str(), &st), 0)
          << name(i) << ": " << std::strerror(errno);
      ASSERT_EQ(st.st_size, i) << name(i);
    }
  }
  std::unique_ptr<LocalCluster> cluster_;
  std::string dir_;
};

TEST_F(StatAheadMount, StatOfAnotherMountsFilesTakesAFewLookups) {
  mount_a("");
  const long before = mds_lookups();
  stat_all();
  EXPECT_LT(mds_lookups() - before, kFiles / 4) << "a lookup per stat";
}

TEST_F(StatAheadMount, WithTheOptionOffEachStatIsALookup) {
  mount_a("stat_ahead=0");
  const long before = mds_lookups();
  stat_all();
  EXPECT_GE(mds_lookups() - before, kFiles);
}

// The kernel's names and attributes are dropped (drop_caches), so the
// stats after this mount's changes come back as LOOKUPs, which the fetch
// made by stat_all() would answer if it ignored the changes.
TEST_F(StatAheadMount, OurOwnChangesShowInTheEntriesWeGive) {
  mount_a("");
  stat_all();
  ASSERT_EQ(::chmod((dir_ + name(5)).c_str(), 0600), 0) << std::strerror(errno);
  int fd = ::open((dir_ + name(6)).c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::write(fd, "0123456789", 10), 10);
  ASSERT_EQ(::close(fd), 0);
  ASSERT_EQ(::unlink((dir_ + name(7)).c_str()), 0) << std::strerror(errno);
  ::sync();
  std::ofstream("/proc/sys/vm/drop_caches") << "2\n";
  struct stat st;
  ASSERT_EQ(::stat((dir_ + name(5)).c_str(), &st), 0) << std::strerror(errno);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(::stat((dir_ + name(6)).c_str(), &st), 0) << std::strerror(errno);
  EXPECT_EQ(st.st_size, 6 + 10);
  EXPECT_NE(::stat((dir_ + name(7)).c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT);
}

}  // namespace
}  // namespace surge::test
