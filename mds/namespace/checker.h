// The namespace checker (surge-mds --check, and tests): reads the whole
// store and reports every broken invariant: every entry points to a live
// inode of the type it records, nlink is exact (files: their entries;
// directories: 2 + subdirectories), each directory but the root has exactly
// one entry, in the directory its record names as parent, and reaches the
// root; no inode is unreachable unless it is in the orphan list with
// nlink 0; no xattr belongs to a missing inode. Read-only; run it on a
// store no one is writing (a stopped MDS, or a quiet test).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "mds/kv/kv_store.h"

namespace surge::mds {

struct CheckReport {
  uint64_t inodes = 0;
  uint64_t dentries = 0;
  uint64_t orphans = 0;
  uint64_t xattrs = 0;
  std::vector<std::string> problems;  // empty when clean
  bool clean() const { return problems.empty(); }
  std::string summary() const;
};

Result<CheckReport> check_namespace(KvStore* kv);

}  // namespace surge::mds
