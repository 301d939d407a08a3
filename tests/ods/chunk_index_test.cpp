// ChunkIndex (ods/store/chunk_index.h) over a real RocksDB: records keep
// their versions across a reopen, listing is by chain in key order from a
// cursor, a chunk that moves chain leaves its old chain's listing, object
// ids are never handed out twice (a reopen included), and a database of
// another format is refused; records of format 1 (before truncate
// generations) and 2 (before EC parity versions) still read.
#include <gtest/gtest.h>

#include <rocksdb/db.h>

#include "ods/store/chunk_index.h"
#include "tests/ods/test_dir.h"

namespace surge::ods::testing {
namespace {

ChunkRecord rec(uint32_t chain, uint64_t v, uint64_t c, uint64_t id) {
  ChunkRecord r;
  r.chain_id = chain;
  r.version = v;
  r.committed_version = c;
  r.object_id = id;
  return r;
}

TEST(ChunkIndexTest, RecordsSurviveAReopen) {
  TempDir dir;
  {
    auto ix = ChunkIndex::Open(dir.path() + "/ix");
    ASSERT_TRUE(ix.ok()) << ix.status().ToString();
    ChunkRecord r = rec(7, 5, 4, 99);
    r.incomplete = true;
    r.truncate_seq = 12;
    ASSERT_TRUE((*ix)->put({10, 2, 0}, r, true).ok());
  }
  auto ix = ChunkIndex::Open(dir.path() + "/ix");
  ASSERT_TRUE(ix.ok()) << ix.status().ToString();
  auto got = (*ix)->get({10, 2, 0});
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->chain_id, 7u);
  EXPECT_EQ((*got)->version, 5u);
  EXPECT_EQ((*got)->committed_version, 4u);
  EXPECT_TRUE((*got)->incomplete);
  EXPECT_TRUE((*got)->dirty());
  EXPECT_EQ((*got)->object_id, 99u);
  EXPECT_EQ((*got)->truncate_seq, 12u);
  auto none = (*ix)->get({10, 3, 0});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(ChunkIndexTest, ListingIsByChainInKeyOrderFromACursor) {
  TempDir dir;
  auto ix = ChunkIndex::Open(dir.path() + "/ix");
  ASSERT_TRUE(ix.ok());
  for (uint64_t ino : {30, 10, 20}) ASSERT_TRUE((*ix)->put({ino, 0, 0}, rec(1, 1, 1, ino), false).ok());
  ASSERT_TRUE((*ix)->put({15, 0, 0}, rec(2, 1, 1, 15), false).ok());
  auto page = (*ix)->list(1, std::nullopt, 2);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].first.ino, 10u);
  EXPECT_EQ((*page)[1].first.ino, 20u);
  page = (*ix)->list(1, (*page)[1].first, 10);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].first.ino, 30u);
  // A chunk that moves chain leaves the old chain's listing.
  ASSERT_TRUE((*ix)->put({15, 0, 0}, rec(1, 2, 2, 15), false, 2).ok());
  EXPECT_TRUE((*ix)->list(2, std::nullopt, 10)->empty());
  EXPECT_EQ((*ix)->list(1, std::nullopt, 10)->size(), 4u);
  ASSERT_TRUE((*ix)->erase({15, 0, 0}, 1, false).ok());
  EXPECT_EQ((*ix)->list(1, std::nullopt, 10)->size(), 3u);
}

TEST(ChunkIndexTest, ObjectIdsAreNeverHandedOutTwice) {
  TempDir dir;
  uint64_t last = 0;
  {
    auto ix = ChunkIndex::Open(dir.path() + "/ix");
    ASSERT_TRUE(ix.ok());
    for (int i = 0; i < 3; ++i) {
      auto id = (*ix)->allocate_object_id();
      ASSERT_TRUE(id.ok());
      EXPECT_GT(*id, last);
      last = *id;
    }
  }
  auto ix = ChunkIndex::Open(dir.path() + "/ix");
  ASSERT_TRUE(ix.ok());
  auto id = (*ix)->allocate_object_id();
  ASSERT_TRUE(id.ok());
  EXPECT_GT(*id, last) << "an id handed out before the reopen came again";
}

// Appends v as n big-endian bytes, as the index stores its fields.
void be(std::string& s, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// A fresh index in dir/ix holding one record of an older format, written
// behind ChunkIndex's back: key {ino, slot, position} -> value.
void put_old_record(const std::string& dir, uint64_t ino, uint32_t slot, uint32_t position,
                    const std::string& value) {
  {
    auto ix = ChunkIndex::Open(dir + "/ix");
    ASSERT_TRUE(ix.ok()) << ix.status().ToString();
  }
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir + "/ix", &db).ok());
  std::string key = "k";
  be(key, ino, 8);
  be(key, slot, 4);
  be(key, position, 4);
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), key, value).ok());
  delete db;
}

// Format 2's fields (chain 7, version and committed 6, complete, object
// 99, truncate generation 4) behind the given format byte: a format 2
// record, or the start of a format 3 one.
std::string format_two_fields(char format) {
  std::string value(1, format);
  be(value, 7, 4);
  be(value, 6, 8);
  be(value, 6, 8);
  value.push_back(0);
  be(value, 99, 8);
  be(value, 4, 8);
  return value;
}

// A record as a data server of format 1 wrote it: "k" ino slot position ->
// format byte 1, chain, version, committed, incomplete, object id.
TEST(ChunkIndexTest, AFormatOneRecordReadsAsGenerationZero) {
  TempDir dir;
  std::string value(1, '\x01');
  be(value, 7, 4);
  be(value, 5, 8);
  be(value, 5, 8);
  value.push_back(0);
  be(value, 99, 8);
  ASSERT_NO_FATAL_FAILURE(put_old_record(dir.path(), 10, 2, 0, value));
  auto ix = ChunkIndex::Open(dir.path() + "/ix");
  ASSERT_TRUE(ix.ok()) << ix.status().ToString();
  auto got = (*ix)->get({10, 2, 0});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->chain_id, 7u);
  EXPECT_EQ((*got)->version, 5u);
  EXPECT_EQ((*got)->object_id, 99u);
  EXPECT_EQ((*got)->truncate_seq, 0u);
  // Written back in the current format, it keeps a generation.
  ChunkRecord r = **got;
  r.truncate_seq = 3;
  ASSERT_TRUE((*ix)->put({10, 2, 0}, r, false).ok());
  got = (*ix)->get({10, 2, 0});
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->truncate_seq, 3u);
}

// A record as a data server of format 2 wrote it (format 1's fields and
// the truncate generation): read with no applied versions, written back
// with them.
TEST(ChunkIndexTest, AFormatTwoRecordReadsWithoutAppliedVersions) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(put_old_record(dir.path(), 10, 2, 5, format_two_fields('\x02')));
  auto ix = ChunkIndex::Open(dir.path() + "/ix");
  ASSERT_TRUE(ix.ok()) << ix.status().ToString();
  auto got = (*ix)->get({10, 2, 5});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->version, 6u);
  EXPECT_EQ((*got)->truncate_seq, 4u);
  EXPECT_EQ((*got)->applied_count, 0u);
  ChunkRecord r = **got;
  r.applied_count = 3;
  r.applied[0] = 3;
  r.applied[2] = uint64_t{1} << 40;
  ASSERT_TRUE((*ix)->put({10, 2, 5}, r, false).ok());
  got = (*ix)->get({10, 2, 5});
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->applied_count, 3u);
  EXPECT_EQ((*got)->applied, r.applied);
  EXPECT_EQ((*got)->truncate_seq, 4u);
}

// A record as a data server of format 3 wrote it (format 2's fields, a
// count and the applied versions): read with truncate generation 0 beside
// each applied version, written back with the generations.
TEST(ChunkIndexTest, AFormatThreeRecordReadsWithoutAppliedTruncates) {
  TempDir dir;
  std::string value = format_two_fields('\x03');
  value.push_back(2);
  be(value, 11, 8);
  be(value, 12, 8);
  ASSERT_NO_FATAL_FAILURE(put_old_record(dir.path(), 10, 2, 2, value));
  auto ix = ChunkIndex::Open(dir.path() + "/ix");
  ASSERT_TRUE(ix.ok()) << ix.status().ToString();
  auto got = (*ix)->get({10, 2, 2});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value());
  ASSERT_EQ((*got)->applied_count, 2u);
  EXPECT_EQ((*got)->applied[0], 11u);
  EXPECT_EQ((*got)->applied[1], 12u);
  EXPECT_EQ((*got)->applied_truncate[0], 0u);
  EXPECT_EQ((*got)->applied_truncate[1], 0u);
  ChunkRecord r = **got;
  r.applied_truncate[1] = 5;
  ASSERT_TRUE((*ix)->put({10, 2, 2}, r, false).ok());
  got = (*ix)->get({10, 2, 2});
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status().ToString();
  EXPECT_EQ((*got)->applied, r.applied);
  EXPECT_EQ((*got)->applied_truncate, r.applied_truncate);
  EXPECT_EQ((*got)->truncate_seq, 4u);
}

TEST(ChunkIndexTest, AnotherFormatIsRefused) {
  TempDir dir;
  {
    rocksdb::Options o;
    o.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, dir.path() + "/ix", &db).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "format", "9").ok());
    delete db;
  }
  auto ix = ChunkIndex::Open(dir.path() + "/ix");
  ASSERT_FALSE(ix.ok());
  EXPECT_NE(ix.status().message().find("format 9"), std::string::npos) << ix.status().ToString();
}

}  // namespace
}  // namespace surge::ods::testing
