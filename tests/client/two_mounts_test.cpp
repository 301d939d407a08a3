// Close-to-open between two FUSE mounts of one file system on one machine:
// what one mount writes and closes, the other reads after its open, with
// the default cache timeouts.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "tests/client/local_cluster.h"

namespace surge::test {
namespace {

TEST(TwoMounts, CloseToOpen) {
  ClusterConfig cfg;
  cfg.stripe_size = 64 * 1024;
  cfg.stripe_count = 3;
  auto c = LocalCluster::Start(cfg);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto a = (*c)->mount("a");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = (*c)->mount("b");
  ASSERT_TRUE(b.ok()) << b.status().ToString();

  // B looks first, so it has the (empty) file in its caches.
  ASSERT_TRUE(write_file(*a + "/f", "v1").ok());
  EXPECT_EQ(*read_file(*b + "/f"), "v1");
  for (int round = 2; round <= 6; ++round) {
    // A rewrites it bigger each time and closes; B opens and must see it all.
    std::string data = random_bytes(static_cast<size_t>(round) * 100000 + 3, round);
    ASSERT_TRUE(write_file(*a + "/f", data).ok());
    auto back = read_file(*b + "/f");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ASSERT_EQ(back->size(), data.size()) << "round " << round;
    EXPECT_TRUE(*back == data) << "round " << round;
  }
  // Shrinking is seen as well.
  ASSERT_TRUE(write_file(*a + "/f", "short").ok());
  EXPECT_EQ(*read_file(*b + "/f"), "short");
  // A new name created in A opens in B.
  ASSERT_TRUE(write_file(*a + "/new", "hello").ok());
  EXPECT_EQ(*read_file(*b + "/new"), "hello");
  // And writes from B come back to A.
  ASSERT_TRUE(write_file(*b + "/fromb", "from b").ok());
  EXPECT_EQ(*read_file(*a + "/fromb"), "from b");
}

TEST(TwoMounts, WriteOnlyAppendsLandAfterTheOtherMountsData) {
  // Each mount appends in turn through a write-only O_APPEND descriptor;
  // every append must land at the end the other mount left, though this
  // mount's kernel last saw a shorter file.
  ClusterConfig cfg;
  cfg.stripe_size = 64 * 1024;
  cfg.stripe_count = 3;
  auto c = LocalCluster::Start(cfg);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto a = (*c)->mount("a");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = (*c)->mount("b");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  std::string expect;
  for (int i = 0; i < 8; ++i) {
    const std::string& m = (i % 2 == 0) ? *a : *b;
    int fd = ::open((m + "/log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ASSERT_GE(fd, 0) << strerror(errno);
    std::string rec = "record " + std::to_string(i) + " " + random_bytes(5000 + i * 70001, i);
    ASSERT_EQ(::write(fd, rec.data(), rec.size()), static_cast<ssize_t>(rec.size()));
    ASSERT_EQ(::close(fd), 0);
    expect += rec;
  }
  for (const std::string* m : {&*a, &*b}) {
    auto back = read_file(*m + "/log");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ASSERT_EQ(back->size(), expect.size()) << *m;
    EXPECT_TRUE(*back == expect) << *m;
  }
}

}  // namespace
}  // namespace surge::test
