// RocksKvStore: KvStore on an embedded RocksDB, one column family per Space.
// Batches commit through an optimistic transaction (the checks become
// GetForUpdate + validation at commit). Durable commits use a synced WAL
// write (RocksDB group-commits concurrent sync writers); deferred ones are
// written unsynced and make_durable() syncs the WAL, one fsync shared by
// every caller waiting at that moment (our own group commit, so the
// namespace can release its directory locks before the fsync).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mds/kv/kv_store.h"

namespace surge::mds {

struct RocksKvOptions {
  std::string path;
  bool sync = true;  // fsync the WAL on every commit
  bool create_if_missing = true;
  size_t block_cache_bytes = 64 << 20;
  // Every memtable together, unflushed and kept after a flush (docs/
  // operations.md, "MDS memory"): each space's write buffer is a quarter of
  // it, and the flushed memtables kept for the optimistic transactions'
  // conflict checks are bounded by one write buffer per space. RocksDB's
  // own defaults (64 MiB per buffer, 2 buffers and 128 MiB of history per
  // space, 5 column families) let the memtables grow to about 1.25 GiB.
  size_t memtable_bytes = 32 << 20;
  // Spaces whose keys are counted exactly (count_keys): read through once
  // at open (about a second per million inodes), then followed by the
  // deltas committed batches declare. The namespace declares its inodes'.
  std::vector<Space> counted = {Space::kInodes};
};

class RocksKvStore : public KvStore {
 public:
  static Result<std::unique_ptr<RocksKvStore>> Open(const RocksKvOptions& options);
  ~RocksKvStore() override;

  Result<std::optional<std::string>> get(Space s, std::string_view key) override;
  Status scan(Space s, std::string_view begin, std::string_view end, const ScanFn& fn) override;
  Status commit(const KvBatch& batch, bool durable = true) override;
  Status make_durable() override;
  uint64_t estimate_keys(Space s) override;
  Result<uint64_t> count_keys(Space s) override;
  bool reads_are_local() const override { return true; }

  // Write-ahead log syncs (fsyncs) since open, from RocksDB's statistics
  // (tickers only, no timers), for the /metrics page.
  uint64_t wal_syncs() const;
  // Bytes RocksDB holds in memtables (active, unflushed and kept history)
  // and in its block cache now.
  uint64_t memtable_bytes() const;
  uint64_t block_cache_bytes() const;

  // Flushes memtables and closes the DB (also done by the destructor).
  Status close();

 private:
  struct Impl;
  explicit RocksKvStore(std::unique_ptr<Impl> impl);
  // After a commit: the counted spaces follow the batch's declared deltas.
  void follow_counts(const KvBatch& batch);
  std::unique_ptr<Impl> impl_;
};

}  // namespace surge::mds
