// MDS requests per syscall through a real mount, counted from the MDS's
// /metrics (surge_mds_requests_total{method}): what docs/metadata-path.md
// says each syscall costs, held. Counts, not times.
//
// Directory attributes after own changes: the kernel drops its attributes
// of a directory at every create, mkdir, unlink... in it, and with
// default_permissions needs them at the next path walk through it. The MDS
// answers each such change with the directory's new attributes, and
// surge-fuse gives the kernel those (Client::recent_dir_attr), so cp -a,
// tar -x and rm -rf no longer pay an MDS getattr per entry; and what it
// gives is the directory as the MDS left it (mtime, nlink).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <regex>
#include <string>
#include <thread>

#include "tests/client/local_cluster.h"

namespace surge::test {
namespace {

constexpr int kN = 40;

// GET http://127.0.0.1:port/metrics, the whole answer ("" when nothing listens).
std::string scrape(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

class MetadataRequests : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    port_ = free_port();
    ClusterConfig cfg;
    cfg.mds_toml = "[server]\nmetrics_listen = \"127.0.0.1:" + std::to_string(port_) + "\"\n";
    auto c = LocalCluster::Start(cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = c->release();
    // Long timeouts: no attribute expires during a loop on a slow machine,
    // so every getattr counted is one the daemon chose to send.
    fuse_port_ = free_port();
    auto m = cluster_->mount("mnt", "attr_timeout=600,entry_timeout=600,metrics_listen=127.0.0.1:" +
                                        std::to_string(fuse_port_));
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
    ASSERT_EQ(::mkdir(dir_.c_str(), 0755), 0) << dir_ << ": " << std::strerror(errno);
  }
  // counter{label="..."} by label value, now, from the page at port.
  static std::map<std::string, long> counts(int port, const std::string& counter,
                                            const std::string& label) {
    std::string text = scrape(port);
    std::map<std::string, long> out;
    std::regex re(counter + "\\{" + label + R"re(="(\w+)"\} (\d+))re");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
         ++it) {
      out[(*it)[1].str()] = std::stol((*it)[2].str());
    }
    EXPECT_FALSE(out.empty()) << "no " << counter << " on port " << port << ": " << text;
    return out;
  }
  // surge_mds_requests_total by method, now.
  static std::map<std::string, long> requests() {
    return counts(port_, "surge_mds_requests_total", "method");
  }
  // The mount's surge_fuse_requests_total by FUSE op, now.
  static std::map<std::string, long> fuse_requests() {
    return counts(fuse_port_, "surge_fuse_requests_total", "op");
  }
  // fuse_requests() once `op` counts `want` more than in `before` (or after
  // 10 s): surge-fuse counts a request just after replying to it, so the
  // syscall it answered can return before the count moves.
  static std::map<std::string, long> fuse_requests_once(const std::map<std::string, long>& before,
                                                        const std::string& op, long want) {
    auto now = fuse_requests();
    for (int i = 0; i < 1000 && delta(before, now, op) < want; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      now = fuse_requests();
    }
    return now;
  }
  // fuse_requests() once two reads 100 ms apart agree (or after 10 s): the
  // releases of earlier closes, which the kernel sends after close(2) has
  // returned, counted before a measurement starts.
  static std::map<std::string, long> settled_fuse_requests() {
    auto last = fuse_requests();
    for (int i = 0; i < 100; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      auto now = fuse_requests();
      if (now == last) break;
      last = std::move(now);
    }
    return last;
  }
  static long delta(const std::map<std::string, long>& a, const std::map<std::string, long>& b,
                    const std::string& method) {
    auto get = [&](const std::map<std::string, long>& m) {
      auto it = m.find(method);
      return it == m.end() ? 0L : it->second;
    };
    return get(b) - get(a);
  }
  static void create(const std::string& p) {
    int fd = ::open(p.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    ASSERT_GE(fd, 0) << p << ": " << std::strerror(errno);
    ASSERT_EQ(::close(fd), 0);
  }
  static LocalCluster* cluster_;
  static std::string mnt_;
  static int port_;
  static int fuse_port_;
  std::string dir_;
};
LocalCluster* MetadataRequests::cluster_ = nullptr;
std::string MetadataRequests::mnt_;
int MetadataRequests::port_ = 0;
int MetadataRequests::fuse_port_ = 0;

TEST_F(MetadataRequests, CreatesInADirectoryDoNotGetattrIt) {
  auto before = requests();
  for (int i = 0; i < kN; ++i) create(dir_ + "/f" + std::to_string(i));
  auto after = requests();
  EXPECT_EQ(delta(before, after, "create"), kN);
  // Each create after the first walks through the directory the previous
  // one changed: kN getattrs of it before the MDS's reply carried it.
  EXPECT_LE(delta(before, after, "getattr"), 1) << "getattrs per create: the directory's "
                                                   "attributes were asked for again";
}

// The directory was made through this mount, which holds its lease
// (client/lib/dir_leases.h): the kernel's LOOKUP of each new name is
// answered by surge-fuse without the MDS.
TEST_F(MetadataRequests, CreatesInADirectoryThisMountMadeLookUpNothing) {
  auto before = requests();
  for (int i = 0; i < kN; ++i) create(dir_ + "/f" + std::to_string(i));
  auto after = requests();
  EXPECT_EQ(delta(before, after, "create"), kN);
  EXPECT_EQ(delta(before, after, "lookup"), 0) << "new names were looked up at the MDS";
}

// Once another client adds a name there, the lease is over and each new
// name's LOOKUP asks the MDS again.
TEST_F(MetadataRequests, AfterAnotherClientsCreateTheLookupsAskTheMds) {
  auto other = cluster_->connect();
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  const std::string rel = dir_.substr(mnt_.size());
  auto f = (*other)->open(rel + "/theirs", O_CREAT | O_EXCL | O_WRONLY, 0644);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE((*other)->close(*f).ok());
  create(dir_ + "/first");  // its reply tells the mount the lease is over
  auto before = requests();
  for (int i = 0; i < kN; ++i) create(dir_ + "/f" + std::to_string(i));
  auto after = requests();
  EXPECT_EQ(delta(before, after, "lookup"), kN);
}

TEST_F(MetadataRequests, WithDirLeasesOffEachNewNameIsLookedUp) {
  auto m = cluster_->mount("noleases", "dir_leases=0");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const std::string dir = *m + "/d";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0) << std::strerror(errno);
  auto before = requests();
  for (int i = 0; i < kN; ++i) create(dir + "/f" + std::to_string(i));
  auto after = requests();
  EXPECT_EQ(delta(before, after, "lookup"), kN);
  ASSERT_TRUE(cluster_->unmount(*m).ok());
}

TEST_F(MetadataRequests, MkdirsAndUnlinksInADirectoryDoNotGetattrIt) {
  for (int i = 0; i < kN; ++i) create(dir_ + "/f" + std::to_string(i));
  auto before = requests();
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(::mkdir((dir_ + "/d" + std::to_string(i)).c_str(), 0755), 0) << std::strerror(errno);
  }
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(::unlink((dir_ + "/f" + std::to_string(i)).c_str()), 0) << std::strerror(errno);
  }
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(::rmdir((dir_ + "/d" + std::to_string(i)).c_str()), 0) << std::strerror(errno);
  }
  auto after = requests();
  EXPECT_EQ(delta(before, after, "mkdir"), kN);
  EXPECT_EQ(delta(before, after, "unlink"), kN);
  EXPECT_EQ(delta(before, after, "rmdir"), kN);
  EXPECT_LE(delta(before, after, "getattr"), 1);
}

// What the kernel is given is the directory as the MDS left it: a stat
// through the mount right after each change agrees with the MDS itself.
TEST_F(MetadataRequests, TheDirectoryAfterAChangeIsWhatTheMdsHolds) {
  auto native = cluster_->connect();
  ASSERT_TRUE(native.ok()) << native.status().ToString();
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  auto check = [&](const char* after_what) {
    struct stat st;
    ASSERT_EQ(::stat(dir_.c_str(), &st), 0) << std::strerror(errno);
    auto a = (*native)->stat("/" + name);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(st.st_mtim.tv_sec, a->mtime.sec) << after_what;
    EXPECT_EQ(static_cast<uint32_t>(st.st_mtim.tv_nsec), a->mtime.nsec) << after_what;
    EXPECT_EQ(st.st_ctim.tv_sec, a->ctime.sec) << after_what;
    EXPECT_EQ(static_cast<uint32_t>(st.st_ctim.tv_nsec), a->ctime.nsec) << after_what;
    EXPECT_EQ(st.st_nlink, a->nlink) << after_what;
    EXPECT_EQ(st.st_mode, a->mode) << after_what;
  };
  create(dir_ + "/f");
  check("a create");
  ASSERT_EQ(::mkdir((dir_ + "/sub").c_str(), 0700), 0);
  check("a mkdir");
  ASSERT_EQ(::symlink("f", (dir_ + "/l").c_str()), 0);
  check("a symlink");
  ASSERT_EQ(::link((dir_ + "/f").c_str(), (dir_ + "/h").c_str()), 0);
  check("a link");
  ASSERT_EQ(::unlink((dir_ + "/h").c_str()), 0);
  check("an unlink");
  ASSERT_EQ(::rmdir((dir_ + "/sub").c_str()), 0);
  check("a rmdir");
  ASSERT_EQ(::chmod(dir_.c_str(), 0750), 0);
  create(dir_ + "/g");
  check("a chmod and a create");
  ASSERT_EQ(::rename((dir_ + "/g").c_str(), (dir_ + "/g2").c_str()), 0);
  check("a rename");
}

// A setattr after writes (cp -p's and cp -a's futimens, tar -x's) carries
// the size report with it: one MDS call and one sync, where the report used
// to go first on its own. The times it set still survive (the report is
// applied before them) and the size is the one written.
TEST_F(MetadataRequests, ASetattrAfterWritesCarriesTheSizeReport) {
  const std::string data(5000, 'x');
  const timespec times[2] = {{1000000000, 5}, {1100000000, 7}};
  auto before = requests();
  for (int i = 0; i < kN; ++i) {
    const std::string p = dir_ + "/f" + std::to_string(i);
    int fd = ::open(p.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
    ASSERT_GE(fd, 0) << p << ": " << std::strerror(errno);
    ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    ASSERT_EQ(::futimens(fd, times), 0) << std::strerror(errno);
    ASSERT_EQ(::fchmod(fd, 0644), 0) << std::strerror(errno);
    ASSERT_EQ(::close(fd), 0);
  }
  auto after = requests();
  EXPECT_EQ(delta(before, after, "setattr"), 2 * kN);
  // The periodic report (every second) may catch a file between its write
  // and its futimens now and then; one per file is the old cost.
  EXPECT_LE(delta(before, after, "report_size"), kN / 4)
      << "size reports sent apart from the setattr";
  for (int i = 0; i < kN; ++i) {
    struct stat st;
    const std::string p = dir_ + "/f" + std::to_string(i);
    ASSERT_EQ(::stat(p.c_str(), &st), 0);
    EXPECT_EQ(st.st_size, static_cast<off_t>(data.size())) << p;
    EXPECT_EQ(st.st_mtim.tv_sec, 1100000000) << p;
    EXPECT_EQ(st.st_mtim.tv_nsec, 7) << p;
    EXPECT_EQ(st.st_mode & 07777, 0644u) << p;
  }
  // And as another client sees them.
  auto native = cluster_->connect();
  ASSERT_TRUE(native.ok()) << native.status().ToString();
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  auto a = (*native)->stat("/" + name + "/f0");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->size, data.size());
  EXPECT_EQ(a->mtime.sec, 1100000000);
}

// POSIX ACLs (system.*) are not kept: refused with EOPNOTSUPP as before,
// by the client without asking the MDS (cp -a tries one per file).
TEST_F(MetadataRequests, ASystemXattrIsRefusedWithoutAskingTheMds) {
  const std::string p = dir_ + "/f";
  create(p);
  // A minimal access ACL (user::rw-, group::r--, other::r--), as cp -a sets it.
  const unsigned char acl[] = {2, 0, 0, 0, 1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff, 4, 0, 4, 0,
                               0xff, 0xff, 0xff, 0xff, 0x20, 0, 4, 0, 0xff, 0xff, 0xff, 0xff};
  auto before = requests();
  for (int i = 0; i < kN; ++i) {
    errno = 0;
    EXPECT_EQ(::setxattr(p.c_str(), "system.posix_acl_access", acl, sizeof acl, 0), -1);
    EXPECT_EQ(errno, EOPNOTSUPP);
    char buf[256];
    errno = 0;
    EXPECT_EQ(::getxattr(p.c_str(), "system.posix_acl_access", buf, sizeof buf), -1);
    EXPECT_EQ(errno, EOPNOTSUPP);
    errno = 0;
    EXPECT_EQ(::removexattr(dir_.c_str(), "system.posix_acl_default"), -1);
    EXPECT_EQ(errno, EOPNOTSUPP);
  }
  auto after = requests();
  EXPECT_EQ(delta(before, after, "setxattr"), 0);
  EXPECT_EQ(delta(before, after, "getxattr"), 0);
  EXPECT_EQ(delta(before, after, "removexattr"), 0);
  // user.* still goes to the MDS and is kept.
  ASSERT_EQ(::setxattr(p.c_str(), "user.k", "v", 1, 0), 0) << std::strerror(errno);
  char v[8] = {};
  EXPECT_EQ(::getxattr(p.c_str(), "user.k", v, sizeof v), 1);
  EXPECT_EQ(v[0], 'v');
}

// A read-only handle has nothing to flush: its close costs the mount no
// FLUSH request (FOPEN_NOFLUSH), only the RELEASE.
TEST_F(MetadataRequests, AReadOnlyCloseSendsNoFlush) {
  for (int i = 0; i < kN; ++i) create(dir_ + "/f" + std::to_string(i));
  auto before = settled_fuse_requests();
  for (int i = 0; i < kN; ++i) {
    const std::string p = dir_ + "/f" + std::to_string(i);
    int fd = ::open(p.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0) << p << ": " << std::strerror(errno);
    char c;
    EXPECT_EQ(::read(fd, &c, 1), 0) << p;
    ASSERT_EQ(::close(fd), 0) << p;
  }
  // Releases come after any flush of the same close: once they are all
  // counted, so would a flush be.
  auto after = fuse_requests_once(before, "release", kN);
  ASSERT_EQ(delta(before, after, "open"), kN) << "the opens were not counted";
  ASSERT_EQ(delta(before, after, "release"), kN) << "the closes were not counted";
  EXPECT_EQ(delta(before, after, "flush"), 0);
}

// A writable handle's close still flushes: that is where an error of a
// write that went behind is reported to close().
TEST_F(MetadataRequests, AWritableCloseStillFlushes) {
  for (int i = 0; i < kN; ++i) create(dir_ + "/f" + std::to_string(i));
  auto before = settled_fuse_requests();
  for (int i = 0; i < kN; ++i) {
    const std::string p = dir_ + "/f" + std::to_string(i);
    int fd = ::open(p.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0) << p << ": " << std::strerror(errno);
    ASSERT_EQ(::write(fd, "x", 1), 1) << p;
    ASSERT_EQ(::close(fd), 0) << p;
  }
  auto after = fuse_requests_once(before, "flush", kN);
  EXPECT_EQ(delta(before, after, "flush"), kN);
}

}  // namespace
}  // namespace surge::test
