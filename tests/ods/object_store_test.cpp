// ObjectStore on a real directory: every operation, holes, unaligned
// partial-block writes against an in-memory model, truncates across
// blocks, checksum upkeep and detection, the fd cache bound, and recovery
// of objects written but not synced before a crash.
#include "ods/store/object_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "common/crc32c.h"
#include "ods/store/block_checksum.h"
#include "tests/ods/store_open.h"
#include "tests/ods/test_dir.h"

namespace surge::ods {
namespace {

using testing::open_store;
using testing::TempDir;

std::vector<std::byte> pattern(size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

Result<uint64_t> write_bytes(ObjectStore& s, uint64_t id, uint64_t off, const std::vector<std::byte>& d,
                             bool sync = false) {
  iovec v{const_cast<std::byte*>(d.data()), d.size()};
  return s.write(id, off, {&v, 1}, sync);
}

std::vector<std::byte> read_bytes(ObjectStore& s, uint64_t id, uint64_t off, size_t n) {
  std::vector<std::byte> out(n);
  auto r = s.read(id, off, out);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  out.resize(*r);
  return out;
}

void flip_byte(const std::string& path, uint64_t off) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  unsigned char c;
  ASSERT_EQ(::pread(fd, &c, 1, static_cast<off_t>(off)), 1);
  c ^= 0x5a;
  ASSERT_EQ(::pwrite(fd, &c, 1, static_cast<off_t>(off)), 1);
  ::close(fd);
}

size_t open_fds() {
  size_t n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

TEST(ObjectStore, WriteThenReadReturnsTheSameBytes) {
  TempDir dir;
  auto s = open_store(dir.path());
  auto data = pattern(1 << 20, 1);
  auto size = write_bytes(*s, 7, 0, data);
  ASSERT_TRUE(size.ok()) << size.status().ToString();
  EXPECT_EQ(*size, data.size());
  EXPECT_EQ(read_bytes(*s, 7, 0, data.size()), data);
}

TEST(ObjectStore, HolesReadAsZeros) {
  TempDir dir;
  auto s = open_store(dir.path());
  auto data = pattern(5000, 2);
  ASSERT_TRUE(write_bytes(*s, 9, 3 * kBlockSize + 100, data).ok());
  auto got = read_bytes(*s, 9, 0, 3 * kBlockSize + 100 + data.size());
  ASSERT_EQ(got.size(), 3 * kBlockSize + 100 + data.size());
  for (size_t i = 0; i < 3 * kBlockSize + 100; ++i) ASSERT_EQ(got[i], std::byte{0}) << i;
  EXPECT_TRUE(std::equal(data.begin(), data.end(), got.begin() + 3 * kBlockSize + 100));
}

TEST(ObjectStore, ReadsPastTheEndAreShortAndMissingObjectsEmpty) {
  TempDir dir;
  auto s = open_store(dir.path());
  auto data = pattern(10000, 3);
  ASSERT_TRUE(write_bytes(*s, 3, 0, data).ok());
  EXPECT_EQ(read_bytes(*s, 3, 9000, 5000).size(), 1000u);
  EXPECT_EQ(read_bytes(*s, 3, 10000, 5000).size(), 0u);
  EXPECT_EQ(read_bytes(*s, 3, 1 << 30, 10).size(), 0u);
  EXPECT_EQ(read_bytes(*s, 12345, 0, 100).size(), 0u);
}

TEST(ObjectStore, UnalignedPartialBlockWritesMatchAModel) {
  TempDir dir;
  auto s = open_store(dir.path());
  std::vector<std::byte> model;
  std::mt19937 rng(42);
  for (int i = 0; i < 300; ++i) {
    uint64_t off = rng() % (6 * kBlockSize);
    size_t len = 1 + rng() % (2 * kBlockSize + 77);
    auto d = pattern(len, static_cast<uint32_t>(i + 100));
    ASSERT_TRUE(write_bytes(*s, 11, off, d).ok());
    if (model.size() < off + len) model.resize(off + len);
    std::copy(d.begin(), d.end(), model.begin() + static_cast<long>(off));
    if (i % 10 == 0) {
      uint64_t roff = rng() % model.size();
      size_t rlen = 1 + rng() % (3 * kBlockSize);
      auto got = read_bytes(*s, 11, roff, rlen);
      size_t expect = std::min<size_t>(rlen, model.size() - roff);
      ASSERT_EQ(got.size(), expect);
      ASSERT_TRUE(std::equal(got.begin(), got.end(), model.begin() + static_cast<long>(roff))) << i;
    }
  }
  EXPECT_EQ(read_bytes(*s, 11, 0, model.size() + 10), model);
  EXPECT_TRUE(s->verify(11).ok());
}

// A small write to a fresh object (what cp and untar make per file) reads
// nothing back: its one partial block lies past the old end, so it holds
// zeros by definition. A partial block that holds data is still read,
// verified and merged.
TEST(ObjectStore, PartialBlocksPastTheEndAreNotReadBack) {
  TempDir dir;
  auto s = open_store(dir.path());
  std::vector<std::vector<std::byte>> model(65);
  for (uint64_t id = 1; id <= 64; ++id) {
    model[id] = pattern(100, static_cast<uint32_t>(id));
    ASSERT_TRUE(write_bytes(*s, id, 0, model[id]).ok());
  }
  EXPECT_EQ(s->blocks_read_back(), 0u);
  // Appends that start a new block past the end: nothing to read either.
  auto far = pattern(10, 200);
  ASSERT_TRUE(write_bytes(*s, 1, 5000, far).ok());
  model[1].resize(5010);
  std::copy(far.begin(), far.end(), model[1].begin() + 5000);
  EXPECT_EQ(s->blocks_read_back(), 0u);
  // The block holding the old end (bytes 0..99 of object 2), and a block
  // inside the data (object 1's first), are read and merged.
  auto tail = pattern(50, 201);
  ASSERT_TRUE(write_bytes(*s, 2, 100, tail).ok());
  model[2].insert(model[2].end(), tail.begin(), tail.end());
  auto mid = pattern(10, 202);
  ASSERT_TRUE(write_bytes(*s, 1, 50, mid).ok());
  std::copy(mid.begin(), mid.end(), model[1].begin() + 50);
  EXPECT_EQ(s->blocks_read_back(), 2u);
  for (uint64_t id = 1; id <= 64; ++id) {
    EXPECT_EQ(read_bytes(*s, id, 0, 8192), model[id]) << "object " << id;
    EXPECT_TRUE(s->verify(id).ok()) << "object " << id;
  }
}

// Creating an object in a fan-out directory the store knows exists makes
// no mkdir: only the first object of a directory pays for it (a new
// process learns each directory once). A directory removed behind the
// store's back is made again.
TEST(ObjectStore, ObjectsInAKnownFanoutDirectoryMakeNoMkdir) {
  TempDir dir;
  {
    auto s = open_store(dir.path());
    ASSERT_TRUE(write_bytes(*s, 7, 0, pattern(100, 1)).ok());
    EXPECT_EQ(s->fanout_mkdirs(), 2u);  // both levels, once
    ASSERT_TRUE(s->sync({}).ok());
    ASSERT_TRUE(s->remove(7).ok());
    ASSERT_TRUE(write_bytes(*s, 7, 0, pattern(100, 2)).ok());
    EXPECT_EQ(s->fanout_mkdirs(), 2u);
    ASSERT_TRUE(s->sync({}).ok());
  }
  auto s = open_store(dir.path());  // a new process finds the directory on disk
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(s->remove(7).ok());
    ASSERT_TRUE(write_bytes(*s, 7, 0, pattern(100, 3)).ok());
  }
  EXPECT_LE(s->fanout_mkdirs(), 2u);  // the first round's, none after
  const std::string leaf = s->data_path(7).substr(0, s->data_path(7).rfind('/'));
  ASSERT_TRUE(s->remove(7).ok());
  std::filesystem::remove_all(leaf.substr(0, leaf.rfind('/')));
  auto d = pattern(100, 4);
  ASSERT_TRUE(write_bytes(*s, 7, 0, d).ok());
  EXPECT_EQ(read_bytes(*s, 7, 0, 200), d);
  ASSERT_TRUE(s->sync({}).ok());
}

TEST(ObjectStore, SidecarHoldsOneCrcPerBlockOfTheData) {
  TempDir dir;
  auto s = open_store(dir.path());
  auto data = pattern(3 * kBlockSize + 10, 5);
  ASSERT_TRUE(write_bytes(*s, 4, 0, data).ok());
  int fd = ::open(s->crc_path(4).c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  uint32_t stored[4];
  ASSERT_EQ(::pread(fd, stored, sizeof stored, 0), static_cast<ssize_t>(sizeof stored));
  ::close(fd);
  for (int b = 0; b < 4; ++b) {
    std::vector<std::byte> block(kBlockSize, std::byte{0});
    size_t n = std::min<size_t>(kBlockSize, data.size() - b * kBlockSize);
    std::copy_n(data.begin() + b * kBlockSize, n, block.begin());
    EXPECT_EQ(decode_block_crc(stored[b]), surge::crc32c(block.data(), kBlockSize)) << b;
  }
}

TEST(PayloadChecksums, OnePassGivesThePayloadCrcAndEachWholeBlocksCrc) {
  auto d = pattern(5 * kBlockSize + 300, 41);
  // Split over two segments, cut inside a block.
  iovec v[2] = {{d.data(), 3000}, {d.data() + 3000, d.size() - 3000}};
  for (uint64_t off : {uint64_t{0}, uint64_t{100}, kBlockSize - 1, 7 * kBlockSize}) {
    PayloadChecksums sums = checksum_payload(v, off);
    EXPECT_EQ(sums.payload, surge::crc32c(d.data(), d.size())) << "offset " << off;
    EXPECT_EQ(sums.first_block, off / kBlockSize);
    ASSERT_EQ(sums.full_block.size(), (off + d.size() - 1) / kBlockSize - off / kBlockSize + 1);
    for (uint64_t b = sums.first_block; b < sums.first_block + sums.full_block.size(); ++b) {
      const uint64_t bs = b * kBlockSize;
      const bool whole = bs >= off && bs + kBlockSize <= off + d.size();
      const uint32_t want = whole ? surge::crc32c(d.data() + (bs - off), kBlockSize) : 0;
      EXPECT_EQ(sums.full_block[b - sums.first_block], want) << "offset " << off << " block " << b;
    }
  }
}

TEST(ObjectStore, WriteWithPrecomputedChecksumsKeepsEveryBlockVerifiable) {
  TempDir dir;
  auto s = open_store(dir.path() + "/store");
  auto old = pattern(6 * kBlockSize, 42);
  ASSERT_TRUE(write_bytes(*s, 7, 0, old).ok());
  auto d = pattern(4 * kBlockSize + 10, 43);
  iovec v{d.data(), d.size()};
  const uint64_t off = 2000;  // partial first and last blocks, whole ones between
  PayloadChecksums sums = checksum_payload({&v, 1}, off);
  ASSERT_TRUE(s->write(7, off, {&v, 1}, false, &sums).ok());
  EXPECT_TRUE(s->verify(7).ok());
  std::memcpy(old.data() + off, d.data(), d.size());
  EXPECT_EQ(read_bytes(*s, 7, 0, old.size()), old);
}

TEST(ObjectStore, ReadGivesTheCrcOfWhatItReturned) {
  TempDir dir;
  auto s = open_store(dir.path() + "/store");
  auto d = pattern(5 * kBlockSize + 123, 44);
  ASSERT_TRUE(write_bytes(*s, 8, kBlockSize, d).ok());  // block 0 is a hole
  const uint64_t size = kBlockSize + d.size();
  struct Range {
    uint64_t off, len;
  };
  for (Range r : {Range{0, size}, Range{1, 3 * kBlockSize}, Range{kBlockSize, 2 * kBlockSize},
                  Range{kBlockSize + 5, 10}, Range{size - 200, 4096}, Range{100, 100}}) {
    std::vector<std::byte> out(r.len);
    uint32_t crc = 0x12345678;  // chained onto
    auto got = s->read(8, r.off, out, &crc);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(crc, surge::crc32c(out.data(), *got, 0x12345678))
        << "read of " << r.len << " at " << r.off;
  }
}

TEST(ObjectStore, TruncateDownAndUpAcrossBlocksKeepsDataAndChecksums) {
  TempDir dir;
  auto s = open_store(dir.path());
  auto data = pattern(5 * kBlockSize + 300, 6);
  ASSERT_TRUE(write_bytes(*s, 5, 0, data).ok());
  ASSERT_TRUE(s->truncate(5, 2 * kBlockSize + 17).ok());
  EXPECT_EQ(*s->stat(5), 2 * kBlockSize + 17);
  EXPECT_TRUE(s->verify(5).ok());
  ASSERT_TRUE(s->truncate(5, 4 * kBlockSize + 1).ok());
  EXPECT_EQ(*s->stat(5), 4 * kBlockSize + 1);
  EXPECT_TRUE(s->verify(5).ok());
  auto got = read_bytes(*s, 5, 0, 10 * kBlockSize);
  ASSERT_EQ(got.size(), 4 * kBlockSize + 1);
  EXPECT_TRUE(std::equal(got.begin(), got.begin() + 2 * kBlockSize + 17, data.begin()));
  for (size_t i = 2 * kBlockSize + 17; i < got.size(); ++i) ASSERT_EQ(got[i], std::byte{0}) << i;
  // Writing into the regrown tail merges with zeros, not the old bytes.
  auto more = pattern(100, 7);
  ASSERT_TRUE(write_bytes(*s, 5, 3 * kBlockSize, more).ok());
  EXPECT_TRUE(s->verify(5).ok());
  ASSERT_TRUE(s->truncate(5, 0).ok());
  EXPECT_EQ(*s->stat(5), 0u);
  EXPECT_EQ(read_bytes(*s, 5, 0, 100).size(), 0u);
}

TEST(ObjectStore, TruncateOfAMissingObjectCreatesItOnlyWhenGrowing) {
  TempDir dir;
  auto s = open_store(dir.path());
  EXPECT_TRUE(s->truncate(21, 0).ok());
  EXPECT_EQ(s->stat(21).status().code(), Code::kNotFound);
  ASSERT_TRUE(s->truncate(21, 10000).ok());
  EXPECT_EQ(*s->stat(21), 10000u);
  auto got = read_bytes(*s, 21, 0, 20000);
  EXPECT_EQ(got, std::vector<std::byte>(10000, std::byte{0}));
}

TEST(ObjectStore, RemoveIsIdempotent) {
  TempDir dir;
  auto s = open_store(dir.path());
  ASSERT_TRUE(write_bytes(*s, 8, 0, pattern(100, 8)).ok());
  auto r1 = s->remove(8);
  ASSERT_TRUE(r1.ok());
  EXPECT_TRUE(*r1);
  auto r2 = s->remove(8);
  ASSERT_TRUE(r2.ok());
  EXPECT_FALSE(*r2);
  EXPECT_EQ(s->stat(8).status().code(), Code::kNotFound);
  EXPECT_NE(::access(s->data_path(8).c_str(), F_OK), 0);
  EXPECT_NE(::access(s->crc_path(8).c_str(), F_OK), 0);
}

TEST(ObjectStore, StatFsCountsObjectsAcrossReopen) {
  TempDir dir;
  {
    auto s = open_store(dir.path());
    for (uint64_t id = 1; id <= 5; ++id) ASSERT_TRUE(write_bytes(*s, id, 0, pattern(10, 1)).ok());
    ASSERT_TRUE(s->remove(2).ok());
    auto st = s->statfs();
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->objects, 4u);
    EXPECT_GT(st->capacity_bytes, 0u);
    EXPECT_LE(st->free_bytes, st->capacity_bytes);
  }
  auto s = open_store(dir.path());
  EXPECT_EQ(s->statfs()->objects, 4u);
}

TEST(ObjectStore, SyncedDataSurvivesReopen) {
  TempDir dir;
  auto data = pattern(200000, 9);
  {
    auto s = open_store(dir.path());
    ASSERT_TRUE(write_bytes(*s, 13, 777, data).ok());
    uint64_t ids[] = {13};
    ASSERT_TRUE(s->sync(ids).ok());
  }
  auto s = open_store(dir.path());
  EXPECT_EQ(read_bytes(*s, 13, 777, data.size()), data);
}

TEST(ObjectStore, FlippedDataByteFailsThatBlockOnly) {
  TempDir dir;
  auto s = open_store(dir.path());
  auto data = pattern(8 * kBlockSize, 10);
  ASSERT_TRUE(write_bytes(*s, 14, 0, data, true).ok());
  flip_byte(s->data_path(14), 3 * kBlockSize + 123);
  std::vector<std::byte> buf(kBlockSize);
  auto bad = s->read(14, 3 * kBlockSize, buf);
  EXPECT_EQ(bad.status().code(), Code::kCorruption);
  EXPECT_NE(bad.status().message().find("object 14"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find(std::to_string(3 * kBlockSize)), std::string::npos);
  // A read that only overlaps the bad block by one byte fails too.
  EXPECT_EQ(s->read(14, 3 * kBlockSize - 10, std::span(buf).first(11)).status().code(), Code::kCorruption);
  EXPECT_EQ(read_bytes(*s, 14, 0, 3 * kBlockSize),
            std::vector<std::byte>(data.begin(), data.begin() + 3 * kBlockSize));
  EXPECT_EQ(read_bytes(*s, 14, 4 * kBlockSize, 4 * kBlockSize),
            std::vector<std::byte>(data.begin() + 4 * kBlockSize, data.end()));
}

TEST(ObjectStore, PartialWriteIntoACorruptBlockIsRefusedAndFullOverwriteHeals) {
  TempDir dir;
  auto s = open_store(dir.path());
  ASSERT_TRUE(write_bytes(*s, 15, 0, pattern(2 * kBlockSize, 11)).ok());
  flip_byte(s->data_path(15), 10);
  EXPECT_EQ(write_bytes(*s, 15, 100, pattern(10, 12)).status().code(), Code::kCorruption);
  auto fresh = pattern(kBlockSize, 13);
  ASSERT_TRUE(write_bytes(*s, 15, 0, fresh).ok());
  EXPECT_EQ(read_bytes(*s, 15, 0, kBlockSize), fresh);
}

TEST(ObjectStore, FlippedChecksumIsDetected) {
  TempDir dir;
  auto s = open_store(dir.path());
  ASSERT_TRUE(write_bytes(*s, 16, 0, pattern(4 * kBlockSize, 14)).ok());
  flip_byte(s->crc_path(16), 2 * kCrcEntrySize + 1);
  std::vector<std::byte> buf(4 * kBlockSize);
  EXPECT_EQ(s->read(16, 0, buf).status().code(), Code::kCorruption);
  EXPECT_EQ(read_bytes(*s, 16, kBlockSize, kBlockSize).size(), kBlockSize);
}

TEST(ObjectStore, CorruptionInASyncedObjectSurvivesReopen) {
  TempDir dir;
  {
    auto s = open_store(dir.path());
    ASSERT_TRUE(write_bytes(*s, 17, 0, pattern(2 * kBlockSize, 15), true).ok());
    flip_byte(s->data_path(17), kBlockSize + 5);
  }
  auto s = open_store(dir.path());
  std::vector<std::byte> buf(kBlockSize);
  EXPECT_EQ(s->read(17, kBlockSize, buf).status().code(), Code::kCorruption);
}

TEST(ObjectStore, ScrubWalksEveryObjectAndNamesEveryBadBlock) {
  TempDir dir;
  auto s = open_store(dir.path());
  for (uint64_t id = 1; id <= 20; ++id) ASSERT_TRUE(write_bytes(*s, id, 0, pattern(3 * kBlockSize, 1)).ok());
  flip_byte(s->data_path(7), 2 * kBlockSize + 1);
  flip_byte(s->data_path(13), 0);
  flip_byte(s->crc_path(13), kCrcEntrySize + 2);
  ObjectStore::ScrubStats st;
  for (uint32_t d = 0; d < ObjectStore::kFanoutDirs; d += 4096) {
    ASSERT_TRUE(s->scrub(d, 4096, 100, st).ok());
  }
  EXPECT_EQ(st.objects, 20u);
  EXPECT_EQ(st.bytes, 20 * 3 * kBlockSize);
  std::sort(st.bad.begin(), st.bad.end());
  std::vector<std::pair<uint64_t, uint64_t>> want = {{7, 2 * kBlockSize}, {13, 0}, {13, kBlockSize}};
  EXPECT_EQ(st.bad, want);
}

TEST(ObjectStore, RejectsObjectZeroAndRangesPastTheMaximum) {
  TempDir dir;
  ObjectStoreOptions o;
  o.data_dir = dir.path();
  o.max_object_size = 1 << 20;
  auto s = std::move(ObjectStore::Open(o)).value();
  auto d = pattern(10, 1);
  EXPECT_EQ(write_bytes(*s, 0, 0, d).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(write_bytes(*s, 1, (1 << 20) - 5, d).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(write_bytes(*s, 1, ~uint64_t{0} - 2, d).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(s->truncate(1, (1 << 20) + 1).code(), Code::kInvalidArgument);
  std::vector<std::byte> buf(10);
  EXPECT_EQ(s->read(0, 0, buf).status().code(), Code::kInvalidArgument);
}

TEST(ObjectStore, FdCacheStaysBoundedOverManyObjects) {
  TempDir dir;
  auto s = open_store(dir.path(), 16);
  size_t before = open_fds();
  auto d = pattern(100, 1);
  for (uint64_t id = 1; id <= 300; ++id) ASSERT_TRUE(write_bytes(*s, id, 0, d).ok());
  for (uint64_t id = 1; id <= 300; ++id) ASSERT_EQ(read_bytes(*s, id, 0, 100), d);
  EXPECT_LE(s->open_objects(), 16u);
  EXPECT_LE(open_fds(), before + 16 * 2 + 2);
  // Evicted dirty objects still get synced (a few: syncs are slow).
  for (uint64_t id = 11; id <= 300; ++id) ASSERT_TRUE(s->remove(id).ok());
  EXPECT_TRUE(s->sync({}).ok());
  EXPECT_LE(open_fds(), before + 16 * 2 + 2);
}

// Threads whose first writes to new objects race (each its own unaligned
// slice; the cache small enough to evict under them) while other objects
// are removed: the objects are opened outside the cache's lock, and each
// must still be one file whose size and checksums every writer shares, so
// every byte reads back and scrub finds every block sound.
TEST(ObjectStore, RacingFirstWritesToNewObjectsShareEachObjectsFile) {
  TempDir dir;
  auto s = open_store(dir.path(), 16);
  constexpr int kThreads = 4;
  constexpr uint64_t kObjects = 60, kSlice = 5000, kDoomed = 200;
  for (uint64_t id = 1000; id < 1000 + kDoomed; ++id) {
    ASSERT_TRUE(write_bytes(*s, id, 0, pattern(100, 9)).ok());
  }
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  std::mutex first_mu;
  std::string first;  // the first failure
  auto failed = [&](const Status& st) {
    failures.fetch_add(1);
    std::lock_guard lk(first_mu);
    if (first.empty()) first = st.ToString();
  };
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t id = 1; id <= kObjects; ++id) {
        auto st =
            write_bytes(*s, id, t * kSlice, pattern(kSlice, static_cast<uint32_t>(id * 10 + t)));
        if (!st.ok()) failed(st.status());
      }
    });
  }
  threads.emplace_back([&] {
    for (uint64_t id = 1000; id < 1000 + kDoomed; ++id) {
      if (auto st = s->remove(id); !st.ok()) failed(st.status());
    }
  });
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0) << "the first: " << first;
  for (uint64_t id = 1; id <= kObjects; ++id) {
    std::vector<std::byte> want;
    for (int t = 0; t < kThreads; ++t) {
      auto part = pattern(kSlice, static_cast<uint32_t>(id * 10 + t));
      want.insert(want.end(), part.begin(), part.end());
    }
    ASSERT_EQ(read_bytes(*s, id, 0, kThreads * kSlice), want) << "object " << id;
  }
  ObjectStore::ScrubStats st;
  for (uint32_t d = 0; d < ObjectStore::kFanoutDirs; d += 4096) {
    ASSERT_TRUE(s->scrub(d, 4096, 1000, st).ok());
  }
  EXPECT_EQ(st.objects, kObjects);
  EXPECT_TRUE(st.bad.empty()) << st.bad.size() << " bad blocks, the first in object "
                              << st.bad.front().first;
}

// With o_direct, aligned IO from aligned buffers bypasses the page cache
// and unaligned IO stays buffered; both must agree byte for byte.
TEST(ObjectStore, ODirectMixesAlignedAndUnalignedIo) {
  TempDir dir;
  ObjectStoreOptions o;
  o.data_dir = dir.path();
  o.o_direct = true;
  auto s = std::move(ObjectStore::Open(o)).value();
  constexpr size_t kLen = 16 * kBlockSize;
  auto* aligned_buf = static_cast<std::byte*>(std::aligned_alloc(kBlockSize, kLen));
  auto src = pattern(kLen, 40);
  std::copy(src.begin(), src.end(), aligned_buf);
  iovec v{aligned_buf, kLen};
  ASSERT_TRUE(s->write(50, kBlockSize, {&v, 1}, true).ok());
  auto patch = pattern(777, 41);
  ASSERT_TRUE(write_bytes(*s, 50, 3 * kBlockSize + 5, patch).ok());
  std::copy(patch.begin(), patch.end(), src.begin() + 2 * kBlockSize + 5);
  std::memset(aligned_buf, 0, kLen);
  auto got = s->read(50, kBlockSize, std::span<std::byte>(aligned_buf, kLen));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(*got, kLen);
  EXPECT_TRUE(std::equal(src.begin(), src.end(), aligned_buf));
  std::free(aligned_buf);
  EXPECT_TRUE(s->verify(50).ok());
}

// The dirty log costs an fsync, so it is paid only where a torn write could
// spoil acknowledged bytes: objects with synced data, not brand-new ones.
TEST(ObjectStore, DirtyLogNamesOnlyObjectsThatWereSyncedBefore) {
  TempDir dir;
  auto log_size = [&] {
    struct stat sb {};
    ::stat((dir.path() + "/dirty.log").c_str(), &sb);
    return sb.st_size;
  };
  {
    auto s = open_store(dir.path());
    ASSERT_TRUE(write_bytes(*s, 1, 0, pattern(100, 1)).ok());
    ASSERT_TRUE(write_bytes(*s, 2, 0, pattern(100, 2)).ok());
    EXPECT_EQ(log_size(), 0);
    uint64_t ids[] = {1};
    ASSERT_TRUE(s->sync(ids).ok());
    ASSERT_TRUE(write_bytes(*s, 1, 100, pattern(100, 3)).ok());
    EXPECT_EQ(log_size(), 8) << "object 1 has synced data: its next write is logged";
    ASSERT_TRUE(write_bytes(*s, 2, 100, pattern(100, 4)).ok());
    EXPECT_EQ(log_size(), 8) << "object 2 was never synced";
  }
  EXPECT_EQ(log_size(), 0) << "a clean close empties the log";
  auto s = open_store(dir.path());
  ASSERT_TRUE(write_bytes(*s, 2, 0, pattern(10, 5)).ok());
  EXPECT_EQ(log_size(), 8) << "objects found on disk are logged on their first write";
}

TEST(ObjectStore, RefusesADirectoryOfAnotherFormat) {
  TempDir dir;
  { auto s = open_store(dir.path()); }
  FILE* f = std::fopen((dir.path() + "/FORMAT").c_str(), "w");
  std::fputs("surge-ods-store 1 block 65536\n", f);
  std::fclose(f);
  ObjectStoreOptions o;
  o.data_dir = dir.path();
  EXPECT_EQ(ObjectStore::Open(o).status().code(), Code::kCorruption);
}

TEST(ObjectStore, ReservedSpaceTurnsWritesIntoNoSpace) {
  TempDir dir;
  ObjectStoreOptions o;
  o.data_dir = dir.path();
  o.reserved_free_bytes = ~uint64_t{0} / 2;
  auto s = std::move(ObjectStore::Open(o)).value();
  EXPECT_EQ(write_bytes(*s, 1, 0, pattern(10, 1)).status().code(), Code::kNoSpace);
}

// A process that wrote and synced an object, then changed a block's data
// without its CRC (what a crash between the data and the CRC write leaves)
// and died without closing the store. On reopen the dirty log names the
// object, so the block is re-checksummed and the synced bytes read back.
TEST(ObjectStore, RecoveryRechecksumsObjectsInTheDirtyLog) {
  TempDir dir;
  auto data = pattern(3 * kBlockSize, 20);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto s = open_store(dir.path());
    if (!write_bytes(*s, 30, 0, data, true).ok()) ::_exit(1);
    // The unsynced write [kBlockSize + 100, +50): its bytes landed, its
    // CRC did not (put the old CRC of block 1 back).
    int cfd = ::open(s->crc_path(30).c_str(), O_RDWR);
    uint32_t old_crc = 0;
    if (::pread(cfd, &old_crc, 4, kCrcEntrySize) != 4) ::_exit(2);
    if (!write_bytes(*s, 30, kBlockSize + 100, std::vector<std::byte>(50, std::byte{'x'})).ok()) ::_exit(3);
    if (::pwrite(cfd, &old_crc, 4, kCrcEntrySize) != 4) ::_exit(4);
    ::_exit(0);  // no destructor: an unclean stop
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto s = open_store(dir.path());
  EXPECT_TRUE(s->verify(30).ok());
  auto got = read_bytes(*s, 30, 0, 3 * kBlockSize);
  ASSERT_EQ(got.size(), 3 * kBlockSize);
  EXPECT_TRUE(std::equal(got.begin(), got.begin() + kBlockSize + 100, data.begin()));
  EXPECT_TRUE(std::equal(got.begin() + kBlockSize + 150, got.end(), data.begin() + kBlockSize + 150));
}

}  // namespace
}  // namespace surge::ods
