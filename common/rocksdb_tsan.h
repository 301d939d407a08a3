// RocksDB's write groups in a ThreadSanitizer build. Debian's RocksDB is
// not instrumented. When writes from several threads meet, one leader
// merges their batches into the DB's scratch batch (DBImpl::tmp_batch_)
// and a later leader clears it, ordered by RocksDB's own atomics, which
// TSan cannot see: it reported the two leaders' memsets of that batch as a
// race in surge-ods (CI, 4 Dec 2026), with no rocksdb:: frame in either
// access's stack for tests/sanitizers/tsan.supp to match (the writes are
// libstdc++'s, called from uninstrumented code). The same kind of report
// came from the daemons in a unity TSan build (docs/testing.md).
//
// In a TSan build only, a write group is one writer, so no batch is ever
// merged. Every other build keeps RocksDB's grouping; nothing of Surge's
// own is hidden from TSan.
#pragma once

#include <rocksdb/options.h>

namespace surge {

inline void unmerged_write_groups_under_tsan(rocksdb::DBOptions& o) {
#if defined(__SANITIZE_THREAD__)
  // A leader takes followers only while the group stays within this size.
  o.max_write_batch_group_size_bytes = 0;
#else
  (void)o;
#endif
}

}  // namespace surge
