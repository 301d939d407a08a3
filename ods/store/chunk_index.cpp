// ChunkIndex over RocksDB. See chunk_index.h for the keys and formats.
#include "ods/store/chunk_index.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <cstring>

#include "common/rocksdb_tsan.h"

namespace surge::ods {
namespace {

constexpr const char* kFormatKey = "format";
constexpr const char* kFormat = "1";
constexpr const char* kNextIdKey = "n";
// Object ids are handed out from memory and persisted a block ahead, so a
// crash never hands out an id whose object may already exist.
constexpr uint64_t kIdBlock = 1024;
constexpr size_t kRecordBytesV1 = 1 + 4 + 8 + 8 + 1 + 8;
constexpr size_t kRecordBytesV2 = kRecordBytesV1 + 8;  // + truncate_seq
// Format 3: + the count of applied versions, then 8 bytes each; format 4:
// then 8 bytes of applied truncate generation each.
constexpr size_t kMaxApplied = ChunkRecord::kMaxApplied;

void put_be(std::string& s, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_be(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

std::string chunk_key(const ChunkKey& k) {
  std::string s = "k";
  put_be(s, k.ino, 8);
  put_be(s, k.slot, 4);
  put_be(s, k.position, 4);
  return s;
}
std::string chain_key(uint32_t chain, const ChunkKey& k) {
  std::string s = "c";
  put_be(s, chain, 4);
  put_be(s, k.ino, 8);
  put_be(s, k.slot, 4);
  put_be(s, k.position, 4);
  return s;
}

std::string encode(const ChunkRecord& r) {
  std::string s;
  s.push_back(static_cast<char>(ChunkIndex::kRecordFormat));
  put_be(s, r.chain_id, 4);
  put_be(s, r.version, 8);
  put_be(s, r.committed_version, 8);
  s.push_back(r.incomplete ? 1 : 0);
  put_be(s, r.object_id, 8);
  put_be(s, r.truncate_seq, 8);
  s.push_back(static_cast<char>(r.applied_count));
  for (uint32_t i = 0; i < r.applied_count; ++i) put_be(s, r.applied[i], 8);
  for (uint32_t i = 0; i < r.applied_count; ++i) put_be(s, r.applied_truncate[i], 8);
  return s;
}

Result<ChunkRecord> decode(const ChunkKey& key, const std::string& v) {
  const uint8_t format = v.empty() ? 0 : static_cast<uint8_t>(v[0]);
  if (format < 1 || format > ChunkIndex::kRecordFormat) {
    return Status::Corruption("record of " + key.describe() + " has format " +
                              (v.empty() ? std::string("(empty)") : std::to_string(format)) +
                              ", this data server reads formats 1 to " +
                              std::to_string(ChunkIndex::kRecordFormat));
  }
  size_t want = format == 1 ? kRecordBytesV1 : kRecordBytesV2;
  size_t applied = 0;
  if (format >= 3 && v.size() > kRecordBytesV2) {
    applied = static_cast<uint8_t>(v[kRecordBytesV2]);
    want += 1 + (format >= 4 ? 16 : 8) * applied;
  } else if (format >= 3) {
    want += 1;
  }
  if (v.size() != want || applied > kMaxApplied) {
    return Status::Corruption("record of " + key.describe() + " is " + std::to_string(v.size()) +
                              " bytes, format " + std::to_string(format) + " has " +
                              std::to_string(want));
  }
  const char* p = v.data() + 1;
  ChunkRecord r;
  r.chain_id = static_cast<uint32_t>(get_be(p, 4));
  r.version = get_be(p + 4, 8);
  r.committed_version = get_be(p + 12, 8);
  r.incomplete = p[20] != 0;
  r.object_id = get_be(p + 21, 8);
  if (format >= 2) r.truncate_seq = get_be(p + 29, 8);
  r.applied_count = static_cast<uint32_t>(applied);
  for (size_t i = 0; i < applied; ++i) {
    r.applied[i] = get_be(v.data() + kRecordBytesV2 + 1 + 8 * i, 8);
    if (format >= 4) {
      r.applied_truncate[i] = get_be(v.data() + kRecordBytesV2 + 1 + 8 * (applied + i), 8);
    }
  }
  return r;
}

Status db_status(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::OK();
  if (s.IsNoSpace()) return Status::NoSpace(what + ": " + s.ToString());
  return Status::IOError(what + ": " + s.ToString());
}

}  // namespace

std::string ChunkKey::describe() const {
  return "chunk {ino " + std::to_string(ino) + ", slot " + std::to_string(slot) + ", position " +
         std::to_string(position) + "}";
}

ChunkIndex::ChunkIndex(std::unique_ptr<rocksdb::DB> db, std::string dir, uint64_t next_id)
    : db_(std::move(db)), dir_(std::move(dir)), next_id_(next_id) {}

ChunkIndex::~ChunkIndex() = default;

Result<std::unique_ptr<ChunkIndex>> ChunkIndex::Open(const std::string& dir) {
  rocksdb::Options o;
  o.create_if_missing = true;
  o.max_open_files = 256;
  o.keep_log_file_num = 4;
  // The memtables bound the index's memory: RocksDB's default 64 MiB write
  // buffer (two of them) grew a data server's RSS by about 2.5 MiB a
  // minute under a stress run until the first flush, half an hour in.
  // 8 MiB buffers flush within minutes and hold at most 16 MiB.
  o.write_buffer_size = 8 << 20;
  o.max_write_buffer_number = 2;
  unmerged_write_groups_under_tsan(o);
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(o, dir, &raw);
  if (!s.ok()) return db_status(s, "open the chunk index " + dir);
  std::unique_ptr<rocksdb::DB> db(raw);
  std::string format;
  s = db->Get(rocksdb::ReadOptions(), kFormatKey, &format);
  if (s.IsNotFound()) {
    rocksdb::WriteOptions w;
    w.sync = true;
    SURGE_RETURN_IF_ERROR(db_status(db->Put(w, kFormatKey, kFormat), "format the chunk index " + dir));
  } else if (!s.ok()) {
    return db_status(s, "read the format of the chunk index " + dir);
  } else if (format != kFormat) {
    return Status::Corruption("the chunk index " + dir + " has format " + format +
                              ", this data server knows format " + kFormat);
  }
  std::string next;
  uint64_t next_id = 1;
  s = db->Get(rocksdb::ReadOptions(), kNextIdKey, &next);
  if (s.ok() && next.size() == 8) {
    next_id = get_be(next.data(), 8);
  } else if (!s.ok() && !s.IsNotFound()) {
    return db_status(s, "read the next object id of the chunk index " + dir);
  }
  // Everything below the persisted mark may have been handed out.
  return std::unique_ptr<ChunkIndex>(new ChunkIndex(std::move(db), dir, next_id));
}

Result<std::optional<ChunkRecord>> ChunkIndex::get(const ChunkKey& key) const {
  std::string v;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), chunk_key(key), &v);
  if (s.IsNotFound()) return std::optional<ChunkRecord>();
  SURGE_RETURN_IF_ERROR(db_status(s, "read the record of " + key.describe() + " in " + dir_));
  SURGE_ASSIGN_OR_RETURN(ChunkRecord r, decode(key, v));
  return std::optional<ChunkRecord>(r);
}

Status ChunkIndex::put(const ChunkKey& key, const ChunkRecord& rec, bool sync,
                       std::optional<uint32_t> old_chain) {
  rocksdb::WriteBatch b;
  b.Put(chunk_key(key), encode(rec));
  if (old_chain && *old_chain != rec.chain_id) b.Delete(chain_key(*old_chain, key));
  b.Put(chain_key(rec.chain_id, key), "");
  rocksdb::WriteOptions w;
  w.sync = sync;
  return db_status(db_->Write(w, &b), "store the record of " + key.describe() + " in " + dir_);
}

Status ChunkIndex::erase(const ChunkKey& key, uint32_t chain_id, bool sync) {
  rocksdb::WriteBatch b;
  b.Delete(chunk_key(key));
  b.Delete(chain_key(chain_id, key));
  rocksdb::WriteOptions w;
  w.sync = sync;
  return db_status(db_->Write(w, &b), "erase the record of " + key.describe() + " in " + dir_);
}

Result<uint64_t> ChunkIndex::allocate_object_id() {
  std::lock_guard lk(id_mu_);
  std::string mark;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), kNextIdKey, &mark);
  uint64_t persisted = (s.ok() && mark.size() == 8) ? get_be(mark.data(), 8) : 1;
  if (next_id_ >= persisted) {
    std::string v;
    put_be(v, next_id_ + kIdBlock, 8);
    rocksdb::WriteOptions w;
    w.sync = true;
    SURGE_RETURN_IF_ERROR(
        db_status(db_->Put(w, kNextIdKey, v), "reserve object ids in the chunk index " + dir_));
  }
  return next_id_++;
}

Result<std::vector<std::pair<ChunkKey, ChunkRecord>>> ChunkIndex::list(
    uint32_t chain_id, std::optional<ChunkKey> after, size_t max) const {
  std::vector<std::pair<ChunkKey, ChunkRecord>> out;
  std::string prefix = "c";
  put_be(prefix, chain_id, 4);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  if (after) {
    const std::string from = chain_key(chain_id, *after);
    it->Seek(from);
    if (it->Valid() && it->key().ToString() == from) it->Next();
  } else {
    it->Seek(prefix);
  }
  for (; it->Valid() && out.size() < max; it->Next()) {
    const rocksdb::Slice k = it->key();
    if (!k.starts_with(prefix) || k.size() != 1 + 4 + 8 + 4 + 4) break;
    ChunkKey key;
    key.ino = get_be(k.data() + 5, 8);
    key.slot = static_cast<uint32_t>(get_be(k.data() + 13, 4));
    key.position = static_cast<uint32_t>(get_be(k.data() + 17, 4));
    SURGE_ASSIGN_OR_RETURN(auto rec, get(key));
    if (rec && rec->chain_id == chain_id) out.emplace_back(key, *rec);
  }
  SURGE_RETURN_IF_ERROR(db_status(it->status(), "list the chunks of chain " +
                                                    std::to_string(chain_id) + " in " + dir_));
  return out;
}

Result<std::optional<std::pair<ChunkKey, ChunkRecord>>> ChunkIndex::find_object(
    uint64_t object_id) const {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek("k"); it->Valid(); it->Next()) {
    const rocksdb::Slice k = it->key();
    if (!k.starts_with("k") || k.size() != 1 + 8 + 4 + 4) break;
    ChunkKey key;
    key.ino = get_be(k.data() + 1, 8);
    key.slot = static_cast<uint32_t>(get_be(k.data() + 9, 4));
    key.position = static_cast<uint32_t>(get_be(k.data() + 13, 4));
    SURGE_ASSIGN_OR_RETURN(ChunkRecord rec, decode(key, it->value().ToString()));
    if (rec.object_id == object_id) return std::optional(std::make_pair(key, rec));
  }
  SURGE_RETURN_IF_ERROR(db_status(it->status(), "look up the chunk of object " +
                                                    std::to_string(object_id) + " in " + dir_));
  return std::optional<std::pair<ChunkKey, ChunkRecord>>();
}

Status ChunkIndex::sync() {
  return db_status(db_->SyncWAL(), "sync the chunk index " + dir_);
}

}  // namespace surge::ods
