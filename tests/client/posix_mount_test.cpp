// POSIX behaviour through a real FUSE mount of a real cluster (1 MDS, 3 ODS
// on 127.0.0.1), with a 64 KiB stripe over 3 targets so that ordinary file
// sizes cross many stripe and object boundaries. One cluster and one mount
// serve the whole suite; each test works in its own directory.
#include <dirent.h>
#include <grp.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <set>
#include <thread>
#include <vector>

#include "common/crc32c.h"
#include "tests/client/local_cluster.h"

namespace surge::test {
namespace {

namespace fs = std::filesystem;
constexpr uint32_t kStripe = kSmallStripe;

class PosixMount : public ::testing::Test {
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
LocalCluster* PosixMount::cluster_ = nullptr;
std::string PosixMount::mnt_;

TEST_F(PosixMount, FilesAroundEveryBoundaryReadBackExactly) {
  const uint64_t S = kStripe, R = 3 * kStripe;
  std::vector<uint64_t> sizes = {0,     1,     4095,  4096,       4097,      S - 1,
                                 S,     S + 1, 2 * S, R - 1,      R,         R + 1,
                                 2 * R + 4097, (1 << 20) - 1, 1 << 20, (1 << 20) + 1,
                                 (3 << 20) + 5};
  for (uint64_t n : sizes) {
    std::string path = dir_ + "/f" + std::to_string(n);
    std::string data = random_bytes(n, n);
    ASSERT_TRUE(write_file(path, data).ok()) << path;
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), n) << path;
    auto back = read_file(path);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ASSERT_EQ(back->size(), n) << path;
    EXPECT_EQ(crc32c(back->data(), n), crc32c(data.data(), n)) << path;
    EXPECT_TRUE(*back == data) << path;
  }
}

TEST_F(PosixMount, UnalignedWritesAndReadsAcrossStripes) {
  std::string path = dir_ + "/u";
  std::string data = random_bytes(5 * kStripe + 333, 7);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  // Odd-sized chunks at odd offsets, written out of order.
  size_t chunk = 10007;
  for (size_t off = 0; off < data.size(); off += 2 * chunk) {
    size_t n = std::min(chunk, data.size() - off);
    ASSERT_EQ(pwrite(fd, data.data() + off, n, static_cast<off_t>(off)), static_cast<ssize_t>(n));
  }
  for (size_t off = chunk; off < data.size(); off += 2 * chunk) {
    size_t n = std::min(chunk, data.size() - off);
    ASSERT_EQ(pwrite(fd, data.data() + off, n, static_cast<off_t>(off)), static_cast<ssize_t>(n));
  }
  std::string buf(kStripe + 17, '\0');
  for (size_t off = 5; off < data.size(); off += buf.size()) {
    ssize_t n = pread(fd, buf.data(), buf.size(), static_cast<off_t>(off));
    ASSERT_EQ(n, static_cast<ssize_t>(std::min(buf.size(), data.size() - off)));
    ASSERT_EQ(0, memcmp(buf.data(), data.data() + off, static_cast<size_t>(n))) << off;
  }
  EXPECT_EQ(pread(fd, buf.data(), buf.size(), static_cast<off_t>(data.size())), 0);
  close(fd);
}

TEST_F(PosixMount, OverlappingRewritesReadBackAsLastWritten) {
  // Each FUSE write's bytes go out from its request buffer after the kernel
  // has been answered; the file must still read back as the last writes
  // left it (unaligned sizes, every write overlapping earlier ones).
  std::string path = dir_ + "/rewrites";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0) << strerror(errno);
  std::string expect;
  for (int i = 0; i < 48; ++i) {
    std::string d = random_bytes((1 << 20) - i * 4099, 77 + i);
    off_t off = (i % 6) * 300007;
    ASSERT_EQ(::pwrite(fd, d.data(), d.size(), off), static_cast<ssize_t>(d.size()));
    if (expect.size() < off + d.size()) expect.resize(off + d.size());
    memcpy(&expect[off], d.data(), d.size());
  }
  ASSERT_EQ(::close(fd), 0);
  auto back = read_file(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), expect.size());
  EXPECT_TRUE(*back == expect);
}

TEST_F(PosixMount, SparseFileHolesReadAsZeros) {
  std::string path = dir_ + "/sparse";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  const off_t far = 7 * kStripe + 123;
  ASSERT_EQ(pwrite(fd, "xyz", 3, far), 3);
  ASSERT_EQ(pwrite(fd, "a", 1, 10), 1);
  close(fd);
  auto back = read_file(path);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), static_cast<size_t>(far + 3));
  std::string expect(static_cast<size_t>(far + 3), '\0');
  expect[10] = 'a';
  memcpy(&expect[static_cast<size_t>(far)], "xyz", 3);
  EXPECT_TRUE(*back == expect);
}

TEST_F(PosixMount, TruncateDownAndUp) {
  std::string path = dir_ + "/t";
  std::string data = random_bytes(3 * kStripe + 100, 3);
  ASSERT_TRUE(write_file(path, data).ok());
  ASSERT_EQ(::truncate(path.c_str(), kStripe + 10), 0);
  auto a = read_file(path);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(*a == data.substr(0, kStripe + 10));
  ASSERT_EQ(::truncate(path.c_str(), 4 * kStripe), 0);
  auto b = read_file(path);
  ASSERT_TRUE(b.ok());
  std::string expect = data.substr(0, kStripe + 10);
  expect.resize(4 * kStripe, '\0');  // the cut bytes must not come back
  EXPECT_TRUE(*b == expect);
  // O_TRUNC on open empties it.
  int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
  ASSERT_GE(fd, 0);
  close(fd);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0);
}

TEST_F(PosixMount, AppendAddsAtTheEnd) {
  std::string path = dir_ + "/log";
  std::string expect;
  for (int i = 0; i < 20; ++i) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ASSERT_GE(fd, 0);
    std::string line = "line " + std::to_string(i) + " " + random_bytes(i * 1000, i);
    ASSERT_EQ(::write(fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
    expect += line;
    close(fd);
  }
  auto back = read_file(path);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == expect);
}

TEST_F(PosixMount, ExclusiveCreateFailsOnExistingName) {
  std::string path = dir_ + "/x";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  ASSERT_GE(fd, 0);
  close(fd);
  EXPECT_EQ(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644), -1);
  EXPECT_EQ(errno, EEXIST);
}

TEST_F(PosixMount, ManyFiles) {
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(write_file(dir_ + "/m" + std::to_string(i), "content " + std::to_string(i)).ok());
  }
  for (int i = 0; i < 300; ++i) {
    auto b = read_file(dir_ + "/m" + std::to_string(i));
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(*b, "content " + std::to_string(i));
  }
}

TEST_F(PosixMount, DirectoryOfTenThousandEntriesListsCompletely) {
  // Created through libsurge (4 threads) to keep the test fast; listed
  // through the mount, which is what is under test.
  auto c = cluster_->connect();
  ASSERT_TRUE(c.ok());
  auto d = (*c)->stat(dir_.substr(mnt_.size()));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  constexpr int kN = 10000;
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      for (int i = t; i < kN; i += 4) {
        auto a = (*c)->mknod(d->ino, "e" + std::to_string(i), S_IFREG | 0644, 0, Caller{});
        if (!a.ok()) failures++;
      }
    });
  }
  for (auto& t : ts) t.join();
  ASSERT_EQ(failures.load(), 0);
  DIR* dp = opendir(dir_.c_str());
  ASSERT_NE(dp, nullptr);
  std::set<std::string> names;
  int dots = 0;
  while (dirent* e = readdir(dp)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") {
      dots++;
      continue;
    }
    EXPECT_TRUE(names.insert(n).second) << "listed twice: " << n;
  }
  closedir(dp);
  EXPECT_EQ(dots, 2);
  ASSERT_EQ(names.size(), static_cast<size_t>(kN));
  for (int i = 0; i < kN; ++i) EXPECT_TRUE(names.count("e" + std::to_string(i))) << i;
  std::string out;
  ASSERT_EQ(sh("rm -rf " + dir_ + " 2>&1", &out), 0) << out;
}

TEST_F(PosixMount, ConcurrentWritersToDisjointRanges) {
  std::string path = dir_ + "/shared";
  constexpr int kWriters = 4;
  const size_t kRange = (1 << 20) + 37;  // not stripe aligned on purpose
  std::vector<std::string> parts;
  for (int i = 0; i < kWriters; ++i) parts.push_back(random_bytes(kRange, 100 + i));
  int fd0 = ::open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd0, 0);
  close(fd0);
  std::vector<std::thread> ts;
  std::atomic<int> errors{0};
  for (int i = 0; i < kWriters; ++i) {
    ts.emplace_back([&, i] {
      int fd = ::open(path.c_str(), O_WRONLY);
      if (fd < 0) {
        errors++;
        return;
      }
      for (size_t off = 0; off < kRange; off += 100000) {
        size_t n = std::min<size_t>(100000, kRange - off);
        if (pwrite(fd, parts[i].data() + off, n, static_cast<off_t>(i * kRange + off)) !=
            static_cast<ssize_t>(n)) {
          errors++;
        }
      }
      if (close(fd) != 0) errors++;
    });
  }
  for (auto& t : ts) t.join();
  ASSERT_EQ(errors.load(), 0);
  auto back = read_file(path);
  ASSERT_TRUE(back.ok());
  std::string expect;
  for (auto& p : parts) expect += p;
  ASSERT_EQ(back->size(), expect.size());
  EXPECT_TRUE(*back == expect);
}

TEST_F(PosixMount, RenameCases) {
  std::string a = dir_ + "/a", b = dir_ + "/b", d1 = dir_ + "/d1", d2 = dir_ + "/d2";
  ASSERT_TRUE(write_file(a, "AAA").ok());
  ASSERT_TRUE(write_file(b, "BBB").ok());
  // file over file
  ASSERT_EQ(::rename(a.c_str(), b.c_str()), 0);
  EXPECT_EQ(*read_file(b), "AAA");
  EXPECT_NE(::access(a.c_str(), F_OK), 0);
  // across directories
  ASSERT_EQ(::mkdir(d1.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(d2.c_str(), 0755), 0);
  ASSERT_EQ(::rename(b.c_str(), (d1 + "/moved").c_str()), 0);
  EXPECT_EQ(*read_file(d1 + "/moved"), "AAA");
  // dir over non-empty dir
  ASSERT_TRUE(write_file(d2 + "/x", "x").ok());
  EXPECT_EQ(::rename(d1.c_str(), d2.c_str()), -1);
  EXPECT_TRUE(errno == ENOTEMPTY || errno == EEXIST) << strerror(errno);
  // dir into its own subtree
  ASSERT_EQ(::mkdir((d1 + "/sub").c_str(), 0755), 0);
  EXPECT_EQ(::rename(d1.c_str(), (d1 + "/sub/d1").c_str()), -1);
  EXPECT_EQ(errno, EINVAL);
  // noreplace and exchange
  ASSERT_TRUE(write_file(a, "new a").ok());
  EXPECT_EQ(renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, (d1 + "/moved").c_str(), RENAME_NOREPLACE),
            -1);
  EXPECT_EQ(errno, EEXIST);
  ASSERT_EQ(renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, (d1 + "/moved").c_str(), RENAME_EXCHANGE),
            0);
  EXPECT_EQ(*read_file(a), "AAA");
  EXPECT_EQ(*read_file(d1 + "/moved"), "new a");
  // dir over empty dir
  ASSERT_EQ(::mkdir((dir_ + "/empty").c_str(), 0755), 0);
  ASSERT_EQ(::rename(d1.c_str(), (dir_ + "/empty").c_str()), 0);
  EXPECT_EQ(*read_file(dir_ + "/empty/moved"), "new a");
}

TEST_F(PosixMount, HardLinksShareDataAndCountLinks) {
  std::string a = dir_ + "/orig", b = dir_ + "/link";
  ASSERT_TRUE(write_file(a, "shared bytes").ok());
  ASSERT_EQ(::link(a.c_str(), b.c_str()), 0);
  struct stat sa, sb;
  ASSERT_EQ(::stat(a.c_str(), &sa), 0);
  ASSERT_EQ(::stat(b.c_str(), &sb), 0);
  EXPECT_EQ(sa.st_ino, sb.st_ino);
  EXPECT_EQ(sb.st_nlink, 2u);
  ASSERT_EQ(::unlink(a.c_str()), 0);
  ASSERT_EQ(::stat(b.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_nlink, 1u);
  EXPECT_EQ(*read_file(b), "shared bytes");
}

TEST_F(PosixMount, Symlinks) {
  std::string t = dir_ + "/target", l = dir_ + "/sl";
  ASSERT_TRUE(write_file(t, "through the link").ok());
  ASSERT_EQ(::symlink("target", l.c_str()), 0);
  char buf[256];
  ssize_t n = ::readlink(l.c_str(), buf, sizeof(buf));
  ASSERT_EQ(n, 6);
  EXPECT_EQ(std::string(buf, 6), "target");
  struct stat st;
  ASSERT_EQ(::lstat(l.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(*read_file(l), "through the link");
  ASSERT_EQ(::symlink("/nonexistent/x", (dir_ + "/dangling").c_str()), 0);
  EXPECT_EQ(::open((dir_ + "/dangling").c_str(), O_RDONLY), -1);
  EXPECT_EQ(errno, ENOENT);
}

TEST_F(PosixMount, UnlinkWhileOpenKeepsDataUntilCloseThenReclaims) {
  // The data servers' files: format 1 objects are named by inode, chained
  // chunks (the shipped default_replicas 2) by an id of the chunk index, so
  // count every object file, once the orphans of the suite's earlier tests
  // are collected (the count holds still for 1 s; the collector runs every
  // 200 ms).
  auto count_objects = [&] {
    std::string out;
    sh("find " + cluster_->dir() + "/ods0 " + cluster_->dir() + "/ods1 " + cluster_->dir() +
           "/ods2 -name '*.dat' | wc -l",
       &out);
    return std::atoi(out.c_str());
  };
  int base = count_objects();
  for (int still = 0, i = 0; still < 10 && i < 300; ++i) {
    usleep(100000);
    const int n = count_objects();
    still = n == base ? still + 1 : 0;
    base = n;
  }
  std::string path = dir_ + "/ghost";
  std::string data = random_bytes(4 * kStripe, 9);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ASSERT_EQ(fsync(fd), 0);
  struct stat st;
  ASSERT_EQ(fstat(fd, &st), 0);
  // 4 stripes over 3 slots, one chunk per slot, 2 replicas: 6 objects.
  ASSERT_EQ(count_objects(), base + 6);
  ASSERT_EQ(::unlink(path.c_str()), 0);
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
  std::string back(data.size(), '\0');
  ASSERT_EQ(pread(fd, back.data(), back.size(), 0), static_cast<ssize_t>(data.size()));
  EXPECT_TRUE(back == data);
  EXPECT_EQ(count_objects(), base + 6) << "objects removed while the file is still open";
  ASSERT_EQ(close(fd), 0);
  // The orphan collector removes the objects once nobody holds the file
  // (at most base: a release of an earlier test's file can still be on
  // its way from the kernel, and its objects go too).
  int left = -1;
  for (int i = 0; i < 300 && left > base; ++i) {
    left = count_objects();
    if (left > base) usleep(100000);
  }
  EXPECT_LE(left, base) << "objects of unlinked inode " << st.st_ino << " not reclaimed in 30 s";
}

TEST_F(PosixMount, PermissionsForNonRootUser) {
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  ASSERT_TRUE(write_file(dir_ + "/secret", "s").ok());
  ASSERT_EQ(::chmod((dir_ + "/secret").c_str(), 0600), 0);
  ASSERT_TRUE(write_file(dir_ + "/public", "p").ok());
  ASSERT_EQ(::chmod((dir_ + "/public").c_str(), 0644), 0);
  ASSERT_EQ(::mkdir((dir_ + "/open").c_str(), 0777), 0);
  ASSERT_EQ(::chmod((dir_ + "/open").c_str(), 0777), 0);
  struct passwd* nobody = getpwnam("nobody");
  ASSERT_NE(nobody, nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(nobody->pw_gid) != 0 ||
        setuid(nobody->pw_uid) != 0) {
      _exit(100);
    }
    int bad = 0;
    if (::open((dir_ + "/secret").c_str(), O_RDONLY) != -1 || errno != EACCES) bad |= 1;
    int fd = ::open((dir_ + "/public").c_str(), O_RDONLY);
    if (fd < 0) bad |= 2;
    if (::open((dir_ + "/public").c_str(), O_WRONLY) != -1 || errno != EACCES) bad |= 4;
    if (::open((dir_ + "/new").c_str(), O_WRONLY | O_CREAT, 0644) != -1 || errno != EACCES) {
      bad |= 8;
    }
    fd = ::open((dir_ + "/open/mine").c_str(), O_WRONLY | O_CREAT, 0644);
    if (fd < 0) bad |= 16;
    if (::chmod((dir_ + "/public").c_str(), 0777) != -1 || errno != EPERM) bad |= 32;
    if (::open((dir_ + "/public").c_str(), O_WRONLY | O_CREAT, 0644) != -1 || errno != EACCES) {
      bad |= 64;
    }
    _exit(bad);
  }
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "failed checks bitmask (1 secret readable, 2 public unreadable,"
                                   " 4 public writable, 8 create in 0755 dir, 16 create in 0777"
                                   " dir failed, 32 chmod of others' file, 64 O_CREAT opened others' file for writing)";
  struct stat sb;
  ASSERT_EQ(::stat((dir_ + "/open/mine").c_str(), &sb), 0);
  EXPECT_EQ(sb.st_uid, nobody->pw_uid);
}

TEST_F(PosixMount, Xattrs) {
  std::string p = dir_ + "/x";
  ASSERT_TRUE(write_file(p, "x").ok());
  ASSERT_EQ(setxattr(p.c_str(), "user.color", "blue", 4, 0), 0);
  char buf[64];
  ASSERT_EQ(getxattr(p.c_str(), "user.color", buf, sizeof(buf)), 4);
  EXPECT_EQ(std::string(buf, 4), "blue");
  EXPECT_EQ(getxattr(p.c_str(), "user.color", nullptr, 0), 4);
  EXPECT_EQ(setxattr(p.c_str(), "user.color", "red", 3, XATTR_CREATE), -1);
  EXPECT_EQ(errno, EEXIST);
  EXPECT_EQ(setxattr(p.c_str(), "user.none", "red", 3, XATTR_REPLACE), -1);
  EXPECT_EQ(errno, ENODATA);
  ASSERT_EQ(setxattr(p.c_str(), "user.size", "1", 1, 0), 0);
  ssize_t n = listxattr(p.c_str(), buf, sizeof(buf));
  ASSERT_GT(n, 0);
  std::set<std::string> names;
  for (ssize_t i = 0; i < n; i += static_cast<ssize_t>(strlen(buf + i)) + 1) names.insert(buf + i);
  EXPECT_EQ(names, (std::set<std::string>{"user.color", "user.size"}));
  ASSERT_EQ(removexattr(p.c_str(), "user.color"), 0);
  EXPECT_EQ(getxattr(p.c_str(), "user.color", buf, sizeof(buf)), -1);
  EXPECT_EQ(errno, ENODATA);
}

TEST_F(PosixMount, DeepTreeMkdirPAndRmRf) {
  std::string deep = dir_;
  for (int i = 0; i < 40; ++i) deep += "/level" + std::to_string(i);
  std::string out;
  ASSERT_EQ(sh("mkdir -p " + deep + " 2>&1", &out), 0) << out;
  ASSERT_TRUE(write_file(deep + "/leaf", "leaf").ok());
  EXPECT_EQ(*read_file(deep + "/leaf"), "leaf");
  ASSERT_EQ(sh("rm -rf " + dir_ + "/level0 2>&1", &out), 0) << out;
  EXPECT_NE(::access((dir_ + "/level0").c_str(), F_OK), 0);
  EXPECT_EQ(::rmdir(dir_.c_str()), 0) << strerror(errno);
}

TEST_F(PosixMount, CpAndTarRoundTripOfASourceTree) {
  const char* src = std::getenv("SURGE_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "SURGE_SOURCE_DIR not set";
  std::string local = cluster_->dir() + "/tree";
  std::string out;
  // A real source tree with symlinks, modes and an empty dir.
  ASSERT_EQ(sh("mkdir -p " + local + " && cp -a " + std::string(src) + "/common " +
                   std::string(src) + "/client " + local + "/ && ln -s common/status.h " + local +
                   "/link && mkdir " + local + "/emptydir && chmod 0750 " + local +
                   "/emptydir 2>&1",
               &out),
            0)
      << out;
  ASSERT_EQ(sh("cp -a " + local + " " + dir_ + "/cp 2>&1", &out), 0) << out;
  EXPECT_EQ(sh("diff -r --no-dereference " + local + " " + dir_ + "/cp 2>&1", &out), 0) << out;
  ASSERT_EQ(sh("mkdir " + dir_ + "/tar && tar -C " + local + " -cf - . | tar -C " + dir_ +
                   "/tar -xf - 2>&1",
               &out),
            0)
      << out;
  EXPECT_EQ(sh("diff -r --no-dereference " + local + " " + dir_ + "/tar 2>&1", &out), 0) << out;
  std::string back = cluster_->dir() + "/back";
  ASSERT_EQ(sh("mkdir " + back + " && tar -C " + dir_ + "/tar -cf - . | tar -C " + back +
                   " -xf - 2>&1",
               &out),
            0)
      << out;
  EXPECT_EQ(sh("diff -r --no-dereference " + local + " " + back + " 2>&1", &out), 0) << out;
  // Modes survive too.
  EXPECT_EQ(sh("test \"$(stat -c %a " + dir_ + "/cp/emptydir)\" = 750"), 0);
}

TEST_F(PosixMount, DdAndCmp) {
  std::string local = cluster_->dir() + "/dd.bin";
  std::string out;
  ASSERT_EQ(sh("dd if=/dev/urandom of=" + local + " bs=1M count=9 status=none 2>&1", &out), 0)
      << out;
  ASSERT_EQ(sh("dd if=" + local + " of=" + dir_ + "/dd.bin bs=1M conv=fsync status=none 2>&1",
               &out),
            0)
      << out;
  EXPECT_EQ(sh("cmp " + local + " " + dir_ + "/dd.bin 2>&1", &out), 0) << out;
}

TEST_F(PosixMount, MmapThroughThePageCache) {
  std::string path = dir_ + "/mapped";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  const size_t len = 2 * kStripe + 4096;
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(len)), 0);
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(p, MAP_FAILED) << strerror(errno);
  std::string data = random_bytes(len, 11);
  memcpy(p, data.data(), len);
  ASSERT_EQ(msync(p, len, MS_SYNC), 0);
  munmap(p, len);
  close(fd);
  auto back = read_file(path);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == data);
  // And reading through a mapping.
  fd = ::open(path.c_str(), O_RDONLY);
  p = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_EQ(memcmp(p, data.data(), len), 0);
  munmap(p, len);
  close(fd);
}

TEST_F(PosixMount, WriteOnlyDescriptorsStayCoherentWithCachedOnes) {
  // Write-only opens bypass the page cache (wronly_direct); what they
  // write is still what a cached (read-only) descriptor and a shared
  // mapping of the same file see next.
  std::string path = dir_ + "/mixed";
  const size_t len = 3 * kStripe + 100;
  ASSERT_TRUE(write_file(path, std::string(len, 'a')).ok());
  int rw = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(rw, 0);
  std::string got(len, '\0');
  ASSERT_EQ(::pread(rw, got.data(), len, 0), static_cast<ssize_t>(len));  // now cached
  void* p = mmap(nullptr, len, PROT_READ, MAP_SHARED, rw, 0);
  ASSERT_NE(p, MAP_FAILED) << strerror(errno);
  std::string fresh = random_bytes(len - 1000, 5);
  int wo = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(wo, 0);
  ASSERT_EQ(::pwrite(wo, fresh.data(), fresh.size(), 500), static_cast<ssize_t>(fresh.size()));
  ASSERT_EQ(close(wo), 0);
  std::string expect(len, 'a');
  memcpy(&expect[500], fresh.data(), fresh.size());
  ASSERT_EQ(::pread(rw, got.data(), len, 0), static_cast<ssize_t>(len));
  EXPECT_TRUE(got == expect) << "read through the cached descriptor";
  EXPECT_EQ(memcmp(p, expect.data(), len), 0) << "read through the shared mapping";
  munmap(p, len);
  close(rw);
}

// How many of the first `len` bytes' pages of the file mapped at p the
// page cache holds (mincore asks the cache; it faults nothing in).
size_t cached_pages(void* p, size_t len) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((len + page - 1) / page);
  if (mincore(p, len, v.data()) != 0) return SIZE_MAX;
  size_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return n;
}

TEST_F(PosixMount, ReadWriteOpensBypassThePageCacheAndStillMap) {
  // On this kernel (FUSE_DIRECT_IO_ALLOW_MMAP, Linux 6.6+) read-write opens
  // are direct (rdwr_direct): their writes leave no pages in the cache, and
  // a shared mapping of the same descriptor still works both ways.
  std::string path = dir_ + "/rw-direct";
  const size_t len = 2 * kStripe + 8192;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  std::string data = random_bytes(len, 21);
  ASSERT_EQ(::pwrite(fd, data.data(), len, 0), static_cast<ssize_t>(len));
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(p, MAP_FAILED) << strerror(errno);
  EXPECT_EQ(cached_pages(p, len), 0u) << "the write went through the page cache";
  EXPECT_EQ(memcmp(p, data.data(), len), 0) << "the mapping reads what was written";
  memcpy(static_cast<char*>(p) + 100, "MAPPED", 6);
  ASSERT_EQ(msync(p, len, MS_SYNC), 0);
  char got[6];
  ASSERT_EQ(::pread(fd, got, 6, 100), 6);
  EXPECT_EQ(std::string(got, 6), "MAPPED") << "a read sees what the mapping wrote";
  ASSERT_EQ(::pwrite(fd, "DIRECT", 6, kStripe + 3), 6);
  EXPECT_EQ(memcmp(static_cast<char*>(p) + kStripe + 3, "DIRECT", 6), 0)
      << "the mapping sees what a write wrote";
  munmap(p, len);
  close(fd);
}

TEST_F(PosixMount, RdwrDirectOffKeepsThePageCacheForReadWriteOpens) {
  auto m = cluster_->mount("mnt-rdwr-cached", "rdwr_direct=0");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  // The same file system: SetUp's directory is there too.
  std::string path =
      *m + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name() + "/cached";
  const size_t len = 16 * 4096;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0) << path << ": " << strerror(errno);
  std::string data = random_bytes(len, 22);
  ASSERT_EQ(::pwrite(fd, data.data(), len, 0), static_cast<ssize_t>(len));
  void* p = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(p, MAP_FAILED) << strerror(errno);
  EXPECT_EQ(cached_pages(p, len), len / 4096) << "write-through leaves the pages cached";
  munmap(p, len);
  close(fd);
  ASSERT_TRUE(cluster_->unmount(*m).ok());
}

TEST_F(PosixMount, AppendDescriptorsCanBeMappedShared) {
  // O_APPEND opens are always direct; with direct-IO mmap they map too.
  std::string path = dir_ + "/append-mapped";
  ASSERT_TRUE(write_file(path, std::string(8192, 'x')).ok());
  int fd = ::open(path.c_str(), O_RDWR | O_APPEND);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "tail", 4), 4);
  void* p = mmap(nullptr, 8196, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(p, MAP_FAILED) << strerror(errno);
  EXPECT_EQ(memcmp(static_cast<char*>(p) + 8192, "tail", 4), 0);
  munmap(p, 8196);
  close(fd);
}

// A second mount of the suite's file system with these options; where the
// test's directory is, on it.
class ExtraMount {
 public:
  ExtraMount(LocalCluster* c, const std::string& name, const std::string& opts) : c_(c) {
    auto m = c->mount(name, opts);
    if (!m.ok()) {
      error_ = m.status().ToString();
      return;
    }
    mnt_ = *m;
  }
  ~ExtraMount() {
    if (!mnt_.empty()) (void)c_->unmount(mnt_);
  }
  bool ok() const { return !mnt_.empty(); }
  const std::string& error() const { return error_; }
  std::string dir() const {
    return mnt_ + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

 private:
  LocalCluster* c_;
  std::string mnt_, error_;
};

// Opens `path` read-only, reads its `len` bytes into *got and then asks,
// through a shared mapping of the same descriptor, how many of their pages
// the page cache holds; *matches says whether the mapping reads `data`.
Result<size_t> pages_cached_after_reading(const std::string& path, const std::string& data,
                                          std::string* got, bool* matches) {
  const size_t len = data.size();
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return Status::FromErrno(errno, "open " + path);
  got->assign(len, '\0');
  ssize_t n = ::pread(fd, got->data(), len, 0);
  if (n != static_cast<ssize_t>(len)) {
    close(fd);
    return Status::IOError("short read of " + path + ": " + std::to_string(n));
  }
  void* p = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(fd);
    return Status::FromErrno(e, "mmap " + path);
  }
  size_t cached = cached_pages(p, len);
  *matches = memcmp(p, data.data(), len) == 0;
  munmap(p, len);
  close(fd);
  return cached;
}

TEST_F(PosixMount, LargeReadOnlyOpensBypassThePageCacheAndStillMap) {
  // rdonly_direct: a read-only open of a file of rdonly_direct_min bytes or
  // more reads through libsurge, leaving no pages in the cache, and a
  // shared mapping of it still reads the file (Linux 6.6+, as above).
  ExtraMount m(cluster_, "mnt-rdonly-direct", "rdonly_direct_min=1m");
  ASSERT_TRUE(m.ok()) << m.error();
  std::string data = random_bytes((1 << 20) + 3 * kStripe + 100, 23), got;
  ASSERT_TRUE(write_file(dir_ + "/large", data).ok());
  bool mapped_ok = false;
  auto cached = pages_cached_after_reading(m.dir() + "/large", data, &got, &mapped_ok);
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  EXPECT_TRUE(got == data) << "the direct read returned other bytes";
  EXPECT_EQ(*cached, 0u) << "the read went through the page cache";
  EXPECT_TRUE(mapped_ok) << "the mapping does not read the file";
}

TEST_F(PosixMount, SmallReadOnlyOpensKeepThePageCache) {
  // Below rdonly_direct_min a read-only open is cached as ever.
  ExtraMount m(cluster_, "mnt-rdonly-small", "rdonly_direct_min=1m");
  ASSERT_TRUE(m.ok()) << m.error();
  std::string data = random_bytes((1 << 20) - 4096, 24), got;
  ASSERT_TRUE(write_file(dir_ + "/small", data).ok());
  bool mapped_ok = false;
  auto cached = pages_cached_after_reading(m.dir() + "/small", data, &got, &mapped_ok);
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  EXPECT_EQ(*cached, data.size() / 4096) << "the read left pages out of the cache";
}

TEST_F(PosixMount, RdonlyDirectOffKeepsThePageCacheForLargeFiles) {
  ExtraMount m(cluster_, "mnt-rdonly-cached", "rdonly_direct=0,rdonly_direct_min=1m");
  ASSERT_TRUE(m.ok()) << m.error();
  std::string data = random_bytes(2 << 20, 25), got;
  ASSERT_TRUE(write_file(dir_ + "/large", data).ok());
  bool mapped_ok = false;
  auto cached = pages_cached_after_reading(m.dir() + "/large", data, &got, &mapped_ok);
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  EXPECT_EQ(*cached, data.size() / 4096) << "the read bypassed the page cache";
}

TEST_F(PosixMount, DirectReadOnlyOpensReadEveryBoundaryExactly) {
  // Every read-only open direct (rdonly_direct_min=0): libsurge's read-ahead
  // serves the stream. Each size around the stripe and object boundaries,
  // read whole and in odd chunks, holes included, ends exactly at its end.
  ExtraMount m(cluster_, "mnt-rdonly-all", "rdonly_direct_min=0");
  ASSERT_TRUE(m.ok()) << m.error();
  const uint64_t S = kStripe, R = 3 * kStripe;
  for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{4097}, S - 1, S + 1, R, R + 1,
                     2 * R + 4097, uint64_t{(1 << 20) + 1}, uint64_t{(5 << 20) + 5}}) {
    std::string name = "/f" + std::to_string(n);
    std::string data = random_bytes(n, n + 7);
    ASSERT_TRUE(write_file(dir_ + name, data).ok()) << name;
    for (size_t chunk : {size_t{4096}, size_t{10000}, size_t{(1 << 20) + 1}}) {
      auto back = read_file(m.dir() + name, chunk);
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      ASSERT_EQ(back->size(), n) << name << " in chunks of " << chunk;
      EXPECT_TRUE(*back == data) << name << " in chunks of " << chunk;
    }
  }
  // A sparse file: data, a hole of several stripes, data at the end.
  std::string path = dir_ + "/sparse";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "head", 4, 0), 4);
  ASSERT_EQ(::pwrite(fd, "tail", 4, 7 * S + 11), 4);
  ASSERT_EQ(close(fd), 0);
  std::string expect(7 * S + 15, '\0');
  memcpy(&expect[0], "head", 4);
  memcpy(&expect[7 * S + 11], "tail", 4);
  auto back = read_file(m.dir() + "/sparse", 10000);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == expect) << "holes read as zeros";
}

TEST_F(PosixMount, MountTakesAMaxReadOption) {
  // max_read is surge-fuse's own (libfuse ends a session whose INIT names
  // another than the mount did, which left a dead mount and a daemon
  // waiting for workers that had gone): the mount works with it.
  ExtraMount m(cluster_, "mnt-max-read", "max_read=256k");
  ASSERT_TRUE(m.ok()) << m.error();
  std::string out;
  sh("grep -c 'max_read=262144' /proc/self/mountinfo", &out);
  EXPECT_NE(out.substr(0, 1), "0") << "no mount with max_read=262144";
  const size_t len = (3 << 20) + 17;
  std::string data = random_bytes(len, 26);
  ASSERT_TRUE(write_file(dir_ + "/file", data).ok());
  auto back = read_file(m.dir() + "/file", 1 << 20);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == data);
}

TEST_F(PosixMount, MountRefusesANegativeNumber) {
  // strtoull alone reads "-1" as 2^64 - 1.
  auto m = cluster_->mount("mnt-negative", "readahead_kb=-1");
  ASSERT_FALSE(m.ok()) << "mounted with readahead_kb=-1";
  EXPECT_NE(m.status().ToString().find("readahead_kb=-1"), std::string::npos)
      << m.status().ToString();
}

TEST_F(PosixMount, MountRefusesABadSizeOption) {
  auto m = cluster_->mount("mnt-bad-size", "rdonly_direct_min=12q");
  ASSERT_FALSE(m.ok()) << "mounted with rdonly_direct_min=12q";
  EXPECT_NE(m.status().ToString().find("rdonly_direct_min=12q"), std::string::npos)
      << m.status().ToString();
}

// df -i through the mount: 40 directories made are 40 more inodes used,
// exactly, and their removal gives them back. (Files removed by earlier
// tests leave the count when the MDS purges their orphans, in the
// background: the test waits for the count to settle, and an attempt that
// still meets a purge is tried again.)
TEST_F(PosixMount, StatfsCountsInodesExactly) {
  auto used = [&]() -> uint64_t {
    struct statvfs v;
    EXPECT_EQ(statvfs(mnt_.c_str(), &v), 0) << strerror(errno);
    return v.f_files - v.f_ffree;
  };
  const std::string top = dir_ + "/dfi";
  ASSERT_EQ(::mkdir(top.c_str(), 0755), 0) << strerror(errno);
  // Let the purge of earlier tests' files end first (thousands of them).
  uint64_t last = used();
  for (int i = 0; i < 120; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const uint64_t now = used();
    if (now == last) break;
    last = now;
  }
  std::string seen;
  bool exact = false;
  for (int attempt = 0; attempt < 5 && !exact; ++attempt) {
    const uint64_t before = used();
    for (int i = 0; i < 40; ++i) {
      ASSERT_EQ(::mkdir((top + "/d" + std::to_string(i)).c_str(), 0755), 0) << strerror(errno);
    }
    const uint64_t with = used();
    for (int i = 0; i < 40; ++i) {
      ASSERT_EQ(::rmdir((top + "/d" + std::to_string(i)).c_str()), 0) << strerror(errno);
    }
    const uint64_t after = used();
    seen += " [" + std::to_string(before) + " " + std::to_string(with) + " " +
            std::to_string(after) + "]";
    exact = with == before + 40 && after == before;
  }
  EXPECT_TRUE(exact) << "inodes used before, with 40 more directories, after their removal:"
                     << seen;
}

TEST_F(PosixMount, StatfsAndFsync) {
  struct statvfs v;
  ASSERT_EQ(statvfs(mnt_.c_str(), &v), 0);
  EXPECT_GT(v.f_blocks, 0u);
  EXPECT_GT(v.f_bsize, 0u);
  EXPECT_EQ(v.f_namemax, 255u);
  int fd = ::open((dir_ + "/s").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "abc", 3), 3);
  EXPECT_EQ(fsync(fd), 0);
  EXPECT_EQ(fdatasync(fd), 0);
  close(fd);
}

}  // namespace
}  // namespace surge::test
