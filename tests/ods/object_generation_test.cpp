// Truncate generations of legacy objects (ods/store/object_generation.cpp)
// on a real directory: a truncate is applied once per generation, so a late
// one never cuts a write made after it; the record survives a reopen, goes
// with the object, and a damaged one is refused, never read as "none".
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <vector>

#include "ods/store/object_store.h"
#include "tests/ods/store_open.h"
#include "tests/ods/test_dir.h"

namespace surge::ods {
namespace {

using testing::open_store;
using testing::TempDir;

void write_bytes(ObjectStore& s, uint64_t id, uint64_t off, size_t n, char c) {
  std::vector<char> d(n, c);
  iovec v{d.data(), d.size()};
  auto r = s.write(id, off, {&v, 1}, false);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

uint64_t size_of(ObjectStore& s, uint64_t id) {
  auto r = s.stat(id);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : UINT64_MAX;
}

TEST(ObjectGenerationTest, AnObjectNeverTruncatedHasGenerationZeroAndNoRecord) {
  TempDir dir;
  auto s = open_store(dir.path());
  write_bytes(*s, 7, 0, 5000, 'a');
  auto g = s->truncate_generation(7);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->seq, 0u);
  EXPECT_NE(::access(s->generation_path(7).c_str(), F_OK), 0);
  auto none = s->truncate_generation(8);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->seq, 0u);
}

TEST(ObjectGenerationTest, ALateTruncateOfAnAppliedGenerationCutsNothing) {
  TempDir dir;
  auto s = open_store(dir.path());
  write_bytes(*s, 7, 0, 10000, 'a');
  // A writer that knew of truncate 1 (to 100) cut the object first...
  ASSERT_TRUE(s->apply_truncate(7, 1, 100, /*for_update=*/true).ok());
  EXPECT_EQ(size_of(*s, 7), 100u);
  write_bytes(*s, 7, 100, 900, 'b');
  // ... so the MDS's pass, coming after, leaves its write alone.
  ASSERT_TRUE(s->apply_truncate(7, 1, 100, /*for_update=*/false).ok());
  EXPECT_EQ(size_of(*s, 7), 1000u);
  // The same generation with any size: still nothing.
  ASSERT_TRUE(s->apply_truncate(7, 1, 0, false).ok());
  EXPECT_EQ(size_of(*s, 7), 1000u);
  // A newer one cuts.
  ASSERT_TRUE(s->apply_truncate(7, 2, 10, false).ok());
  EXPECT_EQ(size_of(*s, 7), 10u);
  auto g = s->truncate_generation(7);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->seq, 2u);
  EXPECT_EQ(g->size, 10u);
  EXPECT_TRUE(s->verify(7).ok());
}

TEST(ObjectGenerationTest, TheGenerationSurvivesAReopen) {
  TempDir dir;
  {
    auto s = open_store(dir.path());
    write_bytes(*s, 9, 0, 8192, 'a');
    ASSERT_TRUE(s->apply_truncate(9, 3, 4000, false).ok());
  }
  auto s = open_store(dir.path());
  auto g = s->truncate_generation(9);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->seq, 3u);
  EXPECT_EQ(g->size, 4000u);
  EXPECT_EQ(size_of(*s, 9), 4000u);
  EXPECT_TRUE(s->verify(9).ok()) << "the cut block's CRC";
}

TEST(ObjectGenerationTest, APassOverAMissingObjectCreatesNothingAWriterRecordsIt) {
  TempDir dir;
  auto s = open_store(dir.path());
  ASSERT_TRUE(s->apply_truncate(5, 1, 0, /*for_update=*/false).ok());
  EXPECT_EQ(s->stat(5).status().code(), Code::kNotFound);
  EXPECT_NE(::access(s->generation_path(5).c_str(), F_OK), 0);
  ASSERT_TRUE(s->apply_truncate(5, 1, 0, /*for_update=*/true).ok());
  write_bytes(*s, 5, 0, 300, 'c');
  ASSERT_TRUE(s->apply_truncate(5, 1, 0, false).ok());
  EXPECT_EQ(size_of(*s, 5), 300u) << "a late pass cut the write";
}

TEST(ObjectGenerationTest, RemovingTheObjectRemovesItsGeneration) {
  TempDir dir;
  auto s = open_store(dir.path());
  write_bytes(*s, 4, 0, 100, 'a');
  ASSERT_TRUE(s->apply_truncate(4, 1, 50, false).ok());
  ASSERT_EQ(::access(s->generation_path(4).c_str(), F_OK), 0);
  ASSERT_TRUE(s->remove(4).ok());
  EXPECT_NE(::access(s->generation_path(4).c_str(), F_OK), 0);
  auto g = s->truncate_generation(4);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->seq, 0u);
}

// A setstripe's removal of the old layout, late: what the new layout's
// writer made under the generation (the same object name) stays.
TEST(ObjectGenerationTest, ARemovalOfAnOlderGenerationSparesWhatTheNewOneWrote) {
  TempDir dir;
  auto s = open_store(dir.path());
  write_bytes(*s, 3, 0, 100, 'a');
  ASSERT_TRUE(s->apply_truncate(3, 2, 0, /*for_update=*/true).ok());
  write_bytes(*s, 3, 0, 50, 'b');
  auto kept = s->remove_older_than(3, 2);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_FALSE(*kept);
  EXPECT_EQ(size_of(*s, 3), 50u);
  // One the generation never reached goes.
  write_bytes(*s, 4, 0, 100, 'a');
  auto gone = s->remove_older_than(4, 2);
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_TRUE(*gone);
  EXPECT_EQ(s->stat(4).status().code(), Code::kNotFound);
}

TEST(ObjectGenerationTest, ADamagedRecordIsCorruptionNamingTheObject) {
  TempDir dir;
  std::string path;
  {
    auto s = open_store(dir.path());
    write_bytes(*s, 6, 0, 100, 'a');
    ASSERT_TRUE(s->apply_truncate(6, 1, 50, false).ok());
    path = s->generation_path(6);
  }
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(10);
    f.put('\x7f');
  }
  auto s = open_store(dir.path());
  auto g = s->truncate_generation(6);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Code::kCorruption);
  EXPECT_NE(g.status().ToString().find("object 6"), std::string::npos) << g.status().ToString();
  EXPECT_FALSE(s->apply_truncate(6, 2, 0, false).ok()) << "cut without knowing what was applied";
}

}  // namespace
}  // namespace surge::ods
