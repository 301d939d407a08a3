// ChunkIndex: the durable record of every chained chunk on this data server
// (docs/redundancy.md, "Chunk versions"), in a RocksDB beside the objects.
//
// A chunk is named by {ino, slot, position}; its record holds the chain it
// belongs to, its version and committed_version, whether a resync of it is
// under way (incomplete) and the id of the object that holds its bytes in
// the chunk ObjectStore (ChunkStore). Keys (big-endian, so RocksDB orders
// them as the listing wants):
//   "k" ino(8) slot(4) position(4)                  -> record
//   "c" chain(4) ino(8) slot(4) position(4)         -> ""   (by chain)
//   "n"                                             -> next object id (8)
//   "format"                                        -> "1"
// A record's value starts with its own format byte (kRecordFormat), so a
// later format can be read next to this one: format 2 (5 Dec 2026) adds
// the truncate generation; records of format 1 read as generation 0;
// format 3 (6 Dec 2026) adds an EC parity chunk's applied versions (a
// count byte, then 8 bytes each; 0 for every other chunk); format 4
// (6 Dec 2026, session 33) adds, after them, the truncate generation each data
// position had applied when its delta was applied (8 bytes each; format 3
// reads as 0). Records are written in format 4 (a data server of before
// cannot read them back: no downgrade). A database of another format is refused at
// open, naming it. Thread-safe (RocksDB is).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/status.h"

namespace rocksdb {
class DB;
}

namespace surge::ods {

struct ChunkKey {
  uint64_t ino = 0;
  uint32_t slot = 0;
  uint32_t position = 0;
  auto operator<=>(const ChunkKey&) const = default;
  std::string describe() const;  // "chunk {ino 5, slot 0, position 0}"
};

struct ChunkRecord {
  uint32_t chain_id = 0;
  uint64_t version = 0;            // the latest update stored
  uint64_t committed_version = 0;  // known stored by the tail
  bool incomplete = false;         // a resync of it began and has not ended
  uint64_t object_id = 0;          // its bytes in the chunk ObjectStore
  // The file's truncate generation this copy has applied (ChunkRef's
  // truncate_seq): a request with a newer one sees it as cut.
  uint64_t truncate_seq = 0;
  // EC parity chunks: per data position of the group (applied_count of
  // them; 0: none yet, or not a parity chunk), the version of that
  // position's chunk whose delta was applied last. A fixed array keeps the
  // record a plain value (copied freely, no allocation).
  static constexpr size_t kMaxApplied = 64;
  uint32_t applied_count = 0;
  std::array<uint64_t, kMaxApplied> applied{};
  // Beside each applied version: the truncate generation that data
  // position's chunk had applied when it sent that update (the delta's
  // ChunkRef.truncate_seq). A degraded read of the position, and its
  // rebuild, learn from it whether the chunk applied the file's last
  // truncate before it was lost, so the bytes rebuilt from parity are seen
  // as cut or not exactly as the lost chunk would have served them.
  std::array<uint64_t, kMaxApplied> applied_truncate{};
  bool dirty() const { return version != committed_version; }
};

class ChunkIndex {
 public:
  static constexpr uint8_t kRecordFormat = 4;

  // Opens (creating) the database in dir.
  static Result<std::unique_ptr<ChunkIndex>> Open(const std::string& dir);
  ~ChunkIndex();

  Result<std::optional<ChunkRecord>> get(const ChunkKey& key) const;
  // Writes the record (and its chain entry; the old chain's entry goes
  // when the chain changed). sync: durable before returning.
  Status put(const ChunkKey& key, const ChunkRecord& rec, bool sync,
             std::optional<uint32_t> old_chain = std::nullopt);
  Status erase(const ChunkKey& key, uint32_t chain_id, bool sync);
  // A fresh object id for a new chunk's bytes (durable before it is used).
  Result<uint64_t> allocate_object_id();
  // Up to max chunks of chain in key order, after `after` (from the start
  // when empty).
  Result<std::vector<std::pair<ChunkKey, ChunkRecord>>> list(uint32_t chain_id,
                                                             std::optional<ChunkKey> after,
                                                             size_t max) const;
  // The chunk whose bytes are object `object_id` (a scan of every record:
  // for the rare bad block a scrub finds), or nullopt.
  Result<std::optional<std::pair<ChunkKey, ChunkRecord>>> find_object(uint64_t object_id) const;
  // Makes every write so far durable.
  Status sync();

 private:
  ChunkIndex(std::unique_ptr<rocksdb::DB> db, std::string dir, uint64_t next_id);
  std::unique_ptr<rocksdb::DB> db_;
  std::string dir_;
  std::mutex id_mu_;
  uint64_t next_id_;
};

}  // namespace surge::ods
