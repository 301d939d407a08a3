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

// One cluster (64 KiB stripes over 3 targets) mounted twice, at a and b.
class TwoMounts : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = LocalCluster::Start(small_stripes());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    auto a = cluster_->mount("a");
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    auto b = cluster_->mount("b");
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    a_ = *a;
    b_ = *b;
  }
  std::unique_ptr<LocalCluster> cluster_;
  std::string a_, b_;
};

TEST_F(TwoMounts, CloseToOpen) {
  // B looks first, so it has the (empty) file in its caches.
  ASSERT_TRUE(write_file(a_ + "/f", "v1").ok());
  EXPECT_EQ(*read_file(b_ + "/f"), "v1");
  for (int round = 2; round <= 6; ++round) {
    // A rewrites it bigger each time and closes; B opens and must see it all.
    std::string data = random_bytes(static_cast<size_t>(round) * 100000 + 3, round);
    ASSERT_TRUE(write_file(a_ + "/f", data).ok());
    auto back = read_file(b_ + "/f");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ASSERT_EQ(back->size(), data.size()) << "round " << round;
    EXPECT_TRUE(*back == data) << "round " << round;
  }
  // Shrinking is seen as well.
  ASSERT_TRUE(write_file(a_ + "/f", "short").ok());
  EXPECT_EQ(*read_file(b_ + "/f"), "short");
  // A new name created in A opens in B.
  ASSERT_TRUE(write_file(a_ + "/new", "hello").ok());
  EXPECT_EQ(*read_file(b_ + "/new"), "hello");
  // And writes from B come back to A.
  ASSERT_TRUE(write_file(b_ + "/fromb", "from b").ok());
  EXPECT_EQ(*read_file(a_ + "/fromb"), "from b");
}

TEST_F(TwoMounts, WriteOnlyAppendsLandAfterTheOtherMountsData) {
  // Each mount appends in turn through a write-only O_APPEND descriptor;
  // every append must land at the end the other mount left, though this
  // mount's kernel last saw a shorter file.
  std::string expect;
  for (int i = 0; i < 8; ++i) {
    const std::string& m = (i % 2 == 0) ? a_ : b_;
    int fd = ::open((m + "/log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ASSERT_GE(fd, 0) << strerror(errno);
    std::string rec = "record " + std::to_string(i) + " " + random_bytes(5000 + i * 70001, i);
    ASSERT_EQ(::write(fd, rec.data(), rec.size()), static_cast<ssize_t>(rec.size()));
    ASSERT_EQ(::close(fd), 0);
    expect += rec;
  }
  for (const std::string& m : {a_, b_}) {
    auto back = read_file(m + "/log");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ASSERT_EQ(back->size(), expect.size()) << m;
    EXPECT_TRUE(*back == expect) << m;
  }
}

}  // namespace
}  // namespace surge::test
