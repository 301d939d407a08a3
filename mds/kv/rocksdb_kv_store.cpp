// RocksKvStore implementation. See rocksdb_kv_store.h.
#include "mds/kv/rocksdb_kv_store.h"

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/statistics.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/optimistic_transaction_db.h>
#include <rocksdb/utilities/transaction.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "common/log.h"
#include "common/metrics/registry.h"
#include "common/rocksdb_tsan.h"

namespace surge::mds {
namespace {

constexpr std::array<const char*, kSpaceCount> kCfNames = {"inodes", "dentries", "xattrs",
                                                           "system"};

Status from_rocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return Status::OK();
  std::string m(what);
  m += ": ";
  m += s.ToString();
  if (s.IsBusy() || s.IsTryAgain()) return Status::Busy(std::move(m));
  if (s.IsCorruption()) return Status::Corruption(std::move(m));
  if (s.IsNoSpace()) return Status::NoSpace(std::move(m));
  if (s.IsNotFound()) return Status::NotFound(std::move(m));
  return Status::IOError(std::move(m));
}

}  // namespace

struct RocksKvStore::Impl {
  RocksKvOptions opts;
  rocksdb::OptimisticTransactionDB* txdb = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> cfs;
  rocksdb::WriteOptions wopts;         // durable commits
  rocksdb::WriteOptions wopts_nosync;  // deferred commits
  std::shared_ptr<rocksdb::Statistics> statistics;
  std::shared_ptr<rocksdb::Cache> block_cache;

  // Group sync: 'written' counts deferred commits; a make_durable() caller
  // waits until a sync that started after its call has finished.
  std::mutex sync_mu;
  std::condition_variable sync_cv;
  uint64_t sync_started = 0;  // generation of the last sync that began
  uint64_t sync_done = 0;     // generation of the last sync that finished
  uint64_t sync_waiters = 0;  // callers the next sync to begin covers (its batch)
  bool syncing = false;
  Status last_sync_status;

  // Keys of the counted spaces (RocksKvOptions::counted); -1: not counted.
  std::array<std::atomic<int64_t>, kSpaceCount> key_counts;

  rocksdb::ColumnFamilyHandle* cf(Space s) const { return cfs[static_cast<size_t>(s)]; }
  rocksdb::DB* db() const { return txdb->GetBaseDB(); }
};

namespace {

// Callers of make_durable() that one WAL sync made durable together.
metrics::Histogram& group_commit_batch() {
  static metrics::Histogram& h = metrics::Registry::global().histogram(
      "surge_mds_group_commit_batch_size",
      "Deferred commits made durable by one WAL sync (group commit).",
      metrics::Buckets::powers_of_two(10));
  return h;
}

}  // namespace

// Declared at open, so the page shows the histogram before the first sync.
RocksKvStore::RocksKvStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  (void)group_commit_batch();
}

RocksKvStore::~RocksKvStore() {
  (void)close();
}

Result<std::unique_ptr<RocksKvStore>> RocksKvStore::Open(const RocksKvOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->opts = options;
  rocksdb::Options dbo;
  dbo.create_if_missing = options.create_if_missing;
  dbo.create_missing_column_families = options.create_if_missing;
  dbo.IncreaseParallelism(2);
  // Many small concurrent synced writers: let them share one WAL write.
  dbo.enable_pipelined_write = false;
  dbo.allow_concurrent_memtable_write = true;
  dbo.paranoid_checks = true;
  unmerged_write_groups_under_tsan(dbo);
  // Tickers only (WAL syncs for /metrics): per-core counters, no timers.
  dbo.statistics = rocksdb::CreateDBStatistics();
  dbo.statistics->set_stats_level(rocksdb::StatsLevel::kExceptHistogramOrTimers);

  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  // The memtables' bound (RocksKvOptions::memtable_bytes): all of them
  // together through the write buffer manager, each space's buffer a
  // quarter, and the history of flushed ones kept for conflict checks
  // (OptimisticTransactionDB keeps max_write_buffer_number x
  // write_buffer_size unless told) one buffer. The MDS's transactions last
  // milliseconds, so one buffer of history covers them.
  const size_t memtables = std::max<size_t>(options.memtable_bytes, 4 << 20);
  dbo.db_write_buffer_size = memtables;
  rocksdb::ColumnFamilyOptions cfo(dbo);
  cfo.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  cfo.write_buffer_size = memtables / 4;
  cfo.max_write_buffer_number = 2;
  cfo.max_write_buffer_size_to_maintain = static_cast<int64_t>(memtables / 4);

  std::vector<rocksdb::ColumnFamilyDescriptor> descs;
  descs.emplace_back(rocksdb::kDefaultColumnFamilyName, cfo);
  for (const char* n : kCfNames) descs.emplace_back(n, cfo);
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::OptimisticTransactionDB* txdb = nullptr;
  rocksdb::Status s =
      rocksdb::OptimisticTransactionDB::Open(dbo, options.path, descs, &handles, &txdb);
  if (!s.ok()) return from_rocks(s, "cannot open RocksDB at " + options.path);
  impl->txdb = txdb;
  // handles[0] is the default family, unused but must be destroyed.
  impl->cfs.assign(handles.begin() + 1, handles.end());
  impl->cfs.push_back(handles[0]);
  impl->statistics = dbo.statistics;
  impl->block_cache = table.block_cache;
  impl->wopts.sync = options.sync;
  impl->wopts_nosync.sync = false;
  for (auto& c : impl->key_counts) c.store(-1);
  for (Space sp : options.counted) {
    const auto t0 = std::chrono::steady_clock::now();
    rocksdb::ReadOptions ro;
    ro.fill_cache = false;  // one pass over everything: keep the cache for the work
    std::unique_ptr<rocksdb::Iterator> it(impl->db()->NewIterator(ro, impl->cf(sp)));
    int64_t n = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
    SURGE_RETURN_IF_ERROR(from_rocks(it->status(), std::string("counting the keys of space ") +
                                                       kCfNames[static_cast<size_t>(sp)] +
                                                       " in RocksDB at " + options.path));
    impl->key_counts[static_cast<size_t>(sp)].store(n);
    const auto took = std::chrono::steady_clock::now() - t0;
    if (took > std::chrono::seconds(1)) {
      SLOG_INFO("RocksDB at {}: counted {} keys of space {} in {} ms", options.path, n,
                kCfNames[static_cast<size_t>(sp)],
                std::chrono::duration_cast<std::chrono::milliseconds>(took).count());
    }
  }
  return std::unique_ptr<RocksKvStore>(new RocksKvStore(std::move(impl)));
}

Status RocksKvStore::close() {
  if (impl_ == nullptr || impl_->txdb == nullptr) return Status::OK();
  rocksdb::FlushOptions fo;
  rocksdb::Status fs = impl_->db()->Flush(
      fo, std::vector<rocksdb::ColumnFamilyHandle*>(impl_->cfs.begin(), impl_->cfs.end() - 1));
  for (auto* h : impl_->cfs) impl_->txdb->DestroyColumnFamilyHandle(h);
  impl_->cfs.clear();
  rocksdb::Status cs = impl_->db()->Close();
  delete impl_->txdb;
  impl_->txdb = nullptr;
  SURGE_RETURN_IF_ERROR(from_rocks(fs, "flushing RocksDB at " + impl_->opts.path));
  return from_rocks(cs, "closing RocksDB at " + impl_->opts.path);
}

Result<std::optional<std::string>> RocksKvStore::get(Space sp, std::string_view key) {
  std::string v;
  rocksdb::Status s = impl_->db()->Get(rocksdb::ReadOptions(), impl_->cf(sp),
                                       rocksdb::Slice(key.data(), key.size()), &v);
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) return from_rocks(s, "RocksDB get");
  return std::optional<std::string>(std::move(v));
}

Status RocksKvStore::scan(Space sp, std::string_view begin, std::string_view end,
                          const ScanFn& fn) {
  rocksdb::ReadOptions ro;
  rocksdb::Slice upper(end.data(), end.size());
  if (!end.empty()) ro.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(impl_->db()->NewIterator(ro, impl_->cf(sp)));
  for (it->Seek(rocksdb::Slice(begin.data(), begin.size())); it->Valid(); it->Next()) {
    rocksdb::Slice k = it->key(), v = it->value();
    if (!fn(std::string_view(k.data(), k.size()), std::string_view(v.data(), v.size()))) break;
  }
  return from_rocks(it->status(), "RocksDB scan");
}

Status RocksKvStore::commit(const KvBatch& batch, bool durable) {
  const rocksdb::WriteOptions& wo = durable ? impl_->wopts : impl_->wopts_nosync;
  if (batch.checks().empty()) {
    // Nothing to validate: a plain atomic WriteBatch.
    rocksdb::WriteBatch wb;
    for (const auto& op : batch.ops()) {
      rocksdb::Status s = op.value ? wb.Put(impl_->cf(op.space), op.key, *op.value)
                                   : wb.Delete(impl_->cf(op.space), op.key);
      if (!s.ok()) return from_rocks(s, "building write batch");
    }
    SURGE_RETURN_IF_ERROR(from_rocks(impl_->db()->Write(wo, &wb), "RocksDB write"));
    follow_counts(batch);
    return Status::OK();
  }
  std::unique_ptr<rocksdb::Transaction> txn(impl_->txdb->BeginTransaction(wo));
  for (const auto& c : batch.checks()) {
    std::string v;
    rocksdb::Status s = txn->GetForUpdate(rocksdb::ReadOptions(), impl_->cf(c.space), c.key, &v);
    if (s.IsNotFound()) {
      if (c.expected) return Status::Busy("conflict: key vanished before commit");
    } else if (!s.ok()) {
      return from_rocks(s, "RocksDB read for conflict check");
    } else if (!c.expected || *c.expected != v) {
      return Status::Busy("conflict: key changed before commit");
    }
  }
  for (const auto& op : batch.ops()) {
    rocksdb::Status s = op.value ? txn->Put(impl_->cf(op.space), op.key, *op.value)
                                 : txn->Delete(impl_->cf(op.space), op.key);
    if (!s.ok()) return from_rocks(s, "RocksDB transaction write");
  }
  SURGE_RETURN_IF_ERROR(from_rocks(txn->Commit(), "RocksDB commit"));
  follow_counts(batch);
  return Status::OK();
}

void RocksKvStore::follow_counts(const KvBatch& batch) {
  for (size_t sp = 0; sp < kSpaceCount; ++sp) {
    const int64_t d = batch.key_delta(static_cast<Space>(sp));
    if (d != 0 && impl_->key_counts[sp].load() >= 0) impl_->key_counts[sp].fetch_add(d);
  }
}

Result<uint64_t> RocksKvStore::count_keys(Space sp) {
  const int64_t n = impl_->key_counts[static_cast<size_t>(sp)].load();
  if (n < 0) {
    return Status::InvalidArgument(std::string("space ") + kCfNames[static_cast<size_t>(sp)] +
                                   " of RocksDB at " + impl_->opts.path +
                                   " is not counted (RocksKvOptions::counted)");
  }
  return static_cast<uint64_t>(n);
}

Status RocksKvStore::make_durable() {
  if (!impl_->opts.sync) return Status::OK();
  std::unique_lock lk(impl_->sync_mu);
  // Any sync that starts from now on covers our writes; one already running
  // may not, so we need a generation strictly after the current one.
  const uint64_t need = impl_->sync_started + 1;
  ++impl_->sync_waiters;
  while (impl_->sync_done < need) {
    if (!impl_->syncing) {
      impl_->syncing = true;
      const uint64_t gen = ++impl_->sync_started;
      group_commit_batch().observe(impl_->sync_waiters);
      impl_->sync_waiters = 0;
      lk.unlock();
      rocksdb::Status s = impl_->db()->SyncWAL();
      lk.lock();
      impl_->syncing = false;
      impl_->sync_done = gen;
      impl_->last_sync_status = from_rocks(s, "syncing the RocksDB WAL at " + impl_->opts.path);
      impl_->sync_cv.notify_all();
    } else {
      impl_->sync_cv.wait(lk);
    }
  }
  return impl_->last_sync_status;
}

uint64_t RocksKvStore::wal_syncs() const {
  if (impl_ == nullptr || impl_->statistics == nullptr) return 0;
  return impl_->statistics->getTickerCount(rocksdb::WAL_FILE_SYNCED);
}

uint64_t RocksKvStore::memtable_bytes() const {
  if (impl_ == nullptr || impl_->txdb == nullptr) return 0;
  uint64_t total = 0;
  for (auto* cf : impl_->cfs) {
    uint64_t n = 0;
    impl_->db()->GetIntProperty(cf, "rocksdb.size-all-mem-tables", &n);
    total += n;
  }
  return total;
}

uint64_t RocksKvStore::block_cache_bytes() const {
  return impl_ == nullptr || impl_->block_cache == nullptr ? 0 : impl_->block_cache->GetUsage();
}

uint64_t RocksKvStore::estimate_keys(Space sp) {
  uint64_t n = 0;
  impl_->db()->GetIntProperty(impl_->cf(sp), "rocksdb.estimate-num-keys", &n);
  return n;
}

}  // namespace surge::mds
