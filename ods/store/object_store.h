// ObjectStore: the objects of one data server, as files under a data
// directory, each with per-block CRC32C kept beside it.
//
// Layout (data_dir/):
//   FORMAT                        "surge-ods-store 1 block 4096": refuses a
//                                 directory formatted with other parameters
//   objects/HH/HH/<id hex>.dat    the object's bytes; a sparse file
//   objects/HH/HH/<id hex>.crc    CRC sidecar, see block_checksum.h
//   objects/HH/HH/<id hex>.gen    the truncate generation applied, only
//                                 once one was (truncate_generation())
//   dirty.log                     ids written since their last sync, see
//                                 recover(): only needed after a crash
// HH/HH is a hash of the id, so consecutive inode numbers spread over
// 65536 directories and no directory grows huge.
//
// Writes go through pwritev on the worker thread that serves the request
// (docs/ods.md has the measurements behind pwritev over io_uring). Data is
// written before its CRCs; a sync (fdatasync of data, then sidecar) makes
// both durable before it is acknowledged. After a crash, blocks written but
// never synced may disagree with their CRC; recover() re-checksums exactly
// the objects the dirty log names, so synced bytes that share a block with
// an unsynced write still read back.
//
// Thread-safe. Every error names the object id and, where one exists, the
// path or offset.
#pragma once

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/status.h"
#include "ods/store/block_checksum.h"
#include "ods/store/object_file.h"

namespace surge::ods {

struct ObjectStoreOptions {
  std::string data_dir;
  uint64_t max_object_size = uint64_t{1} << 40;  // 1 TiB
  size_t max_open_objects = 1024;                 // fd cache bound (3 fds each at most)
  bool o_direct = false;  // aligned IO bypasses the page cache
  // Fail with ResourceExhausted rather than fill the last bytes of the disk
  // (tests use it too). 0: off.
  uint64_t reserved_free_bytes = 0;
};

struct StoreStats {
  uint64_t capacity_bytes = 0;
  uint64_t free_bytes = 0;
  uint64_t objects = 0;
  std::string filesystem_id;  // filesystem_id.h: the disk the data dir is on
};

class ObjectStore {
 public:
  // Creates the layout if the directory is empty, checks FORMAT otherwise,
  // replays the dirty log (recover) and counts the objects.
  static Result<std::unique_ptr<ObjectStore>> Open(ObjectStoreOptions options);
  ~ObjectStore();
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;

  // Writes the bytes of data at offset (creating the object), updating the
  // CRCs of every block touched. sync: make it durable before returning.
  // Returns the object size afterwards. NoSpace when the disk is full: then
  // the object keeps its old size (no partial extension survives).
  // sums, if given, is checksum_payload(data, offset): the CRCs of fully
  // covered blocks are taken from it instead of being computed again.
  Result<uint64_t> write(uint64_t id, uint64_t offset, std::span<const iovec> data, bool sync,
                         const PayloadChecksums* sums = nullptr);

  // Reads up to dst.size() bytes at offset after verifying the CRC of every
  // block it touches. Short at the end of the object; 0 past it or for an
  // object that does not exist (a stripe never written is a hole). Holes
  // read as zeros. Corruption (logged with id and offset) when a block does
  // not match its CRC: bad bytes are never returned.
  // crc, if given, is chained onto: on success it becomes
  // crc32c(bytes read, *crc), found by the same pass that verifies them.
  Result<uint64_t> read(uint64_t id, uint64_t offset, std::span<std::byte> dst,
                        uint32_t* crc = nullptr);

  // Sets the size; the block that holds the new end gets a new CRC.
  // only_if_size: do nothing unless the object is exactly that long (a
  // writer undoing its own extension without cutting what another added).
  Status truncate(uint64_t id, uint64_t size, std::optional<uint64_t> only_if_size = std::nullopt);
  // fallocate on the range [offset, offset + length) of an object
  // (object_fallocate.cpp), the CRC sidecar kept in step:
  //   kReserve: allocates the range (data and the sidecar entries its
  //     blocks will need), so a later write of it does not fail for space.
  //   kPunch: frees the range; it reads as zeros. Always keeps the size.
  //   kZero: the range reads as zeros and stays allocated.
  // Blocks the range covers whole get the zero-block CRC; a partly covered
  // block at either edge is verified first (Corruption if it fails: its
  // bad bytes must not get a fresh CRC) and re-checksummed after. Without
  // keep_size (not for kPunch) the object grows to offset + length.
  // NoSpace when the disk cannot hold the range; NotSupported when the
  // data directory's file system cannot punch.
  enum class SpaceOp { kReserve, kPunch, kZero };
  Status fallocate(uint64_t id, uint64_t offset, uint64_t length, SpaceOp op, bool keep_size);
  // Truncate generations (object_generation.cpp; docs/redundancy.md,
  // "Truncate generations"): the file's truncate an object has applied,
  // kept in objects/HH/HH/<id hex>.gen once it applied one. Requests that
  // carry a newer generation find the object as if cut first, so a truncate
  // the MDS sends late never cuts a write made after it.
  struct TruncateGeneration {
    uint64_t seq = 0;   // 0: none applied (or no object)
    uint64_t size = 0;  // the size that truncate set
  };
  Result<TruncateGeneration> truncate_generation(uint64_t id);
  // Applies truncate `seq` (the object's size becomes `size`) unless the
  // object applied it or a later one; the cut is synced before the
  // generation is recorded (durably). for_update: the caller writes the
  // object next, so a missing object is created to hold the record; else a
  // missing object stays missing when size is 0, with no record (nothing
  // of it can be cut later).
  Status apply_truncate(uint64_t id, uint64_t seq, uint64_t size, bool for_update);
  // Removes the object unless it applied generation seq or a later one
  // (a writer that knew of it made it); true when it existed and went.
  Result<bool> remove_older_than(uint64_t id, uint64_t seq);

  // Idempotent; true when the object existed.
  Result<bool> remove(uint64_t id);
  // Size, NotFound when the object does not exist.
  Result<uint64_t> stat(uint64_t id);
  // fdatasync of the listed objects if they have unsynced changes (all
  // unsynced objects when ids is empty).
  Status sync(std::span<const uint64_t> ids);
  Result<StoreStats> statfs();

  // Verifies every block of one object; Corruption names the first bad one.
  Status verify(uint64_t id);

  // Scrub: verifies every block of every object in fan-out directories
  // [first_dir, first_dir + count) (of kFanoutDirs), appending the offsets
  // of bad blocks (up to max_bad in all). Other errors stop it.
  static constexpr uint32_t kFanoutDirs = 65536;
  struct ScrubStats {
    uint64_t objects = 0;
    uint64_t bytes = 0;
    std::vector<std::pair<uint64_t, uint64_t>> bad;  // (object id, block offset)
  };
  Status scrub(uint32_t first_dir, uint32_t count, size_t max_bad, ScrubStats& out);

  const ObjectStoreOptions& options() const { return options_; }
  // Paths of an object's files (tests corrupt them on purpose).
  std::string data_path(uint64_t id) const;
  std::string crc_path(uint64_t id) const;
  std::string generation_path(uint64_t id) const;
  size_t open_objects() const;
  // What fresh objects cost the store (tests assert on them): mkdir calls
  // made for fan-out directories, and blocks read back to merge a partial
  // write with what the block held.
  uint64_t fanout_mkdirs() const { return fanout_mkdirs_.load(std::memory_order_relaxed); }
  uint64_t blocks_read_back() const { return blocks_read_back_.load(std::memory_order_relaxed); }

 private:
  explicit ObjectStore(ObjectStoreOptions options);
  Status init();
  Status recover();
  Result<std::shared_ptr<ObjectFile>> get(uint64_t id, bool create);
  Result<std::shared_ptr<ObjectFile>> open_object(uint64_t id, bool create);
  Status begin_change(uint64_t id);
  void end_change(uint64_t id);
  // Ends a change begun with begin_change on every path out of a write.
  struct ChangeScope {
    ObjectStore* store;
    uint64_t id;
    ChangeScope(ObjectStore* s, uint64_t i) : store(s), id(i) {}
    ~ChangeScope() { store->end_change(id); }
  };
  Status truncate_locked(ObjectFile& obj, uint64_t size);  // obj.mu held exclusively
  Status load_generation_locked(ObjectFile& obj);          // obj.mu held
  Status store_generation_locked(ObjectFile& obj, TruncateGeneration g);
  Status sync_object(ObjectFile& obj);
  Status read_block(ObjectFile& obj, uint64_t block, std::byte* buf);
  Status rechecksum_block(ObjectFile& obj, uint64_t block, bool verify_first);
  Result<uint32_t> stored_crc(ObjectFile& obj, uint64_t block);
  Status check_space(uint64_t id, uint64_t bytes);
  Status verify_locked(ObjectFile& obj);
  Status scan_blocks(ObjectFile& obj, const std::function<Status(uint64_t block)>& on_bad);

  ObjectStoreOptions options_;

  // fd cache: LRU over open objects, bounded by max_open_objects. One
  // ObjectFile per object at a time: its size and checksums are guarded by
  // its own mutex, so two for one object would let writers of one block
  // race (a checksum mismatch). An object evicted while an operation still
  // holds it is remembered in evicted_ and taken back by the next get().
  // The lock is never held across a system call (open, mkdir, close): a
  // hit must not wait for another object's create on a slow disk (reads run
  // on the transport thread). opening_ counts the opens of each object
  // under way outside the lock; an object remove()d meanwhile is in doomed_
  // until its last open ends, and that open's file is handed out but not
  // cached (it may be unlinked). opened_ counts, per object with opens
  // under way, the files of it cached since: an open that ends with no
  // file of the object cached or in use, but with a file cached by another
  // open since it began, opens again (the file it read the size of may
  // have been written through the other's since, and is gone).
  mutable std::mutex cache_mu_;
  std::unordered_map<uint64_t, std::weak_ptr<ObjectFile>> evicted_;
  std::unordered_map<uint64_t, int> opening_;
  std::unordered_set<uint64_t> doomed_;
  std::unordered_map<uint64_t, uint64_t> opened_;
  std::list<uint64_t> lru_;  // front: most recent
  struct CacheEntry {
    std::shared_ptr<ObjectFile> obj;
    std::list<uint64_t>::iterator lru_pos;
  };
  std::unordered_map<uint64_t, CacheEntry> cache_;
  // Under cache_mu_: the object's file when cached or evicted but still in
  // use (then cached again), else null.
  std::shared_ptr<ObjectFile> cached_locked(uint64_t id,
                                            std::vector<std::shared_ptr<ObjectFile>>& dropped);
  // Under cache_mu_: caches obj, evicting past max_open_objects into
  // dropped (released after the lock).
  void insert_locked(uint64_t id, std::shared_ptr<ObjectFile> obj,
                     std::vector<std::shared_ptr<ObjectFile>>& dropped);

  // Objects with changes not yet synced, and the objects in dirty.log with
  // the sequence number of their entry (one entry per object per log
  // epoch; durable once log_synced_ reaches it).
  std::mutex dirty_mu_;
  std::unordered_set<uint64_t> dirty_;
  std::unordered_map<uint64_t, uint64_t> logged_;
  uint64_t log_appended_ = 0;
  size_t changes_in_progress_ = 0;
  std::mutex log_sync_mu_;
  std::atomic<uint64_t> log_synced_{0};
  // Created by this process, never synced (so the directory entry is not
  // durable, and writes need no dirty-log entry yet).
  std::unordered_set<uint64_t> new_dirs_;
  // Fan-out directories created whose own names are not yet durable.
  std::unordered_set<std::string> unsynced_dirs_;
  int dirty_log_fd_ = -1;

  std::atomic<uint64_t> objects_{0};
  // Fan-out directories known to exist (one bit each; set once made or
  // found, cleared if one is found missing): a new object in a known one
  // makes no mkdir.
  template <size_t N>
  static bool known_dir(const std::array<std::atomic<uint64_t>, N>& bits, uint32_t i) {
    return (bits[i / 64].load(std::memory_order_relaxed) >> (i % 64)) & 1;
  }
  template <size_t N>
  static void note_dir(std::array<std::atomic<uint64_t>, N>& bits, uint32_t i) {
    bits[i / 64].fetch_or(uint64_t{1} << (i % 64), std::memory_order_relaxed);
  }
  template <size_t N>
  static void forget_dir(std::array<std::atomic<uint64_t>, N>& bits, uint32_t i) {
    bits[i / 64].fetch_and(~(uint64_t{1} << (i % 64)), std::memory_order_relaxed);
  }
  std::array<std::atomic<uint64_t>, kFanoutDirs / 64> leaf_dirs_{};
  std::array<std::atomic<uint64_t>, 256 / 64> mid_dirs_{};
  std::atomic<uint64_t> fanout_mkdirs_{0};
  std::atomic<uint64_t> blocks_read_back_{0};
};

}  // namespace surge::ods
