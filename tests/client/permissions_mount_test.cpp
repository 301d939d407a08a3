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
#include <vector>

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

TEST_F(Permissions, FtruncateOfADescriptorOpenedForWritingIgnoresTheModeSince) {
  const std::string f = dir_ + "/mode0";
  int bad = as_user([&] {
    int fd = ::open(f.c_str(), O_CREAT | O_RDWR | O_EXCL, 0);
    if (fd < 0) return 1;
    int b = 0;
    if (::ftruncate(fd, 70000) != 0) b |= 2;
    if (::pwrite(fd, "x", 1, 100) != 1) b |= 4;
    struct stat st;
    if (::fstat(fd, &st) != 0 || st.st_size != 70000) b |= 8;
    if (fails_with(::truncate(f.c_str(), 0)) != EACCES) b |= 16;  // by path: checked
    ::close(fd);
    return b;
  });
  ASSERT_NE(bad, kCannotDrop) << "cannot drop to uid/gid " << kUser;
  EXPECT_EQ(bad, 0) << "bitmask: 1 open(O_CREAT|O_RDWR, 0), 2 ftruncate, 4 pwrite, 8 size,"
                       " 16 truncate by path allowed";
}

TEST_F(Permissions, NativeTruncateThroughAFileOpenedForWriting) {
  const std::string p = "/" + name_ + "/mode0";
  auto f = client_->open(p, O_CREAT | O_RDWR | O_EXCL, 0, user_);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  SetAttr sa;
  sa.mask = kSetSize;
  sa.size = 5000;
  EXPECT_EQ(client_->setattr((*f)->ino(), sa, user_).status().to_errno(), EACCES)
      << "without the file: a truncate by inode is checked";
  sa.file = f->get();
  auto a = client_->setattr((*f)->ino(), sa, user_);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->size, 5000u);
  ASSERT_TRUE(client_->close(*f).ok());
}

// The user's own setuid/setgid files (group-executable) and root's
// world-writable one: each write or truncate by the user clears the bits.
TEST_F(Permissions, WritesAndTruncatesByTheUserClearSetuidAndSetgid) {
  const std::vector<std::string> mine = {"write", "ftruncate", "truncate", "otrunc"};
  ASSERT_EQ(as_user([&] {
              for (const auto& n : mine) {
                const std::string f = dir_ + "/" + n;
                int fd = ::open(f.c_str(), O_CREAT | O_WRONLY | O_EXCL, 0755);
                if (fd < 0 || ::write(fd, "abc", 3) != 3) return 1;
                ::close(fd);
                if (::chmod(f.c_str(), 06755) != 0) return 2;
              }
              return 0;
            }),
            0);
  const std::string roots = dir_ + "/roots";
  ASSERT_TRUE(write_file(roots, "abc").ok());
  ASSERT_EQ(::chmod(roots.c_str(), 06777), 0);
  const std::string keep = dir_ + "/setgid-no-gx";  // setgid without g+x: locking, stays
  ASSERT_TRUE(write_file(keep, "abc").ok());
  ASSERT_EQ(::chmod(keep.c_str(), 02646), 0);
  int bad = as_user([&] {
    int b = 0;
    auto wr = [](const std::string& f, int flags) {
      int fd = ::open(f.c_str(), flags);
      if (fd < 0) return false;
      bool ok = ::write(fd, "z", 1) == 1;
      return ::close(fd) == 0 && ok;
    };
    if (!wr(dir_ + "/write", O_WRONLY)) b |= 1;
    int fd = ::open((dir_ + "/ftruncate").c_str(), O_WRONLY);
    if (fd < 0 || ::ftruncate(fd, 1) != 0) b |= 2;
    ::close(fd);
    if (::truncate((dir_ + "/truncate").c_str(), 1) != 0) b |= 4;
    fd = ::open((dir_ + "/otrunc").c_str(), O_WRONLY | O_TRUNC);
    if (fd < 0) b |= 8;
    ::close(fd);
    if (!wr(roots, O_WRONLY | O_APPEND)) b |= 16;
    if (!wr(keep, O_WRONLY)) b |= 32;
    return b;
  });
  ASSERT_NE(bad, kCannotDrop) << "cannot drop to uid/gid " << kUser;
  ASSERT_EQ(bad, 0) << "a call failed (bitmask: 1 write, 2 ftruncate, 4 truncate,"
                       " 8 O_TRUNC open, 16 write of root's, 32 write of setgid-no-gx)";
  for (const auto& n : mine) {
    struct stat st;
    ASSERT_EQ(::stat((dir_ + "/" + n).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0755u) << n;
  }
  struct stat st;
  ASSERT_EQ(::stat(roots.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0777u) << "root's 06777 file written by the user";
  ASSERT_EQ(::stat(keep.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 02646u) << "setgid without group-execute";
}

TEST_F(Permissions, WritesByRootKeepSetuid) {
  const std::string f = dir_ + "/rootsuid";
  ASSERT_TRUE(write_file(f, "abc").ok());
  ASSERT_EQ(::chmod(f.c_str(), 04755), 0);
  ASSERT_TRUE(write_file(f, "abcd").ok());
  ASSERT_EQ(::truncate(f.c_str(), 1), 0);
  struct stat st;
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 04755u);
}

TEST_F(Permissions, NativeTruncateByTheOwnerClearsSetuid) {
  const std::string p = "/" + name_ + "/suid";
  auto f = client_->open(p, O_CREAT | O_RDWR | O_EXCL, 0755, user_);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE(client_->close(*f).ok());
  auto a = client_->stat(p, user_);
  ASSERT_TRUE(a.ok());
  SetAttr sa;
  sa.mask = kSetMode;
  sa.mode = 06755;
  ASSERT_TRUE(client_->setattr(a->ino, sa, user_).ok());
  ASSERT_TRUE(client_->truncate(p, 10, user_).ok());
  auto after = client_->stat(p, user_);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->mode & 07777, 0755u);
}

// libsurge writes as the user: setuid and setgid (with group-execute)
// cleared, of the user's own file and of root's world-writable one;
// setgid without group-execute kept; root's writes keep them.
TEST_F(Permissions, NativeWritesByTheUserClearSetuidAndSetgid) {
  const Caller root{0, 0, {}};
  auto write_as = [&](const std::string& p, const Caller& c) -> Status {
    SURGE_ASSIGN_OR_RETURN(auto f, client_->open(p, O_WRONLY, 0, c));
    Status st = client_->pwrite(*f, "z", 1, 0).status();
    Status cs = client_->close(f);
    return st.ok() ? cs : st;
  };
  auto make = [&](const std::string& p, const Caller& owner, uint32_t mode) -> Status {
    SURGE_ASSIGN_OR_RETURN(auto f, client_->open(p, O_CREAT | O_WRONLY | O_EXCL, 0755, owner));
    SURGE_RETURN_IF_ERROR(client_->close(f));
    SURGE_ASSIGN_OR_RETURN(Attr a, client_->stat(p, owner));
    SetAttr sa;
    sa.mask = kSetMode;
    sa.mode = mode;
    return client_->setattr(a.ino, sa, owner).status();
  };
  auto mode_of = [&](const std::string& p) -> uint32_t {
    auto a = client_->stat(p, root);
    return a.ok() ? (a->mode & 07777) : 0xffffffffu;
  };
  const std::string d = "/" + name_;
  ASSERT_TRUE(make(d + "/mine", user_, 06755).ok());
  ASSERT_TRUE(make(d + "/roots", root, 06777).ok());
  ASSERT_TRUE(make(d + "/setgid-no-gx", user_, 02646).ok());
  ASSERT_TRUE(make(d + "/by-root", root, 06755).ok());
  ASSERT_TRUE(write_as(d + "/mine", user_).ok());
  ASSERT_TRUE(write_as(d + "/roots", user_).ok());
  ASSERT_TRUE(write_as(d + "/setgid-no-gx", user_).ok());
  ASSERT_TRUE(write_as(d + "/by-root", root).ok());
  EXPECT_EQ(mode_of(d + "/mine"), 0755u);
  EXPECT_EQ(mode_of(d + "/roots"), 0777u) << "root's 06777 file written by the user";
  EXPECT_EQ(mode_of(d + "/setgid-no-gx"), 02646u) << "setgid without group-execute";
  EXPECT_EQ(mode_of(d + "/by-root"), 06755u) << "written by root";
}

}  // namespace
}  // namespace surge::test
