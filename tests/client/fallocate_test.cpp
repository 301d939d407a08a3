// fallocate end to end on a real cluster (64 KiB stripes over 3 data
// servers, so every range crosses stripe and object boundaries): through
// libsurge (Client::fallocate, surge_fallocate) and through a FUSE mount
// (fallocate(2), posix_fallocate). Each mode is checked by its bytes, the
// file size seen by this client and by a fresh one (what the MDS knows),
// and the space the file's objects hold on the data servers (st_blocks of
// their object files).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "surge/surge.h"
#include "tests/client/local_cluster.h"

namespace surge::test {
namespace {

constexpr uint64_t kMiB = 1 << 20;

class FallocateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // One copy: these tests weigh the objects a file holds on the data
    // servers, which format 1 names by inode.
    auto c = LocalCluster::Start(one_copy(small_stripes()));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = c->release();
    auto m = cluster_->mount("mnt");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    mnt_ = new std::string(*m);
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
    delete mnt_;
    mnt_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(cluster_, nullptr);
    auto c = cluster_->connect();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(*c);
  }

  // Bytes the objects of inode ino hold on all data servers (st_blocks).
  static uint64_t held(Ino ino) {
    char name[32];
    std::snprintf(name, sizeof name, "%016llx.dat", static_cast<unsigned long long>(ino));
    uint64_t total = 0;
    for (int i = 0; i < 3; ++i) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(cluster_->ods_dir(i))) {
        if (e.path().filename() != name) continue;
        struct stat st {};
        if (::stat(e.path().c_str(), &st) == 0) total += static_cast<uint64_t>(st.st_blocks) * 512;
      }
    }
    return total;
  }
  // The size a client that never wrote the file sees: the MDS's.
  uint64_t size_at_mds(const std::string& path) {
    auto other = cluster_->connect();
    EXPECT_TRUE(other.ok()) << other.status().ToString();
    if (!other.ok()) return ~uint64_t{0};
    auto a = (*other)->stat(path);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    return a.ok() ? a->size : ~uint64_t{0};
  }
  std::string read_all(File& f, uint64_t max) {
    std::string back(max, 'Z');
    auto n = client_->pread(f, back.data(), back.size(), 0);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    back.resize(n.ok() ? *n : 0);
    return back;
  }
  FileRef create(const std::string& path) {
    auto f = client_->open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? *f : nullptr;
  }

  static LocalCluster* cluster_;
  static std::string* mnt_;
  std::unique_ptr<Client> client_;
};
LocalCluster* FallocateTest::cluster_ = nullptr;
std::string* FallocateTest::mnt_ = nullptr;

// ---- libsurge ---------------------------------------------------------------

TEST_F(FallocateTest, ModeZeroReservesOnTheDataServersAndGrowsTheFileAtTheMds) {
  FileRef f = create("/reserve");
  ASSERT_TRUE(f);
  ASSERT_TRUE(client_->fallocate(*f, 0, 1000, 2 * kMiB).ok());
  EXPECT_EQ(client_->getattr(f->ino(), Caller{})->size, 1000 + 2 * kMiB);
  EXPECT_EQ(size_at_mds("/reserve"), 1000 + 2 * kMiB);  // known before any close
  EXPECT_GE(held(f->ino()), 2 * kMiB);
  EXPECT_EQ(read_all(*f, 4 * kMiB), std::string(1000 + 2 * kMiB, '\0'));
  // Inside the file already: nothing changes size.
  ASSERT_TRUE(client_->fallocate(*f, 0, 0, 4096).ok());
  EXPECT_EQ(size_at_mds("/reserve"), 1000 + 2 * kMiB);
  EXPECT_TRUE(client_->close(f).ok());
}

TEST_F(FallocateTest, KeepSizeReservesWithoutChangingTheSizeOrTheBytes) {
  FileRef f = create("/keep");
  ASSERT_TRUE(f);
  std::string data = random_bytes(100000, 1);
  ASSERT_TRUE(client_->pwrite(*f, data.data(), data.size(), 0).ok());
  ASSERT_TRUE(client_->fsync(*f).ok());
  const uint64_t before = held(f->ino());
  ASSERT_TRUE(client_->fallocate(*f, kFallocKeepSize, 0, 3 * kMiB).ok());
  EXPECT_EQ(client_->getattr(f->ino(), Caller{})->size, data.size());
  EXPECT_EQ(size_at_mds("/keep"), data.size());
  EXPECT_GE(held(f->ino()), before + 3 * kMiB - data.size() - 3 * 4096);
  EXPECT_EQ(read_all(*f, 4 * kMiB), data);
  EXPECT_TRUE(client_->close(f).ok());
}

TEST_F(FallocateTest, PunchFreesSpaceOnTheDataServersAndReadsAsZeros) {
  FileRef f = create("/punch");
  ASSERT_TRUE(f);
  std::string data = random_bytes(3 * kMiB, 2);
  ASSERT_TRUE(client_->pwrite(*f, data.data(), data.size(), 0).ok());
  ASSERT_TRUE(client_->fsync(*f).ok());
  const uint64_t before = held(f->ino());
  const uint64_t off = 100001, len = 2 * kMiB + 777;  // unaligned both ends
  ASSERT_TRUE(client_->fallocate(*f, kFallocPunchHole | kFallocKeepSize, off, len).ok());
  std::fill(data.begin() + off, data.begin() + off + len, '\0');
  EXPECT_EQ(read_all(*f, 4 * kMiB), data);
  EXPECT_EQ(size_at_mds("/punch"), 3 * kMiB);
  // Each object lost its share of the range but at most two partial blocks.
  const uint64_t after = held(f->ino());
  EXPECT_LE(after + len - 3 * 2 * 4096, before) << "before " << before << " after " << after;
  // Reopened elsewhere, the same bytes.
  auto other = cluster_->connect();
  ASSERT_TRUE(other.ok());
  auto g = (*other)->open("/punch", O_RDONLY);
  ASSERT_TRUE(g.ok());
  std::string back(4 * kMiB, 'Z');
  auto n = (*other)->pread(**g, back.data(), back.size(), 0);
  ASSERT_TRUE(n.ok());
  back.resize(*n);
  EXPECT_EQ(back, data);
  EXPECT_TRUE((*other)->close(*g).ok());
  EXPECT_TRUE(client_->close(f).ok());
}

TEST_F(FallocateTest, ZeroRangeWithKeepSizeAndGrowingTheFile) {
  FileRef f = create("/zero");
  ASSERT_TRUE(f);
  std::string data = random_bytes(200000, 3);
  ASSERT_TRUE(client_->pwrite(*f, data.data(), data.size(), 0).ok());
  ASSERT_TRUE(client_->flush(*f).ok());
  ASSERT_TRUE(client_->fallocate(*f, kFallocZeroRange | kFallocKeepSize, 50000, 400000).ok());
  std::fill(data.begin() + 50000, data.end(), '\0');
  EXPECT_EQ(read_all(*f, kMiB), data);
  EXPECT_EQ(size_at_mds("/zero"), 200000u);
  ASSERT_TRUE(client_->fallocate(*f, kFallocZeroRange, 10, 300000).ok());
  data.assign(300010, '\0');
  data.replace(0, 10, random_bytes(200000, 3).substr(0, 10));
  EXPECT_EQ(read_all(*f, kMiB), data);
  EXPECT_EQ(size_at_mds("/zero"), 300010u);
  EXPECT_GE(held(f->ino()), 300010u - 3 * 4096);  // zeroed, not freed
  EXPECT_TRUE(client_->close(f).ok());
}

TEST_F(FallocateTest, OtherModesAreNotSupportedAndReadOnlyHandlesRefused) {
  FileRef f = create("/modes");
  ASSERT_TRUE(f);
  EXPECT_EQ(client_->fallocate(*f, kFallocPunchHole, 0, 4096).code(), Code::kNotSupported);
  EXPECT_EQ(client_->fallocate(*f, FALLOC_FL_COLLAPSE_RANGE, 0, 4096).code(), Code::kNotSupported);
  EXPECT_EQ(client_->fallocate(*f, FALLOC_FL_INSERT_RANGE, 0, 4096).code(), Code::kNotSupported);
  EXPECT_EQ(client_->fallocate(*f, kFallocPunchHole | kFallocZeroRange | kFallocKeepSize, 0, 4096)
                .code(),
            Code::kNotSupported);
  EXPECT_EQ(client_->fallocate(*f, 0, 0, 0).code(), Code::kInvalidArgument);
  EXPECT_TRUE(client_->close(f).ok());
  auto r = client_->open("/modes", O_RDONLY);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(client_->fallocate(**r, 0, 0, 4096).code(), Code::kBadFile);
  EXPECT_TRUE(client_->close(*r).ok());
  EXPECT_EQ(size_at_mds("/modes"), 0u);
}

TEST_F(FallocateTest, APunchLandsAfterTheWritesBehindItAndDropsStaleReadAhead) {
  FileRef w = create("/order");
  ASSERT_TRUE(w);
  std::string data = random_bytes(4 * kMiB, 4);
  ASSERT_TRUE(client_->pwrite(*w, data.data(), data.size(), 0).ok());  // still in flight
  ASSERT_TRUE(client_->fallocate(*w, kFallocPunchHole | kFallocKeepSize, kMiB, kMiB).ok());
  std::fill(data.begin() + kMiB, data.begin() + 2 * kMiB, '\0');
  ASSERT_TRUE(client_->flush(*w).ok());
  // A sequential reader through another handle reads ahead past 64 KiB...
  auto r = client_->open("/order", O_RDONLY);
  ASSERT_TRUE(r.ok());
  client_->set_read_ahead(**r, 8 * kMiB);
  std::string head(65536, 'Z');
  ASSERT_EQ(*client_->pread(**r, head.data(), head.size(), 0), head.size());
  // ...then the range it fetched ahead is punched: it must read the zeros.
  ASSERT_TRUE(client_->fallocate(*w, kFallocPunchHole | kFallocKeepSize, 65536, 65536 * 3).ok());
  std::fill(data.begin() + 65536, data.begin() + 65536 * 4, '\0');
  std::string rest(4 * kMiB - 65536, 'Z');
  ASSERT_EQ(*client_->pread(**r, rest.data(), rest.size(), 65536), rest.size());
  EXPECT_TRUE(head + rest == data);
  EXPECT_TRUE(client_->close(*r).ok());
  EXPECT_TRUE(client_->close(w).ok());
}

TEST_F(FallocateTest, CApiPunchesAndReserves) {
  surge_options_t o{};
  std::string addr = cluster_->mds_address();
  o.mds_address = addr.c_str();
  o.cluster_key_file = cluster_->key_file().c_str();
  surge_t* fs = nullptr;
  ASSERT_EQ(surge_connect(&o, &fs), 0);
  surge_file_t* f = nullptr;
  ASSERT_EQ(surge_open(fs, "/capi_falloc", O_RDWR | O_CREAT, 0644, &f), 0);
  std::string data = random_bytes(300000, 5);
  ASSERT_EQ(surge_pwrite(fs, f, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
  EXPECT_EQ(surge_fallocate(fs, f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1000, 100000), 0);
  EXPECT_EQ(surge_fallocate(fs, f, 0, 0, 500000), 0);
  EXPECT_EQ(surge_fallocate(fs, f, FALLOC_FL_COLLAPSE_RANGE, 0, 65536), -EOPNOTSUPP);
  std::fill(data.begin() + 1000, data.begin() + 101000, '\0');
  data.resize(500000, '\0');
  std::string back(600000, 'Z');
  ASSERT_EQ(surge_pread(fs, f, back.data(), back.size(), 0), 500000);
  back.resize(500000);
  EXPECT_TRUE(back == data);
  EXPECT_EQ(surge_close(fs, f), 0);
  surge_disconnect(fs);
}

// ---- the mount ------------------------------------------------------------------

TEST_F(FallocateTest, MountPosixFallocateGrowsTheFileAndReservesSpace) {
  const std::string path = *mnt_ + "/m_reserve";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0) << strerror(errno);
  ASSERT_EQ(::posix_fallocate(fd, 4096, 3 * kMiB), 0);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), 4096 + 3 * kMiB);
  EXPECT_EQ(size_at_mds("/m_reserve"), 4096 + 3 * kMiB);
  EXPECT_GE(held(st.st_ino), 3 * kMiB);
  ASSERT_EQ(::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 5 * kMiB), 0);
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), 4096 + 3 * kMiB);
  EXPECT_GE(held(st.st_ino), 5 * kMiB);
  ASSERT_EQ(::close(fd), 0);
  auto back = read_file(path);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == std::string(4096 + 3 * kMiB, '\0'));
}

TEST_F(FallocateTest, MountPunchHoleReadsZerosKeepsTheSizeAndFreesSpace) {
  const std::string path = *mnt_ + "/m_punch";
  std::string data = random_bytes(2 * kMiB, 6);
  ASSERT_TRUE(write_file(path, data).ok());
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << strerror(errno);
  ASSERT_EQ(::fsync(fd), 0);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  const uint64_t before = held(st.st_ino);
  const uint64_t off = 5000, len = kMiB + 3;
  ASSERT_EQ(::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len), 0)
      << strerror(errno);
  // Read through the same descriptor (the kernel dropped its pages of the range).
  std::string back(2 * kMiB, 'Z');
  ASSERT_EQ(::pread(fd, back.data(), back.size(), 0), static_cast<ssize_t>(back.size()));
  std::fill(data.begin() + off, data.begin() + off + len, '\0');
  EXPECT_TRUE(back == data);
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), 2 * kMiB);
  EXPECT_LE(held(st.st_ino) + len - 3 * 2 * 4096, before);
  // Linux refuses a punch without KEEP_SIZE, and modes Surge does not do.
  EXPECT_EQ(::fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 4096), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
  EXPECT_EQ(::fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 0, 65536), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ASSERT_EQ(::close(fd), 0);
  auto again = read_file(path);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(*again == data);
  fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 4096), -1);
  EXPECT_EQ(errno, EBADF);
  ::close(fd);
}

TEST_F(FallocateTest, MountZeroRangeWithAndWithoutKeepSize) {
  const std::string path = *mnt_ + "/m_zero";
  std::string data = random_bytes(300000, 7);
  ASSERT_TRUE(write_file(path, data).ok());
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << strerror(errno);
  ASSERT_EQ(::fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 1, 99999), 0)
      << strerror(errno);
  ASSERT_EQ(::fallocate(fd, FALLOC_FL_ZERO_RANGE, 250000, 250000), 0) << strerror(errno);
  std::fill(data.begin() + 1, data.begin() + 100000, '\0');
  data.resize(500000, '\0');
  std::fill(data.begin() + 250000, data.end(), '\0');
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), 500000u);
  std::string back(600000, 'Z');
  ASSERT_EQ(::pread(fd, back.data(), back.size(), 0), 500000);
  back.resize(500000);
  EXPECT_TRUE(back == data);
  ASSERT_EQ(::close(fd), 0);
  EXPECT_EQ(size_at_mds("/m_zero"), 500000u);
}

}  // namespace
}  // namespace surge::test
