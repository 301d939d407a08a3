// ChunkStore: where the chunks of format 2 files live on a data server, apart
// from the legacy (format 1) objects so their names never collide:
//   data_dir/chunks/          an ObjectStore of its own (same format, CRC
//                             sidecars, dirty log) holding each chunk's bytes
//                             under an object id the index allocated
//   data_dir/chunks/index/    the ChunkIndex: {ino, slot, position} -> record
//                             (chain, version, committed_version, incomplete,
//                             object id), listed by chain
// A chunk exists when its record does; a record's object may be missing
// (nothing written yet: reads as empty). Update order and versions are the
// chain room's (ods/chain/); this class only stores. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "ods/store/chunk_index.h"
#include "ods/store/object_store.h"

namespace surge::ods {

class ChunkStore {
 public:
  // options: those of the legacy store; data_dir is the data server's.
  static Result<std::unique_ptr<ChunkStore>> Open(ObjectStoreOptions options);

  ChunkIndex& index() { return *index_; }
  ObjectStore& objects() { return *objects_; }

  // The record of key, made (version 0, an object id of its own) when it
  // does not exist and create is set; nullopt when it does not and is not.
  Result<std::optional<ChunkRecord>> find(const ChunkKey& key, uint32_t chain_id, bool create);
  // The chunk's size (0 when its object was never written).
  Result<uint64_t> size(const ChunkRecord& rec);
  // Drops the chunk's bytes and its record (idempotent).
  Status remove(const ChunkKey& key, const ChunkRecord& rec, bool sync);
  // Makes the chunk's bytes and record durable.
  Status sync(const ChunkKey& key, const ChunkRecord& rec);

 private:
  std::unique_ptr<ObjectStore> objects_;
  std::unique_ptr<ChunkIndex> index_;
};

}  // namespace surge::ods
