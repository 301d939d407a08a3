// Permissions as Linux (ext4) enforces them, for a non-root user, through a
// real FUSE mount and through libsurge against the MDS's own checks:
// search permission on every path component (also for names the kernel has
// cached), the access an open's flags ask for, FIFO and device opens,
// setuid/setgid cleared by writes and truncates, and ftruncate on a
// descriptor opened for writing whatever the mode says since.
//
// The non-root cases run in a forked child that drops to uid/gid 65534
// (nobody) with setresgid/setresuid and exits with a bitmask of failed
// checks; a child that cannot drop its ids fails the test loudly.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "tests/client/local_cluster.h"

namespace surge::test {
namespace {

constexpr uid_t kUser = 65534;  // nobody
constexpr gid_t kGroup = 65534;
constexpr int kCannotDrop = 255;

// Runs fn as kUser:kGroup in a child; its return value is the child's exit
// status (0: every check passed, else a bitmask of the failed ones).
int as_user(const std::function<int()>& fn) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(kGroup, kGroup, kGroup) != 0 ||
        setresuid(kUser, kUser, kUser) != 0 || geteuid() != kUser) {
      _exit(kCannotDrop);
    }
    _exit(fn());
  }
  int st = 0;
  if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
  return WEXITSTATUS(st);
}

// errno of a call expected to fail: 0 when it succeeded.
int fails_with(int rc) { return rc == -1 ? errno : 0; }

class Permissions : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto c = LocalCluster::Start(small_stripes());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = c->release();
    // Names and attributes stay cached for the whole suite, so what the
    // kernel serves from its caches without asking the daemon is tested.
    auto m = cluster_->mount("mnt", "entry_timeout=600,attr_timeout=600");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    mnt_ = *m;
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(cluster_, nullptr) << "cluster did not start";
    name_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = mnt_ + "/" + name_;
    ASSERT_EQ(::mkdir(dir_.c_str(), 0777), 0) << dir_ << ": " << strerror(errno);
    ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);
    auto c = cluster_->connect();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(*c);
  }
  static LocalCluster* cluster_;
  static std::string mnt_;
  std::string name_, dir_;
  std::unique_ptr<Client> client_;
  const Caller user_{kUser, kGroup, {}};
};
LocalCluster* Permissions::cluster_ = nullptr;
std::string Permissions::mnt_;

TEST_F(Permissions, NativeCreateOfAnExistingFileChecksTheAccessItsFlagsAsk) {
  // Owned by the user: one file write-only, one read-only.
  const std::string d = "/" + name_;
  for (auto [n, mode] : {std::pair{"wo", 0200u}, std::pair{"ro", 0400u}}) {
    auto f = client_->open(d + "/" + n, O_WRONLY | O_CREAT | O_EXCL, mode, user_);
    ASSERT_TRUE(f.ok()) << n << ": " << f.status().ToString();
    ASSERT_TRUE(client_->close(*f).ok());
  }
  auto wo = client_->open(d + "/wo", O_WRONLY | O_CREAT, 0644, user_);
  EXPECT_TRUE(wo.ok()) << "O_WRONLY|O_CREAT of a 0200 file: " << wo.status().ToString();
  if (wo.ok()) {
    EXPECT_TRUE(client_->close(*wo).ok());
  }
  auto wo_read = client_->open(d + "/wo", O_RDONLY | O_CREAT, 0644, user_);
  EXPECT_EQ(wo_read.status().to_errno(), EACCES) << "O_RDONLY|O_CREAT of a 0200 file";
  auto ro_write = client_->open(d + "/ro", O_WRONLY | O_CREAT, 0644, user_);
  EXPECT_EQ(ro_write.status().to_errno(), EACCES) << "O_WRONLY|O_CREAT of a 0400 file";
  auto ro = client_->open(d + "/ro", O_RDONLY | O_CREAT, 0644, user_);
  EXPECT_TRUE(ro.ok()) << "O_RDONLY|O_CREAT of a 0400 file: " << ro.status().ToString();
  if (ro.ok()) {
    EXPECT_TRUE(client_->close(*ro).ok());
  }
}

// A directory `locked` whose x bit root removes after the user has looked
// up (and the kernel cached) the names beneath it.
TEST_F(Permissions, NoSearchPermissionStopsEveryCallOnCachedNamesBeneath) {
  const std::string locked = dir_ + "/locked", f = locked + "/f";
  ASSERT_EQ(::mkdir(locked.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(locked.c_str(), 0777), 0);
  ASSERT_EQ(as_user([&] {
              int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0666);
              if (fd < 0) return 1;
              ::close(fd);
              struct stat st;
              return ::stat(f.c_str(), &st) == 0 ? 0 : 2;  // the name is cached now
            }),
            0);
  struct stat before;
  ASSERT_EQ(::stat(f.c_str(), &before), 0);
  ASSERT_EQ(::chmod(locked.c_str(), 0666), 0) << strerror(errno);
  int bad = as_user([&] {
    int b = 0;
    if (fails_with(::chmod(f.c_str(), 0777)) != EACCES) b |= 1;
    if (fails_with(::chown(f.c_str(), kUser, kGroup)) != EACCES) b |= 2;
    if (fails_with(::truncate(f.c_str(), 0)) != EACCES) b |= 4;
    if (fails_with(::open(f.c_str(), O_RDONLY)) != EACCES) b |= 8;
    if (fails_with(::link(f.c_str(), (dir_ + "/lnk").c_str())) != EACCES) b |= 16;
    struct stat st;
    if (fails_with(::stat(f.c_str(), &st)) != EACCES) b |= 32;
    return b;
  });
  ASSERT_NE(bad, kCannotDrop) << "cannot drop to uid/gid " << kUser;
  EXPECT_EQ(bad, 0) << "succeeded beneath a directory without x (bitmask: 1 chmod, 2 chown,"
                       " 4 truncate, 8 open, 16 link, 32 stat)";
  struct stat st;
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode, before.st_mode) << "the file changed anyway";
  EXPECT_EQ(st.st_nlink, 1u) << "the file was linked anyway";
}

TEST_F(Permissions, NativeNoSearchPermissionStopsPathCallsBeneath) {
  const std::string d = "/" + name_;
  ASSERT_TRUE(client_->mkdir(d + "/locked", 0777, user_).ok());
  auto f = client_->open(d + "/locked/f", O_WRONLY | O_CREAT | O_EXCL, 0666, user_);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE(client_->close(*f).ok());
  auto locked = client_->stat(d + "/locked", user_);
  ASSERT_TRUE(locked.ok());
  SetAttr sa;
  sa.mask = kSetMode;
  sa.mode = 0666;
  ASSERT_TRUE(client_->setattr(locked->ino, sa, user_).ok());
  EXPECT_EQ(client_->open(d + "/locked/f", O_RDONLY, 0, user_).status().to_errno(), EACCES);
  EXPECT_EQ(client_->truncate(d + "/locked/f", 0, user_).to_errno(), EACCES);
  EXPECT_EQ(client_->link(d + "/locked/f", d + "/lnk", user_).to_errno(), EACCES);
  EXPECT_EQ(client_->stat(d + "/locked/f", user_).status().to_errno(), EACCES);
}

// FIFOs and device nodes are opened by the kernel without asking the
// daemon: their mode must stop the user all the same.
TEST_F(Permissions, FifoAndDeviceOpensAreDeniedByMode) {
  const std::string fifo = dir_ + "/fifo", dev = dir_ + "/null";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << strerror(errno);
  ASSERT_EQ(::mknod(dev.c_str(), S_IFCHR | 0600, makedev(1, 3)), 0) << strerror(errno);
  int bad = as_user([&] {
    int b = 0;
    if (fails_with(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK)) != EACCES) b |= 1;
    if (fails_with(::open(dev.c_str(), O_WRONLY)) != EACCES) b |= 2;
    if (fails_with(::open(dev.c_str(), O_RDONLY)) != EACCES) b |= 4;
    return b;
  });
  ASSERT_NE(bad, kCannotDrop) << "cannot drop to uid/gid " << kUser;
  EXPECT_EQ(bad, 0) << "opened a 0600 node of root's (bitmask: 1 fifo, 2 device for writing,"
                       " 4 device for reading)";
}

}  // namespace
}  // namespace surge::test
