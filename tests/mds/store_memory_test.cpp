// RocksKvStore's memtables stay within RocksKvOptions::memtable_bytes
// (docs/operations.md, "MDS memory"): a real RocksDB in a temp dir takes
// 48 MiB of distinct keys in one space, as the MDS's inode space takes its
// records. With RocksDB's defaults (64 MiB write buffers, and
// OptimisticTransactionDB's 128 MiB of flushed memtables kept per space)
// all 48 MiB stay in memory; bounded, they are flushed and let go. (Not
// all of the MDS's growth in a soak: docs/operations.md, "MDS memory".)
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "mds/kv/rocksdb_kv_store.h"

namespace surge::mds {
namespace {

class StoreMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/surge-store-memory-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(StoreMemory, MemtablesStayWithinTheirBoundUnderManyWrites) {
  RocksKvOptions o;
  o.path = dir_ + "/db";
  o.sync = false;
  o.memtable_bytes = 8 << 20;
  auto kv = RocksKvStore::Open(o);
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  const std::string value(1000, 'v');
  constexpr int kBatches = 192, kPerBatch = 256;  // 48 MiB of values
  uint64_t most = 0;
  for (int b = 0; b < kBatches; ++b) {
    KvBatch batch;
    for (int i = 0; i < kPerBatch; ++i) {
      batch.put(Space::kInodes, "inode/" + std::to_string(b * kPerBatch + i), value);
    }
    Status st = (*kv)->commit(batch, /*durable=*/false);
    ASSERT_TRUE(st.ok()) << st.ToString();
    most = std::max(most, (*kv)->memtable_bytes());
  }
  // The write buffer of the space (a quarter), one being flushed and one
  // kept as history: well under the whole bound, far under the 48 MiB.
  EXPECT_LE(most, o.memtable_bytes) << "memtables held " << most << " bytes at most";
  EXPECT_GT(most, 0u);
}

}  // namespace
}  // namespace surge::mds
