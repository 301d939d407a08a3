// ObjectTargets: what the MDS asks of the data servers holding a file's
// objects (one object per file and target, object id = inode number).
// An interface so the namespace and the orphan collector are unit-tested
// with a fake; RpcObjectTargets (daemon) calls OdsTruncate / OdsRemove.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace surge::mds {

class ObjectTargets {
 public:
  virtual ~ObjectTargets() = default;
  // Sets the object's size (object-local bytes); creates it if missing.
  virtual Status truncate(uint32_t target_id, const std::string& address, uint64_t object_id,
                          uint64_t size) = 0;
  // Removes the object; a missing object is success (idempotent).
  virtual Status remove(uint32_t target_id, const std::string& address, uint64_t object_id) = 0;
};

}  // namespace surge::mds
