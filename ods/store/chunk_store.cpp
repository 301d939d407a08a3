// ChunkStore: the chunk ObjectStore and its index side by side.
#include "ods/store/chunk_store.h"

#include <sys/stat.h>

#include <cerrno>

namespace surge::ods {

Result<std::unique_ptr<ChunkStore>> ChunkStore::Open(ObjectStoreOptions options) {
  const std::string root = options.data_dir + "/chunks";
  if (::mkdir(root.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, "create the chunk directory " + root);
  }
  auto store = std::make_unique<ChunkStore>();
  options.data_dir = root;
  SURGE_ASSIGN_OR_RETURN(store->objects_, ObjectStore::Open(options));
  SURGE_ASSIGN_OR_RETURN(store->index_, ChunkIndex::Open(root + "/index"));
  return store;
}

Result<std::optional<ChunkRecord>> ChunkStore::find(const ChunkKey& key, uint32_t chain_id,
                                                    bool create) {
  SURGE_ASSIGN_OR_RETURN(auto rec, index_->get(key));
  if (rec || !create) return rec;
  ChunkRecord r;
  r.chain_id = chain_id;
  SURGE_ASSIGN_OR_RETURN(r.object_id, index_->allocate_object_id());
  SURGE_RETURN_IF_ERROR(index_->put(key, r, false));
  return std::optional<ChunkRecord>(r);
}

Result<uint64_t> ChunkStore::size(const ChunkRecord& rec) {
  auto s = objects_->stat(rec.object_id);
  if (s.ok()) return *s;
  if (s.status().code() == Code::kNotFound) return uint64_t{0};
  return s.status();
}

Status ChunkStore::remove(const ChunkKey& key, const ChunkRecord& rec, bool sync) {
  auto gone = objects_->remove(rec.object_id);
  if (!gone.ok()) return gone.status().WithContext("removing " + key.describe());
  return index_->erase(key, rec.chain_id, sync);
}

Status ChunkStore::sync(const ChunkKey& key, const ChunkRecord& rec) {
  const uint64_t id = rec.object_id;
  SURGE_RETURN_IF_ERROR_CTX(objects_->sync(std::span<const uint64_t>(&id, 1)),
                            "syncing " + key.describe());
  return index_->sync();
}

}  // namespace surge::ods
