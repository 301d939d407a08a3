// ObjectStore::fallocate on a real directory: punch, zero and reserve at
// block and object edges, checked byte for byte against a model, with every
// block's CRC verified after each step, the space the data file holds
// (st_blocks) and what survives a reopen.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <vector>

#include "ods/store/block_checksum.h"
#include "ods/store/object_store.h"
#include "tests/ods/store_open.h"
#include "tests/ods/test_dir.h"

namespace surge::ods {
namespace {

using testing::open_store;
using testing::TempDir;
using Op = ObjectStore::SpaceOp;

std::vector<std::byte> pattern(size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::byte>(rng() | 1);  // never zero
  return v;
}

void write_at(ObjectStore& s, uint64_t id, uint64_t off, const std::vector<std::byte>& d) {
  iovec v{const_cast<std::byte*>(d.data()), d.size()};
  auto r = s.write(id, off, {&v, 1}, false);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

std::vector<std::byte> read_all(ObjectStore& s, uint64_t id) {
  auto size = s.stat(id);
  EXPECT_TRUE(size.ok()) << size.status().ToString();
  std::vector<std::byte> out(size.ok() ? *size : 0);
  auto r = s.read(id, 0, out);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.ok() ? *r : 0, out.size());
  return out;
}

uint64_t blocks_held(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

TEST(ObjectFallocate, PunchWithUnalignedEdgesReadsZerosKeepsTheRestAndFreesBlocks) {
  TempDir dir;
  auto s = open_store(dir.path());
  auto data = pattern(1 << 20, 1);
  write_at(*s, 5, 0, data);
  ASSERT_TRUE(s->sync({}).ok());
  const uint64_t before = blocks_held(s->data_path(5));
  ASSERT_TRUE(s->fallocate(5, 1000, 600000, Op::kPunch, true).ok());
  std::fill(data.begin() + 1000, data.begin() + 601000, std::byte{0});
  EXPECT_EQ(read_all(*s, 5), data);
  EXPECT_TRUE(s->verify(5).ok());
  // The whole blocks inside the hole went back to the file system.
  EXPECT_LE(blocks_held(s->data_path(5)) + (600000 / kBlockSize - 2) * kBlockSize, before);
  // And so it stays after a reopen (CRCs on disk, not only in memory).
  s.reset();
  s = open_store(dir.path());
  EXPECT_EQ(read_all(*s, 5), data);
  EXPECT_TRUE(s->verify(5).ok());
}

TEST(ObjectFallocate, PunchInsideOneBlockAndAcrossTheObjectEndKeepsTheSize) {
  TempDir dir;
  auto s = open_store(dir.path());
  auto data = pattern(10000, 2);  // ends inside block 2
  write_at(*s, 6, 0, data);
  ASSERT_TRUE(s->fallocate(6, 4100, 10, Op::kPunch, true).ok());  // inside block 1
  ASSERT_TRUE(s->fallocate(6, 9000, 1 << 20, Op::kPunch, false).ok());  // past the end
  std::fill(data.begin() + 4100, data.begin() + 4110, std::byte{0});
  std::fill(data.begin() + 9000, data.end(), std::byte{0});
  EXPECT_EQ(*s->stat(6), 10000u);  // a punch never grows an object, keep_size or not
  EXPECT_EQ(read_all(*s, 6), data);
  EXPECT_TRUE(s->verify(6).ok());
  // Growing it afterwards reads zeros past the old end.
  ASSERT_TRUE(s->truncate(6, 20000).ok());
  data.resize(20000, std::byte{0});
  EXPECT_EQ(read_all(*s, 6), data);
  EXPECT_TRUE(s->verify(6).ok());
}

TEST(ObjectFallocate, PunchOfAMissingObjectCreatesNothing) {
  TempDir dir;
  auto s = open_store(dir.path());
  ASSERT_TRUE(s->fallocate(9, 0, 4096, Op::kPunch, true).ok());
  EXPECT_EQ(s->stat(9).status().code(), Code::kNotFound);
}

TEST(ObjectFallocate, ZeroRangeWithAndWithoutKeepSize) {
  TempDir dir;
  auto s = open_store(dir.path());
  auto data = pattern(20000, 3);
  write_at(*s, 7, 0, data);
  ASSERT_TRUE(s->fallocate(7, 5000, 3000, Op::kZero, true).ok());
  std::fill(data.begin() + 5000, data.begin() + 8000, std::byte{0});
  EXPECT_EQ(read_all(*s, 7), data);
  ASSERT_TRUE(s->fallocate(7, 15000, 100000, Op::kZero, true).ok());  // keep: no growth
  std::fill(data.begin() + 15000, data.end(), std::byte{0});
  EXPECT_EQ(read_all(*s, 7), data);
  ASSERT_TRUE(s->fallocate(7, 12345, 40000, Op::kZero, false).ok());  // grows to 52345
  data.resize(52345, std::byte{0});
  std::fill(data.begin() + 12345, data.end(), std::byte{0});
  EXPECT_EQ(read_all(*s, 7), data);
  EXPECT_TRUE(s->verify(7).ok());
  // The zeroed range stays allocated (unlike a punch).
  EXPECT_GE(blocks_held(s->data_path(7)), 52345u / kBlockSize * kBlockSize);
}

TEST(ObjectFallocate, ReserveAllocatesAndGrowsOnlyWithoutKeepSize) {
  TempDir dir;
  auto s = open_store(dir.path());
  ASSERT_TRUE(s->fallocate(11, 0, 1 << 20, Op::kReserve, true).ok());
  EXPECT_EQ(*s->stat(11), 0u);
  EXPECT_GE(blocks_held(s->data_path(11)), uint64_t{1} << 20);
  EXPECT_GE(blocks_held(s->crc_path(11)), (uint64_t{1} << 20) / kBlockSize * kCrcEntrySize);

  auto data = pattern(5000, 4);
  write_at(*s, 12, 0, data);
  ASSERT_TRUE(s->fallocate(12, 3000, 300000, Op::kReserve, false).ok());
  EXPECT_EQ(*s->stat(12), 303000u);
  data.resize(303000, std::byte{0});  // the bytes it held are untouched
  EXPECT_EQ(read_all(*s, 12), data);
  // A write into the reserved range reads back, CRCs and all.
  auto more = pattern(70000, 5);
  write_at(*s, 12, 100001, more);
  std::copy(more.begin(), more.end(), data.begin() + 100001);
  EXPECT_EQ(read_all(*s, 12), data);
  EXPECT_TRUE(s->verify(12).ok());
}

TEST(ObjectFallocate, APartlyCoveredCorruptBlockIsRefusedAndAWholeCoverHealsIt) {
  TempDir dir;
  auto s = open_store(dir.path());
  write_at(*s, 13, 0, pattern(3 * kBlockSize, 6));
  {
    int fd = ::open(s->data_path(13).c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    char c = 0x55;
    ASSERT_EQ(::pwrite(fd, &c, 1, 4096 + 7), 1);
    ::close(fd);
  }
  EXPECT_EQ(s->fallocate(13, 4096 + 100, 10, Op::kPunch, true).code(), Code::kCorruption);
  EXPECT_EQ(s->fallocate(13, 4096 + 100, 10, Op::kZero, true).code(), Code::kCorruption);
  ASSERT_TRUE(s->fallocate(13, 4096, 4096, Op::kPunch, true).ok());
  EXPECT_TRUE(s->verify(13).ok());
}

TEST(ObjectFallocate, RejectsObjectZeroEmptyRangesAndRangesPastTheMaximum) {
  TempDir dir;
  ObjectStoreOptions o;
  o.data_dir = dir.path();
  o.max_object_size = 1 << 20;
  auto s = std::move(ObjectStore::Open(o)).value();
  EXPECT_EQ(s->fallocate(0, 0, 10, Op::kReserve, false).code(), Code::kInvalidArgument);
  EXPECT_EQ(s->fallocate(1, 0, 0, Op::kReserve, false).code(), Code::kInvalidArgument);
  EXPECT_EQ(s->fallocate(1, (1 << 20) - 10, 11, Op::kZero, false).code(), Code::kInvalidArgument);
  EXPECT_EQ(s->fallocate(1, ~uint64_t{0}, 2, Op::kPunch, true).code(), Code::kInvalidArgument);
}

// Random writes, truncates, punches, zeroes and reservations of one object,
// against a model: every step reads back exactly and verifies every block.
TEST(ObjectFallocate, RandomMixMatchesAModel) {
  TempDir dir;
  auto s = open_store(dir.path());
  std::mt19937_64 rng(20261201);
  auto pick = [&](uint64_t n) { return rng() % n; };
  std::vector<std::byte> model;
  constexpr uint64_t kMax = 300000;
  for (int step = 0; step < 400; ++step) {
    const uint64_t off = pick(kMax);
    const uint64_t len = 1 + pick(std::min<uint64_t>(kMax - off, 3 * kBlockSize + 100));
    const uint64_t end = off + len;
    const int what = static_cast<int>(pick(6));
    const bool keep = pick(2) == 0;
    SCOPED_TRACE("step " + std::to_string(step) + " op " + std::to_string(what) + " [" +
                 std::to_string(off) + ", +" + std::to_string(len) + ") keep " + std::to_string(keep));
    switch (what) {
      case 0: {
        auto d = pattern(len, static_cast<uint32_t>(step));
        write_at(*s, 1, off, d);
        if (model.size() < end) model.resize(end, std::byte{0});
        std::copy(d.begin(), d.end(), model.begin() + static_cast<std::ptrdiff_t>(off));
        break;
      }
      case 1:
        ASSERT_TRUE(s->truncate(1, off).ok());
        model.resize(off, std::byte{0});
        break;
      case 2:
        ASSERT_TRUE(s->fallocate(1, off, len, Op::kPunch, true).ok());
        if (off < model.size()) {
          std::fill(model.begin() + static_cast<std::ptrdiff_t>(off),
                    model.begin() + static_cast<std::ptrdiff_t>(std::min<uint64_t>(end, model.size())),
                    std::byte{0});
        }
        break;
      case 3:
        ASSERT_TRUE(s->fallocate(1, off, len, Op::kZero, keep).ok());
        if (!keep && model.size() < end) model.resize(end, std::byte{0});
        if (off < model.size()) {
          std::fill(model.begin() + static_cast<std::ptrdiff_t>(off),
                    model.begin() + static_cast<std::ptrdiff_t>(std::min<uint64_t>(end, model.size())),
                    std::byte{0});
        }
        break;
      default:
        ASSERT_TRUE(s->fallocate(1, off, len, Op::kReserve, keep).ok());
        if (!keep && model.size() < end) model.resize(end, std::byte{0});
        break;
    }
    auto size = s->stat(1);
    if (model.empty() && !size.ok()) continue;  // punched before anything was there
    ASSERT_TRUE(size.ok()) << size.status().ToString();
    ASSERT_EQ(*size, model.size());
    ASSERT_TRUE(s->verify(1).ok());
    auto back = read_all(*s, 1);
    ASSERT_TRUE(back == model);
  }
}

}  // namespace
}  // namespace surge::ods
