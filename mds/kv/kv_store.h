// KvStore: the small transactional key-value interface the namespace is
// written against (get, ordered scan, atomic batch with conflict checks), so
// the MDS can later move from embedded RocksDB onto a distributed
// transactional KV (FoundationDB, TiKV) without touching the namespace code.
//
// Invariants: a committed batch is all-or-nothing and durable (synced WAL)
// when commit() returns OK; a batch whose checks do not hold commits nothing
// and returns Busy, so the caller can retry.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace surge::mds {

// Key spaces (column families in RocksDB, key prefixes elsewhere).
enum class Space : uint8_t {
  kInodes = 0,    // ino -> InodeRecord
  kDentries = 1,  // parent ino + name hash + name -> child ino + type
  kXattrs = 2,    // ino + name -> value
  kSystem = 3,    // fs id, inode high-water mark, targets, orphans
};
inline constexpr int kSpaceCount = 4;

// One atomic change. Checks are the conflict detection: each names a key and
// the value the caller based its decision on (nullopt: "must be absent").
class KvBatch {
 public:
  struct Op {
    Space space;
    std::string key;
    std::optional<std::string> value;  // nullopt: delete
  };
  struct Check {
    Space space;
    std::string key;
    std::optional<std::string> expected;  // nullopt: absent
  };

  void put(Space s, std::string key, std::string value) {
    ops_.push_back({s, std::move(key), std::move(value)});
  }
  void del(Space s, std::string key) { ops_.push_back({s, std::move(key), std::nullopt}); }
  // A key read twice for one change is checked once when both reads saw the
  // same value; two different expectations of one key both stay, so the
  // batch fails (Busy) and the change is rebuilt from a fresh read.
  void check(Space s, std::string key, std::optional<std::string> expected) {
    for (const auto& c : checks_) {
      if (c.space == s && c.key == key && c.expected == expected) return;
    }
    checks_.push_back({s, std::move(key), std::move(expected)});
  }
  // Declares that this batch adds (delta > 0) or removes keys of space s
  // that were absent (present) before it: a store that counts the space
  // follows these declarations rather than read every key it writes. The
  // batch's checks must make the declaration true when it commits.
  void count(Space s, int64_t delta) { key_deltas_[static_cast<size_t>(s)] += delta; }
  int64_t key_delta(Space s) const { return key_deltas_[static_cast<size_t>(s)]; }
  bool empty() const { return ops_.empty(); }
  const std::vector<Op>& ops() const { return ops_; }
  const std::vector<Check>& checks() const { return checks_; }

 private:
  std::vector<Op> ops_;
  std::vector<Check> checks_;
  std::array<int64_t, kSpaceCount> key_deltas_{};
};

class KvStore {
 public:
  virtual ~KvStore() = default;

  // nullopt when the key is absent.
  virtual Result<std::optional<std::string>> get(Space s, std::string_view key) = 0;

  // Visits keys in [begin, end) in byte order (end empty: to the end of the
  // space) until fn returns false.
  using ScanFn = std::function<bool(std::string_view key, std::string_view value)>;
  virtual Status scan(Space s, std::string_view begin, std::string_view end, const ScanFn& fn) = 0;

  // Atomic commit; Busy when a check fails. durable: the change is in the
  // synced log when this returns. Not durable: it is applied and ordered
  // (visible, and behind everything committed before it), and the next
  // make_durable() from any thread syncs it; callers use this to release
  // their locks before waiting for the disk.
  virtual Status commit(const KvBatch& batch, bool durable = true) = 0;

  // Syncs every commit that returned before this call. Concurrent callers
  // share one sync (group commit).
  virtual Status make_durable() = 0;

  // Rough number of keys in a space (metrics).
  virtual uint64_t estimate_keys(Space s) = 0;

  // Exact number of keys in a space (statfs's inode count), or why the
  // store cannot say: etcd counts any space when asked; RocksDB counts the
  // spaces RocksKvOptions::counted names once at open and then follows the
  // committed batches' declared deltas (KvBatch::count): it is its store's
  // only writer.
  virtual Result<uint64_t> count_keys(Space s) = 0;

  // Most ops (and, separately, most checks) one batch may hold; a bigger
  // batch fails and is never split. Work that need not be atomic as a whole
  // (expiring done-op ids) commits in batches of at most this many ops.
  virtual size_t max_batch_ops() const { return SIZE_MAX; }

  // Whether get() and short scans are reads on this machine (memory, the
  // page cache or a local file), never a network round trip: they may then
  // run on an RPC I/O thread (mds_service.cpp).
  virtual bool reads_are_local() const { return false; }
};

}  // namespace surge::mds
