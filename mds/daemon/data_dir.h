// The MDS data directory: <dir>/FSID (the file system id, 16 hex digits and
// a newline) and <dir>/db (RocksDB). open_data_dir formats an empty or
// missing dir as a new file system, and refuses one that belongs to another
// file system, is not an MDS data dir, or is damaged, saying which.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "mds/kv/rocksdb_kv_store.h"

namespace surge::mds {

struct OpenedDataDir {
  std::unique_ptr<RocksKvStore> kv;
  uint64_t fs_id = 0;
  bool formatted = false;  // a new file system was made now
};

struct DataDirOptions {
  std::string path;
  uint64_t expect_fs_id = 0;  // 0: any
  bool allow_format = true;   // false: --check never formats
  bool sync = true;
  size_t block_cache_bytes = 64 << 20;
  size_t memtable_bytes = 32 << 20;
};

Result<OpenedDataDir> open_data_dir(const DataDirOptions& o);

}  // namespace surge::mds
