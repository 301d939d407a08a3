// A reservation holds on a full disk: ObjectStore on a tmpfs of a few MiB
// (mounted for the test; needs root, fails loudly without), a range
// reserved with fallocate, the disk then filled by another object until it
// says NoSpace, and the reserved range still written in full and read back.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <vector>

#include "ods/store/object_store.h"
#include "tests/ods/test_dir.h"

namespace surge::ods {
namespace {

using testing::TempDir;

class SmallTmpfs {
 public:
  SmallTmpfs(const std::string& path, const std::string& size) : path_(path) {
    std::filesystem::create_directories(path);
    std::string opts = "size=" + size;
    if (::mount("tmpfs", path.c_str(), "tmpfs", 0, opts.c_str()) != 0) {
      throw std::runtime_error("mount tmpfs on " + path + " (needs root): " + std::strerror(errno));
    }
  }
  ~SmallTmpfs() { ::umount2(path_.c_str(), MNT_DETACH); }

 private:
  std::string path_;
};

std::vector<std::byte> pattern(size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

Status write_at(ObjectStore& s, uint64_t id, uint64_t off, const std::vector<std::byte>& d) {
  iovec v{const_cast<std::byte*>(d.data()), d.size()};
  return s.write(id, off, {&v, 1}, false).status();
}

TEST(ObjectFallocateFullDisk, AReservedRangeIsWrittenAfterTheDiskFilledUp) {
  TempDir dir;
  SmallTmpfs fs(dir.path() + "/small", "8m");
  ObjectStoreOptions o;
  o.data_dir = dir.path() + "/small/data";
  auto s = std::move(ObjectStore::Open(o)).value();
  constexpr uint64_t kReserved = 2 << 20;
  ASSERT_TRUE(s->fallocate(1, 0, kReserved, ObjectStore::SpaceOp::kReserve, false).ok());
  // Fill the rest until the disk says no.
  Status last;
  for (uint64_t off = 0; off < (16u << 20); off += 256 << 10) {
    last = write_at(*s, 2, off, pattern(256 << 10, static_cast<uint32_t>(off)));
    if (!last.ok()) break;
  }
  ASSERT_EQ(last.code(), Code::kNoSpace) << last.ToString();
  // A failed write gives its extension back: fill that too, a page at a time.
  for (uint64_t off = *s->stat(2);; off += 4096) {
    last = write_at(*s, 2, off, pattern(4096, static_cast<uint32_t>(off)));
    if (!last.ok()) break;
  }
  ASSERT_EQ(last.code(), Code::kNoSpace) << last.ToString();
  EXPECT_EQ(write_at(*s, 3, 0, pattern(4096, 7)).code(), Code::kNoSpace)
      << "the disk should be full for anything not reserved";
  // The reserved range takes its bytes all the same, CRCs included.
  auto data = pattern(kReserved, 9);
  for (uint64_t off = 0; off < kReserved; off += 256 << 10) {
    std::vector<std::byte> piece(data.begin() + static_cast<std::ptrdiff_t>(off),
                                 data.begin() + static_cast<std::ptrdiff_t>(off + (256 << 10)));
    Status st = write_at(*s, 1, off, piece);
    ASSERT_TRUE(st.ok()) << "offset " << off << ": " << st.ToString();
  }
  std::vector<std::byte> back(kReserved);
  auto n = s->read(1, 0, back);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, kReserved);
  EXPECT_TRUE(back == data);
  EXPECT_TRUE(s->verify(1).ok());
}

}  // namespace
}  // namespace surge::ods
