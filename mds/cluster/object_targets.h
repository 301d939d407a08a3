// ObjectTargets: what the MDS asks of the data servers holding a file's
// data: format 1 objects (one per file and target, object id = inode
// number) and format 2 chunks, sent to their chain's head with the chain
// version (docs/redundancy.md).
// An interface so the namespace and the orphan collector are unit-tested
// with a fake; RpcObjectTargets (daemon) calls OdsTruncate / OdsRemove.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace surge::mds {

// A chunk at the member of its chain that takes changes (the head).
struct ChunkAddress {
  uint32_t target_id = 0;
  std::string address;
  uint32_t chain_id = 0;
  uint64_t chain_version = 0;
  uint64_t ino = 0;
  uint32_t slot = 0;
  uint32_t position = 0;
};

class ObjectTargets {
 public:
  virtual ~ObjectTargets() = default;
  // Sets the object's size (object-local bytes); creates it if missing.
  // truncate_seq != 0: the file's truncate generation being applied (an
  // object that applied it already is left as it is; ods.proto, ChunkRef).
  virtual Status truncate(uint32_t target_id, const std::string& address, uint64_t object_id,
                          uint64_t size, uint64_t truncate_seq = 0) = 0;
  // Removes the object; a missing object is success (idempotent).
  // truncate_seq != 0: not if it applied that generation or a later one.
  virtual Status remove(uint32_t target_id, const std::string& address, uint64_t object_id,
                        uint64_t truncate_seq = 0) = 0;
  // Whether the data server at address answers at all (within a short
  // deadline): the MDS's own check of a client's failure report.
  virtual Status probe(const std::string& address) = 0;
  // The same for a chunk of a format 2 file, at its chain's head.
  // truncate_seq != 0: the file's truncate generation being applied (a
  // chunk that applied it already is left as it is; ods.proto, ChunkRef).
  virtual Status truncate_chunk(const ChunkAddress& chunk, uint64_t size,
                                uint64_t truncate_seq = 0) = 0;
  virtual Status remove_chunk(const ChunkAddress& chunk, uint64_t truncate_seq = 0) = 0;
};

}  // namespace surge::mds
