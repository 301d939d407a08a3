// ObjectStore's truncate generations: what orders a file's truncate before
// the writes that follow it on a legacy (format 1) object, however late the
// MDS's background pass sends the truncate (docs/redundancy.md, "Truncate
// generations"; chained chunks keep theirs in the chunk index instead).
//
// The record is a file of its own beside the object, written only by a
// truncate that carries a generation (rare next to writes), so objects
// never truncated cost nothing. Format (24 bytes, little-endian):
//   u32 magic "SGN1" | u32 crc32c of the next 16 bytes | u64 seq | u64 size
// Written to a temporary name, synced and renamed, after the cut itself is
// synced: a record on disk always means its cut is on disk too.
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "common/crc32c.h"
#include "ods/store/dir_sync.h"
#include "ods/store/object_store.h"

namespace surge::ods {
namespace {

constexpr uint32_t kGenerationMagic = 0x314e4753;  // "SGN1"
constexpr size_t kGenerationBytes = 24;

std::string object_text(uint64_t id) {
  return "object " + std::to_string(id);
}

}  // namespace

Status ObjectStore::load_generation_locked(ObjectFile& obj) {
  if (obj.generation_loaded) return Status::OK();
  const std::string path = generation_path(obj.id);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) {
      return Status::FromErrno(
          errno, "open the truncate generation of " + object_text(obj.id) + " " + path);
    }
    obj.generation_seq = obj.generation_size = 0;
    obj.generation_loaded = true;
    return Status::OK();
  }
  std::array<std::byte, kGenerationBytes> b{};
  ssize_t n = ::pread(fd, b.data(), b.size(), 0);
  int err = errno;
  ::close(fd);
  if (n < 0)
    return Status::FromErrno(err,
                             "read the truncate generation of " + object_text(obj.id) + " " + path);
  uint32_t magic = 0, crc = 0;
  std::memcpy(&magic, b.data(), 4);
  std::memcpy(&crc, b.data() + 4, 4);
  if (static_cast<size_t>(n) != b.size() || magic != kGenerationMagic ||
      crc != surge::crc32c(b.data() + 8, 16)) {
    return Status::Corruption("truncate generation of " + object_text(obj.id) + " (" + path +
                              "): " + std::to_string(n) + " bytes that do not check");
  }
  std::memcpy(&obj.generation_seq, b.data() + 8, 8);
  std::memcpy(&obj.generation_size, b.data() + 16, 8);
  obj.generation_loaded = true;
  return Status::OK();
}

Status ObjectStore::store_generation_locked(ObjectFile& obj, TruncateGeneration g) {
  const std::string path = generation_path(obj.id), tmp = path + ".tmp";
  std::array<std::byte, kGenerationBytes> b{};
  std::memcpy(b.data(), &kGenerationMagic, 4);
  std::memcpy(b.data() + 8, &g.seq, 8);
  std::memcpy(b.data() + 16, &g.size, 8);
  const uint32_t crc = surge::crc32c(b.data() + 8, 16);
  std::memcpy(b.data() + 4, &crc, 4);
  const std::string what = "the truncate generation of " + object_text(obj.id) + " " + tmp;
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(errno, "create " + what);
  ssize_t n = ::pwrite(fd, b.data(), b.size(), 0);
  int err = errno;
  if (n == static_cast<ssize_t>(b.size()) && ::fdatasync(fd) != 0) {
    err = errno;
    n = -1;
  }
  ::close(fd);
  if (n != static_cast<ssize_t>(b.size())) {
    ::unlink(tmp.c_str());
    return Status::FromErrno(n < 0 ? err : EIO, "write " + what);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    return Status::FromErrno(err, "rename " + what);
  }
  SURGE_RETURN_IF_ERROR(fsync_dir(path.substr(0, path.rfind('/'))));
  obj.generation_seq = g.seq;
  obj.generation_size = g.size;
  obj.generation_loaded = true;
  return Status::OK();
}

Result<ObjectStore::TruncateGeneration> ObjectStore::truncate_generation(uint64_t id) {
  if (id == 0) return Status::InvalidArgument("truncate generation: object id 0 is not an object");
  auto got = get(id, false);
  if (!got.ok()) {
    if (got.status().code() == Code::kNotFound) return TruncateGeneration{};
    return got.status();
  }
  ObjectFile& obj = **got;
  {
    std::shared_lock lk(obj.mu);
    if (obj.generation_loaded) return TruncateGeneration{obj.generation_seq, obj.generation_size};
  }
  std::unique_lock lk(obj.mu);
  SURGE_RETURN_IF_ERROR(load_generation_locked(obj));
  return TruncateGeneration{obj.generation_seq, obj.generation_size};
}

Status ObjectStore::apply_truncate(uint64_t id, uint64_t seq, uint64_t size, bool for_update) {
  if (id == 0) return Status::InvalidArgument("truncate: object id 0 is not an object");
  if (seq == 0) return truncate(id, size);
  if (size > options_.max_object_size) {
    return Status::InvalidArgument("truncate " + object_text(id) + " to " + std::to_string(size) +
                                   ": past the maximum object size " +
                                   std::to_string(options_.max_object_size));
  }
  auto got = get(id, for_update || size > 0);
  if (!got.ok()) {
    if (got.status().code() == Code::kNotFound) return Status::OK();  // size 0 of nothing
    return got.status();
  }
  ObjectFile& obj = **got;
  std::unique_lock lk(obj.mu);
  SURGE_RETURN_IF_ERROR(load_generation_locked(obj));
  if (obj.generation_seq >= seq) return Status::OK();  // applied, or a later one was
  SURGE_RETURN_IF_ERROR(truncate_locked(obj, size).WithContext("truncate " + std::to_string(seq) +
                                                               " of " + object_text(id)));
  SURGE_RETURN_IF_ERROR(sync_object(obj));
  return store_generation_locked(obj, TruncateGeneration{seq, size});
}

Result<bool> ObjectStore::remove_older_than(uint64_t id, uint64_t seq) {
  if (id == 0) return Status::InvalidArgument("remove: object id 0 is not an object");
  auto got = get(id, false);
  if (!got.ok()) {
    if (got.status().code() == Code::kNotFound) return false;
    return got.status();
  }
  ObjectFile& obj = **got;
  // Held across the removal: a writer's catch-up (apply_truncate) comes
  // wholly before it, and is then seen, or wholly after, on no object.
  std::unique_lock lk(obj.mu);
  SURGE_RETURN_IF_ERROR(load_generation_locked(obj));
  if (obj.generation_seq >= seq) return false;
  return remove(id);
}

}  // namespace surge::ods
