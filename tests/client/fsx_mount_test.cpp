// fsx in the spirit of the classic file system exerciser: thousands of
// random operations (pwrite, pread, ftruncate up and down, mmap reads,
// fsync, close and reopen, and fallocate: punch hole, zero range with and
// without KEEP_SIZE, reserve with and without it) on one file through a real FUSE mount, each read
// checked against a shadow copy kept in memory. 64 KiB stripes over 3 data
// servers, so the offsets cross stripe, object and block boundaries all the
// time. A fixed seed makes a failure repeatable; the log names the op.
// Run three times: with the mount's defaults (on Linux 6.6+ the O_RDWR file
// is then direct, mmap through the page cache beside it), with
// rdwr_direct=0 (the page cache for everything, as on older kernels), and
// with the defaults on one-copy legacy objects (layout format 1), whose
// truncates the data servers order by a generation of their own
// (ods/store/object_generation.cpp), and once more on an EC 4+2 file over 6
// data servers (issue 16: writes as parity deltas, truncates cutting with
// deltas), where fallocate must answer EOPNOTSUPP and change nothing.
#include <fcntl.h>
#include <linux/falloc.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "tests/client/local_cluster.h"

namespace surge::test {
namespace {

constexpr uint64_t kMaxSize = 6u << 20;
constexpr int kOps = 2500;

struct FsxRun {
  const char* name;
  const char* mount_options;
  bool legacy_objects;
  bool ec = false;
};

class Fsx : public ::testing::TestWithParam<FsxRun> {
 protected:
  void SetUp() override {
    ClusterConfig cfg = small_stripes();
    if (GetParam().legacy_objects) cfg = one_copy(cfg);
    if (GetParam().ec) cfg.ods_count = 6;
    auto c = LocalCluster::Start(cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    auto m = cluster_->mount("mnt", GetParam().mount_options);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    path_ = *m + "/fsx.dat";
    if (GetParam().ec) {
      ASSERT_EQ(::mkdir((*m + "/ec").c_str(), 0755), 0) << strerror(errno);
      const char* b = std::getenv("SURGE_BUILD_DIR");
      ASSERT_NE(b, nullptr) << "SURGE_BUILD_DIR is not set (run through ctest)";
      std::string out;
      ASSERT_EQ(
          sh(std::string(b) + "/tools/surgectl --mds " + cluster_->mds_address() + " --key-file " +
                 cluster_->key_file() + " setstripe --ec 4+2 --count 2 --size 65536 /ec 2>&1",
             &out),
          0)
          << out;
      path_ = *m + "/ec/fsx.dat";
    }
  }
  std::unique_ptr<LocalCluster> cluster_;
  std::string path_;
};

TEST_P(Fsx, RandomOperationsMatchAShadowFile) {
  std::mt19937_64 rng(20261130);
  auto pick = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  std::string shadow;
  int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0) << strerror(errno);
  std::string buf;
  for (int op = 0; op < kOps; ++op) {
    const uint64_t size = shadow.size();
    const uint64_t op_kind = pick(13);
    switch (op_kind) {
      case 0:
      case 1:
      case 2: {  // write, often past the end
        uint64_t off = pick(std::min<uint64_t>(kMaxSize, size + (1 << 20)));
        uint64_t len = 1 + pick(std::min<uint64_t>(kMaxSize - off, 1536 * 1024));
        std::string d = random_bytes(len, rng());
        ASSERT_EQ(::pwrite(fd, d.data(), len, static_cast<off_t>(off)), static_cast<ssize_t>(len))
            << "op " << op << " write " << off << "+" << len << ": " << strerror(errno);
        if (shadow.size() < off + len) shadow.resize(off + len, '\0');
        shadow.replace(off, len, d);
        break;
      }
      case 3:
      case 4:
      case 5: {  // read, sometimes across the end
        uint64_t off = pick(size + 4096);
        uint64_t len = 1 + pick(1 << 20);
        buf.assign(len, 'Z');
        ssize_t n = ::pread(fd, buf.data(), len, static_cast<off_t>(off));
        uint64_t want = off >= size ? 0 : std::min(len, size - off);
        ASSERT_EQ(n, static_cast<ssize_t>(want)) << "op " << op << " read " << off << "+" << len;
        ASSERT_TRUE(want == 0 || buf.compare(0, want, shadow, off, want) == 0)
            << "op " << op << " read " << off << "+" << len << " differs from the shadow";
        break;
      }
      case 6: {  // truncate down or up
        uint64_t to = pick(kMaxSize);
        ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(to)), 0) << "op " << op << " truncate " << to;
        shadow.resize(to, '\0');
        break;
      }
      case 7: {  // mmap read of a range
        if (size == 0) break;
        uint64_t off = pick(size) & ~uint64_t{4095};
        uint64_t len = 1 + pick(std::min<uint64_t>(size - off, 512 * 1024));
        void* p = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(off));
        ASSERT_NE(p, MAP_FAILED) << "op " << op << " mmap: " << strerror(errno);
        bool same = std::memcmp(p, shadow.data() + off, len) == 0;
        ::munmap(p, len);
        ASSERT_TRUE(same) << "op " << op << " mmap read " << off << "+" << len;
        break;
      }
      case 8: {  // fsync, and the size seen by stat
        ASSERT_EQ(::fsync(fd), 0) << "op " << op << ": " << strerror(errno);
        struct stat st;
        ASSERT_EQ(::fstat(fd, &st), 0);
        ASSERT_EQ(static_cast<uint64_t>(st.st_size), size) << "op " << op << " size";
        break;
      }
      case 10:    // punch a hole (Linux: only with KEEP_SIZE)
      case 11:    // zero a range, growing the file or not
      case 12: {  // reserve, growing the file or not
        uint64_t off = pick(std::min<uint64_t>(kMaxSize - 1, size + (1 << 20)));
        uint64_t len = 1 + pick(std::min<uint64_t>(kMaxSize - off, 1536 * 1024));
        const bool keep = pick(2) == 0;
        int mode = 0;
        const char* name = "reserve";
        if (op_kind == 10) {
          mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
          name = "punch";
        } else if (op_kind == 11) {
          mode = FALLOC_FL_ZERO_RANGE | (keep ? FALLOC_FL_KEEP_SIZE : 0);
          name = "zero";
        } else {
          mode = keep ? FALLOC_FL_KEEP_SIZE : 0;
        }
        const int rc = ::fallocate(fd, mode, static_cast<off_t>(off), static_cast<off_t>(len));
        if (GetParam().ec) {
          ASSERT_TRUE(rc == -1 && errno == EOPNOTSUPP)
              << "op " << op << " " << name << " on an EC file: " << rc << " " << strerror(errno);
          break;
        }
        ASSERT_EQ(rc, 0) << "op " << op << " " << name << " mode " << mode << " " << off << "+"
                         << len << ": " << strerror(errno);
        if (!(mode & FALLOC_FL_KEEP_SIZE) && shadow.size() < off + len) shadow.resize(off + len, '\0');
        if (op_kind != 12 && off < shadow.size()) {
          std::fill(shadow.begin() + static_cast<std::ptrdiff_t>(off),
                    shadow.begin() + static_cast<std::ptrdiff_t>(std::min<uint64_t>(off + len, shadow.size())),
                    '\0');
        }
        break;
      }
      default: {  // close and open again
        ASSERT_EQ(::close(fd), 0) << "op " << op << ": " << strerror(errno);
        fd = ::open(path_.c_str(), O_RDWR);
        ASSERT_GE(fd, 0) << "op " << op << ": " << strerror(errno);
        break;
      }
    }
  }
  ASSERT_EQ(::close(fd), 0);
  auto back = read_file(path_);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == shadow) << "final contents differ";
}

INSTANTIATE_TEST_SUITE_P(
    MountOptions, Fsx,
    ::testing::Values(FsxRun{"Defaults", "", false}, FsxRun{"PageCache", "rdwr_direct=0", false},
                      FsxRun{"LegacyObjects", "", true}, FsxRun{"ErasureCoded", "", false, true}),
    [](const ::testing::TestParamInfo<FsxRun>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace surge::test
