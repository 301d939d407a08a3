// Times set on a file survive the size reports of the writes before them,
// through a real FUSE mount and through libsurge: a futimens on an open file
// after writing it, tar -x and cp -p all keep the mtime they set. A size
// report (on close, or the periodic one) must never move it afterwards.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/client/local_cluster.h"

namespace surge::test {
namespace {

// Past the client's size_report_interval (1 s) and its close-time report.
void wait_past_size_reports() { std::this_thread::sleep_for(std::chrono::milliseconds(2500)); }

class TimesMount : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto c = LocalCluster::Start(small_stripes());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = c->release();
    auto m = cluster_->mount("mnt");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    mnt_ = *m;
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(cluster_, nullptr) << "cluster did not start";
    dir_ = mnt_ + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(::mkdir(dir_.c_str(), 0755), 0) << dir_ << ": " << strerror(errno);
  }
  static LocalCluster* cluster_;
  static std::string mnt_;
  std::string dir_;
};
LocalCluster* TimesMount::cluster_ = nullptr;
std::string TimesMount::mnt_;

TEST_F(TimesMount, FutimensAfterWritingSurvivesCloseAndSizeReports) {
  std::string p = dir_ + "/f";
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0) << strerror(errno);
  std::string data = random_bytes(300000, 5);
  ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  const timespec times[2] = {{1000000000, 111}, {1000000001, 222222222}};
  ASSERT_EQ(::futimens(fd, times), 0) << strerror(errno);
  ASSERT_EQ(::close(fd), 0);
  wait_past_size_reports();
  struct stat st;
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, static_cast<off_t>(data.size()));
  EXPECT_EQ(st.st_mtim.tv_sec, 1000000001);
  EXPECT_EQ(st.st_mtim.tv_nsec, 222222222);
  EXPECT_EQ(st.st_atim.tv_sec, 1000000000);
}

TEST_F(TimesMount, TarExtractAndCpPreserveKeepEveryMtime) {
  std::string local = cluster_->dir() + "/" + ::testing::UnitTest::GetInstance()
                                                  ->current_test_info()->name();
  std::string out;
  // Files of several sizes (one crossing stripes) with times in the past.
  ASSERT_EQ(sh("mkdir -p " + local + "/sub && cd " + local +
                   " && head -c 200000 /dev/urandom > big && echo a > a && echo b > sub/b"
                   " && touch -d '2001-02-03 04:05:06.789' big a sub/b"
                   " && tar -cf ../times.tar big a sub 2>&1",
               &out),
            0)
      << out;
  ASSERT_EQ(sh("mkdir " + dir_ + "/tar && tar -C " + dir_ + "/tar -xf " + local +
                   "/../times.tar 2>&1 && cp -p " + local + "/big " + dir_ + "/cp-big 2>&1",
               &out),
            0)
      << out;
  wait_past_size_reports();
  for (const std::string& f : {dir_ + "/tar/big", dir_ + "/tar/a", dir_ + "/tar/sub/b",
                               dir_ + "/cp-big"}) {
    struct stat st;
    ASSERT_EQ(::stat(f.c_str(), &st), 0) << f;
    // 2001-02-03 04:05:06 in the local zone tar and touch used.
    struct stat want;
    ASSERT_EQ(::stat((local + "/big").c_str(), &want), 0);
    EXPECT_EQ(st.st_mtim.tv_sec, want.st_mtim.tv_sec) << f;
  }
}

TEST_F(TimesMount, NativeClientTimesSetAfterWritesSurviveClose) {
  auto c = cluster_->connect();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto f = (*c)->open("/native-times", O_RDWR | O_CREAT, 0644);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  std::string data = random_bytes(100000, 9);
  ASSERT_TRUE((*c)->pwrite(**f, data.data(), data.size(), 0).ok());
  SetAttr sa;
  sa.mask = kSetMtime;
  sa.mtime = {1000000000, 5};
  ASSERT_TRUE((*c)->setattr((*f)->ino(), sa, Caller{}).ok());
  ASSERT_TRUE((*c)->close(*f).ok());
  wait_past_size_reports();
  auto a = (*c)->stat("/native-times");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->size, data.size());
  EXPECT_EQ(a->mtime.sec, 1000000000);
  EXPECT_EQ(a->mtime.nsec, 5u);
}

}  // namespace
}  // namespace surge::test
