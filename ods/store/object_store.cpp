// ObjectStore implementation. See object_store.h for the layout and the
// ordering rules (dirty log, then data, then CRCs; sync = data then CRCs).
#include "ods/store/object_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "common/crc32c.h"
#include "common/log.h"
#include "ods/store/block_checksum.h"
#include "ods/store/crash_points.h"
#include "ods/store/dir_sync.h"
#include "ods/store/filesystem_id.h"

namespace surge::ods {
namespace {

constexpr const char* kFormatLine = "surge-ods-store 1 block 4096";
// Distinct objects in the dirty log before it is folded (everything synced
// and the log emptied): bounds both the log and the recovery work.
constexpr size_t kMaxLoggedObjects = 4096;

std::string hex_id(uint64_t id) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(id));
  return buf;
}

// splitmix64 finalizer: consecutive ids land in unrelated directories.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// Which of the 65536 fan-out directories holds the object: the low byte
// names the first level, the next byte the second.
uint32_t fanout_index(uint64_t id) { return static_cast<uint32_t>(mix(id) & 0xffff); }

std::string fanout_dir(const std::string& root, uint64_t id) {
  uint64_t h = mix(id);
  char buf[8];
  std::snprintf(buf, sizeof buf, "%02x/%02x", static_cast<unsigned>(h & 0xff),
                static_cast<unsigned>((h >> 8) & 0xff));
  return root + "/objects/" + buf;
}

Status errno_status(int err, const std::string& what) { return Status::FromErrno(err, what); }

Status make_dir(const std::string& path, bool* created = nullptr) {
  if (::mkdir(path.c_str(), 0755) != 0) {
    if (errno != EEXIST) return errno_status(errno, "mkdir " + path);
    if (created != nullptr) *created = false;
  } else if (created != nullptr) {
    *created = true;
  }
  return Status::OK();
}

// Steps v[first..] past the `done` bytes a vectored call moved, so the next
// call resumes exactly where this one stopped.
void advance_iovecs(std::vector<iovec>& v, size_t& first, size_t done) {
  while (done > 0 && first < v.size()) {
    if (done >= v[first].iov_len) {
      done -= v[first].iov_len;
      ++first;
    } else {
      v[first].iov_base = static_cast<std::byte*>(v[first].iov_base) + done;
      v[first].iov_len -= done;
      done = 0;
    }
  }
}

// pwritev until everything is written (short writes happen near ENOSPC).
Status pwritev_all(int fd, std::span<const iovec> segs, uint64_t offset, const std::string& what) {
  std::vector<iovec> v(segs.begin(), segs.end());
  size_t first = 0;
  while (first < v.size()) {
    if (v[first].iov_len == 0) {
      ++first;
      continue;
    }
    int cnt = static_cast<int>(std::min<size_t>(v.size() - first, IOV_MAX));
    ssize_t n = ::pwritev(fd, &v[first], cnt, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status(errno, "write " + what + " at offset " + std::to_string(offset));
    }
    if (n == 0) return Status::IOError("write " + what + " made no progress");
    offset += static_cast<uint64_t>(n);
    advance_iovecs(v, first, static_cast<size_t>(n));
  }
  return Status::OK();
}

// preadv until done or EOF; returns bytes read.
Result<uint64_t> preadv_all(int fd, std::span<const iovec> segs, uint64_t offset,
                            const std::string& what) {
  std::vector<iovec> v(segs.begin(), segs.end());
  size_t first = 0;
  uint64_t total = 0;
  while (first < v.size()) {
    if (v[first].iov_len == 0) {
      ++first;
      continue;
    }
    int cnt = static_cast<int>(std::min<size_t>(v.size() - first, IOV_MAX));
    ssize_t n = ::preadv(fd, &v[first], cnt, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status(errno, "read " + what + " at offset " + std::to_string(offset));
    }
    if (n == 0) break;  // EOF
    offset += static_cast<uint64_t>(n);
    total += static_cast<uint64_t>(n);
    advance_iovecs(v, first, static_cast<size_t>(n));
  }
  return total;
}

bool aligned(uint64_t v) { return v % kBlockSize == 0; }

bool segments_aligned(std::span<const iovec> segs, uint64_t offset) {
  if (!aligned(offset)) return false;
  for (const iovec& s : segs) {
    if (!aligned(reinterpret_cast<uintptr_t>(s.iov_base)) || !aligned(s.iov_len)) return false;
  }
  return true;
}

}  // namespace

ObjectStore::ObjectStore(ObjectStoreOptions options) : options_(std::move(options)) {}

ObjectStore::~ObjectStore() {
  // A clean close: everything synced, so the dirty log can be emptied and
  // the next start has nothing to recover.
  Status st = sync({});
  if (!st.ok()) SLOG_WARN("object store {}: final sync failed: {}", options_.data_dir, st.ToString());
  if (dirty_log_fd_ >= 0) ::close(dirty_log_fd_);
}

Result<std::unique_ptr<ObjectStore>> ObjectStore::Open(ObjectStoreOptions options) {
  if (options.data_dir.empty()) return Status::InvalidArgument("object store: empty data_dir");
  if (options.max_open_objects == 0) options.max_open_objects = 1;
  std::unique_ptr<ObjectStore> store(new ObjectStore(std::move(options)));
  SURGE_RETURN_IF_ERROR(store->init());
  return store;
}

std::string ObjectStore::data_path(uint64_t id) const {
  return fanout_dir(options_.data_dir, id) + "/" + hex_id(id) + ".dat";
}
std::string ObjectStore::crc_path(uint64_t id) const {
  return fanout_dir(options_.data_dir, id) + "/" + hex_id(id) + ".crc";
}
std::string ObjectStore::generation_path(uint64_t id) const {
  return fanout_dir(options_.data_dir, id) + "/" + hex_id(id) + ".gen";
}

Status ObjectStore::init() {
  const std::string& root = options_.data_dir;
  SURGE_RETURN_IF_ERROR(make_dir(root));
  std::string format_path = root + "/FORMAT";
  struct stat sb {};
  if (::stat(format_path.c_str(), &sb) == 0) {
    std::ifstream in(format_path);
    std::string line;
    std::getline(in, line);
    if (line != kFormatLine) {
      return Status::Corruption("object store " + root + ": FORMAT says '" + line +
                                "', this server writes '" + kFormatLine + "'");
    }
  } else {
    SURGE_RETURN_IF_ERROR(make_dir(root + "/objects"));
    std::string tmp = format_path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << kFormatLine << "\n";
      out.flush();
      if (!out) return Status::IOError("object store: cannot write " + tmp);
    }
    if (::rename(tmp.c_str(), format_path.c_str()) != 0) {
      return errno_status(errno, "rename " + tmp);
    }
    SURGE_RETURN_IF_ERROR(fsync_dir(root));
  }
  SURGE_RETURN_IF_ERROR(make_dir(root + "/objects"));

  std::string log_path = root + "/dirty.log";
  // O_APPEND: after the log is emptied, entries start again at offset 0.
  dirty_log_fd_ = ::open(log_path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (dirty_log_fd_ < 0) return errno_status(errno, "open " + log_path);
  SURGE_RETURN_IF_ERROR(recover());

  // Count the objects once; creates and removes keep the count after that.
  uint64_t count = 0;
  std::string objects = root + "/objects";
  if (DIR* d1 = ::opendir(objects.c_str())) {
    while (dirent* e1 = ::readdir(d1)) {
      if (e1->d_name[0] == '.') continue;
      std::string p1 = objects + "/" + e1->d_name;
      DIR* d2 = ::opendir(p1.c_str());
      if (d2 == nullptr) continue;
      while (dirent* e2 = ::readdir(d2)) {
        if (e2->d_name[0] == '.') continue;
        std::string p2 = p1 + "/" + e2->d_name;
        DIR* d3 = ::opendir(p2.c_str());
        if (d3 == nullptr) continue;
        while (dirent* e3 = ::readdir(d3)) {
          std::string_view n = e3->d_name;
          if (n.size() > 4 && n.substr(n.size() - 4) == ".dat") ++count;
        }
        ::closedir(d3);
      }
      ::closedir(d2);
    }
    ::closedir(d1);
  }
  objects_ = count;
  return Status::OK();
}

// After a crash, an object in the dirty log may hold blocks whose data
// reached the disk without their CRC (or the reverse). Those writes were
// never acknowledged as synced, so whatever bytes are on disk are an
// acceptable outcome; re-checksumming them keeps the synced bytes that
// share such a block readable. Objects not in the log were synced (or never
// written) since the log was last emptied: their mismatches stay errors.
Status ObjectStore::recover() {
  struct stat sb {};
  if (::fstat(dirty_log_fd_, &sb) != 0) return errno_status(errno, "fstat dirty.log");
  size_t n = static_cast<size_t>(sb.st_size) / sizeof(uint64_t);
  if (n > 0) {
    std::vector<uint64_t> ids(n);
    ssize_t got = ::pread(dirty_log_fd_, ids.data(), n * sizeof(uint64_t), 0);
    if (got < 0) return errno_status(errno, "read dirty.log in " + options_.data_dir);
    ids.resize(static_cast<size_t>(got) / sizeof(uint64_t));
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    SLOG_INFO("object store {}: recovering {} objects written but not synced before the last stop",
              options_.data_dir, ids.size());
    for (uint64_t id : ids) {
      auto obj = open_object(id, false);
      if (!obj.ok()) {
        if (obj.status().code() == Code::kNotFound) continue;
        return obj.status();
      }
      ObjectFile& o = **obj;
      uint64_t blocks = (o.size + kBlockSize - 1) / kBlockSize;
      uint64_t repaired = 0;
      SURGE_RETURN_IF_ERROR(scan_blocks(o, [&](uint64_t b) {
        ++repaired;
        return rechecksum_block(o, b, false);
      }));
      // Sidecar entries past the end (a truncate that did not finish).
      if (::ftruncate(o.crc_fd, static_cast<off_t>(blocks * kCrcEntrySize)) != 0) {
        return errno_status(errno, "truncate " + crc_path(id));
      }
      if (repaired > 0) {
        SLOG_WARN("object {}: {} blocks re-checksummed after an unclean stop ({})", id, repaired,
                  o.data_path);
      }
      SURGE_RETURN_IF_ERROR(sync_object(o));
    }
  }
  if (::ftruncate(dirty_log_fd_, 0) != 0) return errno_status(errno, "truncate dirty.log");
  if (::fdatasync(dirty_log_fd_) != 0) return errno_status(errno, "sync dirty.log");
  return Status::OK();
}

Result<std::shared_ptr<ObjectFile>> ObjectStore::open_object(uint64_t id, bool create) {
  auto obj = std::make_shared<ObjectFile>(id, data_path(id));
  std::string dir = fanout_dir(options_.data_dir, id);
  std::string dpath = obj->data_path;
  std::string cpath = crc_path(id);
  bool created = false;
  int fd = ::open(dpath.c_str(), O_RDWR | O_CLOEXEC);
  if (fd >= 0) note_dir(leaf_dirs_, fanout_index(id));
  if (fd < 0 && errno == ENOENT && create) {
    // A fan-out directory this process knows exists (made or used by it)
    // needs no mkdir: the object is created in it at once. Until then
    // (a young store meets a new one with most objects) both levels are
    // made as needed; the first level only while it is not known either.
    const uint32_t leaf = fanout_index(id), mid = leaf & 0xff;
    if (known_dir(leaf_dirs_, leaf)) {
      fd = ::open(dpath.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0 && errno == ENOENT) forget_dir(leaf_dirs_, leaf);  // removed behind our back
    }
    if (fd < 0 && errno == ENOENT) {
      std::string parent = dir.substr(0, dir.rfind('/'));
      bool parent_created = false, dir_created = false;
      // A directory this call made is marked unsynced before any other
      // thread can learn it exists (note_dir): an object another thread
      // creates in it and syncs must also sync the directory's own name.
      auto unsynced = [this](const std::string& path) {
        std::lock_guard lk(dirty_mu_);
        unsynced_dirs_.insert(path);
      };
      if (!known_dir(mid_dirs_, mid)) {
        fanout_mkdirs_.fetch_add(1, std::memory_order_relaxed);
        SURGE_RETURN_IF_ERROR(make_dir(parent, &parent_created));
        if (parent_created) unsynced(parent);
        note_dir(mid_dirs_, mid);
      }
      fanout_mkdirs_.fetch_add(1, std::memory_order_relaxed);
      if (::mkdir(dir.c_str(), 0755) == 0) {
        dir_created = true;
      } else if (errno == ENOENT) {  // the first level was removed behind our back
        fanout_mkdirs_.fetch_add(2, std::memory_order_relaxed);
        SURGE_RETURN_IF_ERROR(make_dir(parent, &parent_created));
        if (parent_created) unsynced(parent);
        SURGE_RETURN_IF_ERROR(make_dir(dir, &dir_created));
      } else if (errno != EEXIST) {
        return errno_status(errno, "mkdir " + dir + " for object " + std::to_string(id));
      }
      if (dir_created) unsynced(dir);
      note_dir(leaf_dirs_, leaf);
      fd = ::open(dpath.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    }
    if (fd >= 0) {
      created = true;
    } else if (errno == EEXIST) {
      fd = ::open(dpath.c_str(), O_RDWR | O_CLOEXEC);
    }
  }
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound("object " + std::to_string(id) + " (" + dpath + ")");
    return errno_status(errno, "open object " + std::to_string(id) + " " + dpath);
  }
  obj->data_fd = fd;
  obj->crc_fd = ::open(cpath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (obj->crc_fd < 0) return errno_status(errno, "open checksums of object " + std::to_string(id) + " " + cpath);
  if (options_.o_direct) {
    obj->direct_fd = ::open(dpath.c_str(), O_RDWR | O_DIRECT | O_CLOEXEC);
    if (obj->direct_fd < 0) {
      return errno_status(errno, "open O_DIRECT object " + std::to_string(id) + " " + dpath);
    }
  }
  if (!created) {  // a file this call created is empty: no fstat needed
    struct stat sb {};
    if (::fstat(fd, &sb) != 0) return errno_status(errno, "fstat " + dpath);
    obj->size = static_cast<uint64_t>(sb.st_size);
  }
  if (created) {
    objects_.fetch_add(1);
    std::lock_guard lk(dirty_mu_);
    new_dirs_.insert(id);
  }
  return obj;
}

std::shared_ptr<ObjectFile> ObjectStore::cached_locked(
    uint64_t id, std::vector<std::shared_ptr<ObjectFile>>& dropped) {
  auto it = cache_.find(id);
  if (it != cache_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.lru_pos);
    return it->second.obj;
  }
  auto e = evicted_.find(id);
  if (e == evicted_.end()) return nullptr;
  std::shared_ptr<ObjectFile> live = e->second.lock();
  evicted_.erase(e);
  if (live) insert_locked(id, live, dropped);
  return live;
}

void ObjectStore::insert_locked(uint64_t id, std::shared_ptr<ObjectFile> obj,
                                std::vector<std::shared_ptr<ObjectFile>>& dropped) {
  lru_.push_front(id);
  cache_.emplace(id, CacheEntry{std::move(obj), lru_.begin()});
  // Evicting only drops the cache's reference: running operations keep
  // theirs (and a later get() finds it through evicted_), and a dirty
  // object stays in dirty_ so sync reopens it.
  while (cache_.size() > options_.max_open_objects) {
    uint64_t victim = lru_.back();
    lru_.pop_back();
    auto v = cache_.find(victim);
    if (v->second.obj.use_count() > 1) evicted_[victim] = v->second.obj;
    dropped.push_back(std::move(v->second.obj));
    cache_.erase(v);
  }
  if (evicted_.size() > 2 * options_.max_open_objects) {
    std::erase_if(evicted_, [](const auto& e) { return e.second.expired(); });
  }
}

Result<std::shared_ptr<ObjectFile>> ObjectStore::get(uint64_t id, bool create) {
  // Files closed after the lock: the last references of the evicted, and
  // a file opened twice.
  for (;;) {
    std::vector<std::shared_ptr<ObjectFile>> dropped;  // declared first: released after lk
    uint64_t seen = 0;  // files of id cached by others' opens, when ours began
    {
      std::lock_guard lk(cache_mu_);
      if (auto hit = cached_locked(id, dropped)) return hit;
      ++opening_[id];
      auto c = opened_.find(id);
      if (c != opened_.end()) seen = c->second;
    }
    auto opened = open_object(id, create);
    std::lock_guard lk(cache_mu_);
    const bool doomed = doomed_.count(id) != 0;
    auto c = opened_.find(id);
    const bool raced = c != opened_.end() && c->second != seen;
    if (--opening_[id] == 0) {
      opening_.erase(id);
      doomed_.erase(id);
      opened_.erase(id);
    }
    SURGE_RETURN_IF_ERROR(opened.status());
    std::shared_ptr<ObjectFile> obj = std::move(*opened);
    if (auto hit = cached_locked(id, dropped)) {  // another thread opened it meanwhile
      dropped.push_back(std::move(obj));
      return hit;
    }
    if (doomed) return obj;  // removed while we opened it: not cached
    if (raced) {
      // Another open's file of it was cached while ours opened, and is
      // gone now: its writes may have come after our file read the
      // object's size. Opened again (only another cached file makes a
      // second try open again, so each try is some thread's progress).
      dropped.push_back(std::move(obj));
      continue;
    }
    insert_locked(id, obj, dropped);
    if (opening_.count(id) != 0) ++opened_[id];  // those opens may have read the size before
    return obj;
  }
}

size_t ObjectStore::open_objects() const {
  std::lock_guard lk(cache_mu_);
  return cache_.size();
}

// Before an object changes: its id must be in the dirty log, durably,
// before any of the new bytes can reach the disk. Appends are cheap; the
// fdatasync is shared (group commit): whoever syncs covers every entry
// appended before it started, and the others find their entry covered.
Status ObjectStore::begin_change(uint64_t id) {
  uint64_t seq;
  {
    std::lock_guard lk(dirty_mu_);
    ++changes_in_progress_;
    auto it = logged_.find(id);
    if (it != logged_.end()) {
      seq = it->second;
    } else if (new_dirs_.count(id)) {
      // Created by this process and never synced: nothing of it was
      // acknowledged as durable, so a torn write can spoil nothing that
      // must survive. Its first sync ends this; later writes are logged.
      // (This keeps creating and writing a file free of the log's fsync.)
      return Status::OK();
    } else {
      uint64_t rec = id;
      if (::write(dirty_log_fd_, &rec, sizeof rec) != static_cast<ssize_t>(sizeof rec)) {
        --changes_in_progress_;
        return errno_status(errno, "append object " + std::to_string(id) + " to dirty.log in " +
                                       options_.data_dir);
      }
      seq = ++log_appended_;
      logged_.emplace(id, seq);
    }
  }
  if (seq > log_synced_.load()) {
    std::lock_guard sync_lk(log_sync_mu_);
    if (seq > log_synced_.load()) {
      uint64_t upto;
      {
        std::lock_guard lk(dirty_mu_);
        upto = log_appended_;
      }
      if (::fdatasync(dirty_log_fd_) != 0) {
        int err = errno;
        std::lock_guard lk(dirty_mu_);
        --changes_in_progress_;
        return errno_status(err, "sync dirty.log in " + options_.data_dir);
      }
      log_synced_ = upto;
    }
  }
  return Status::OK();
}

// After an object changed (or a change failed half way): it is dirty from
// now on. Marked after the bytes were written, so a sync that took its
// list before this point leaves the object listed for the next one.
void ObjectStore::end_change(uint64_t id) {
  bool fold;
  {
    std::lock_guard lk(dirty_mu_);
    dirty_.insert(id);
    --changes_in_progress_;
    fold = logged_.size() > kMaxLoggedObjects;
  }
  if (fold) {
    Status st = sync({});
    if (!st.ok()) SLOG_WARN("object store {}: folding dirty.log: {}", options_.data_dir, st.ToString());
  }
}

Result<uint32_t> ObjectStore::stored_crc(ObjectFile& obj, uint64_t block) {
  uint32_t stored = 0;
  ssize_t n = ::pread(obj.crc_fd, &stored, sizeof stored, static_cast<off_t>(block * kCrcEntrySize));
  if (n < 0) return errno_status(errno, "read checksum of object " + std::to_string(obj.id));
  if (n != static_cast<ssize_t>(sizeof stored)) stored = 0;  // sparse: a zero block
  return decode_block_crc(stored);
}

// Reads block `block` (zero padded past the end) and checks it.
Status ObjectStore::read_block(ObjectFile& obj, uint64_t block, std::byte* buf) {
  uint64_t off = block * kBlockSize;
  iovec v{buf, kBlockSize};
  SURGE_ASSIGN_OR_RETURN(uint64_t got, preadv_all(obj.data_fd, {&v, 1}, off, obj.data_path));
  std::memset(buf + got, 0, kBlockSize - got);
  SURGE_ASSIGN_OR_RETURN(uint32_t want, stored_crc(obj, block));
  uint32_t have = surge::crc32c(buf, kBlockSize);
  if (have != want) {
    SLOG_ERROR("object {}: checksum mismatch in block at offset {} ({}): stored {:08x}, data {:08x}",
               obj.id, off, obj.data_path, want, have);
    return Status::Corruption("object " + std::to_string(obj.id) + ": checksum mismatch in block at offset " +
                              std::to_string(off));
  }
  return Status::OK();
}

// Computes and stores the CRC of what the block holds now.
Status ObjectStore::rechecksum_block(ObjectFile& obj, uint64_t block, bool verify_first) {
  std::array<std::byte, kBlockSize> buf;
  uint64_t off = block * kBlockSize;
  if (verify_first) {
    SURGE_RETURN_IF_ERROR(read_block(obj, block, buf.data()));
  }
  iovec v{buf.data(), kBlockSize};
  SURGE_ASSIGN_OR_RETURN(uint64_t got, preadv_all(obj.data_fd, {&v, 1}, off, obj.data_path));
  std::memset(buf.data() + got, 0, kBlockSize - got);
  uint32_t stored = encode_block_crc(surge::crc32c(buf.data(), kBlockSize));
  if (::pwrite(obj.crc_fd, &stored, sizeof stored, static_cast<off_t>(block * kCrcEntrySize)) !=
      static_cast<ssize_t>(sizeof stored)) {
    return errno_status(errno, "write checksum of object " + std::to_string(obj.id));
  }
  return Status::OK();
}

Status ObjectStore::check_space(uint64_t id, uint64_t bytes) {
  if (options_.reserved_free_bytes == 0) return Status::OK();
  struct statvfs vfs {};
  if (::statvfs(options_.data_dir.c_str(), &vfs) != 0) return errno_status(errno, "statvfs " + options_.data_dir);
  uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  if (free_bytes < options_.reserved_free_bytes + bytes) {
    return Status::NoSpace("object " + std::to_string(id) + ": " + options_.data_dir + " has " +
                           std::to_string(free_bytes) + " bytes free, reserve is " +
                           std::to_string(options_.reserved_free_bytes));
  }
  return Status::OK();
}

Result<uint64_t> ObjectStore::write(uint64_t id, uint64_t offset, std::span<const iovec> data,
                                    bool sync, const PayloadChecksums* sums) {
  const uint64_t len = segments_length(data);
  if (id == 0) return Status::InvalidArgument("write: object id 0 is not an object");
  if (offset > options_.max_object_size || len > options_.max_object_size - offset) {
    return Status::InvalidArgument("write object " + std::to_string(id) + ": range [" +
                                   std::to_string(offset) + ", +" + std::to_string(len) +
                                   ") past the maximum object size " +
                                   std::to_string(options_.max_object_size));
  }
  SURGE_ASSIGN_OR_RETURN(auto obj, get(id, true));
  if (len == 0) return obj->size;
  SURGE_RETURN_IF_ERROR(check_space(id, len));
  std::unique_lock lk(obj->mu);
  const uint64_t old_size = obj->size;
  const uint64_t end = offset + len;
  const uint64_t b0 = offset / kBlockSize;
  const uint64_t b1 = (end - 1) / kBlockSize;
  if (sums != nullptr && (sums->first_block != b0 || sums->full_block.size() != b1 - b0 + 1)) {
    throw std::logic_error("ObjectStore::write: checksums of another payload for object " +
                           std::to_string(id));
  }
  std::vector<uint32_t> crcs(b1 - b0 + 1);
  for (uint64_t b = b0; b <= b1; ++b) {
    const uint64_t bs = b * kBlockSize, be = bs + kBlockSize;
    const uint64_t ns = std::max(bs, offset), ne = std::min(be, end);
    uint32_t crc;
    if (ns == bs && ne == be) {
      crc = sums != nullptr ? sums->full_block[b - b0]
                            : crc32c_segments(data, ns - offset, kBlockSize);
    } else {
      // Partial block: merge with what it holds, after checking that (a
      // corrupt block must not get a fresh CRC over its bad bytes). A block
      // wholly past the old end holds zeros by definition (its CRC covers
      // them as zeros), so it is not read: a small write to a fresh object,
      // or an append that starts a block, costs no read of data or sidecar.
      std::array<std::byte, kBlockSize> old{};
      if (bs < old_size) {
        SURGE_RETURN_IF_ERROR(read_block(*obj, b, old.data()));
        blocks_read_back_.fetch_add(1, std::memory_order_relaxed);
      }
      crc = surge::crc32c(old.data(), ns - bs);
      crc = crc32c_segments(data, ns - offset, ne - ns, crc);
      crc = surge::crc32c(old.data() + (ne - bs), be - ne, crc);
    }
    crcs[b - b0] = encode_block_crc(crc);
  }
  SURGE_RETURN_IF_ERROR(begin_change(id));
  ChangeScope change(this, id);

  auto undo = [&](Status st) -> Status {
    // A failed write is never acknowledged, so any mix of old and new bytes
    // is a correct outcome, but it must stay readable and must not grow the
    // object: cut any extension, then re-checksum the blocks it may have
    // changed inside the old size.
    if (end > old_size) {
      if (::ftruncate(obj->data_fd, static_cast<off_t>(old_size)) != 0 ||
          ::ftruncate(obj->crc_fd, static_cast<off_t>((old_size + kBlockSize - 1) / kBlockSize *
                                                      kCrcEntrySize)) != 0) {
        SLOG_ERROR("object {}: cannot undo the extension by a failed write of {}: {}", id,
                   obj->data_path, std::strerror(errno));
      }
    }
    for (uint64_t b = b0; b * kBlockSize < std::min(end, old_size); ++b) {
      Status rs = rechecksum_block(*obj, b, false);
      if (!rs.ok()) SLOG_ERROR("object {}: {}", id, rs.ToString());
    }
    return st;
  };

  int fd = (obj->direct_fd >= 0 && segments_aligned(data, offset)) ? obj->direct_fd : obj->data_fd;
  Status st = pwritev_all(fd, data, offset, "object " + std::to_string(id) + " " + obj->data_path);
  if (!st.ok()) return undo(std::move(st));
  crash_point("after_data_write");
  iovec cv{crcs.data(), crcs.size() * kCrcEntrySize};
  st = pwritev_all(obj->crc_fd, {&cv, 1}, b0 * kCrcEntrySize, "checksums of object " + std::to_string(id));
  if (!st.ok()) return undo(std::move(st));
  crash_point("after_crc_write");
  obj->size = std::max(old_size, end);
  if (sync) SURGE_RETURN_IF_ERROR(sync_object(*obj));
  return obj->size;
}

Result<uint64_t> ObjectStore::read(uint64_t id, uint64_t offset, std::span<std::byte> dst,
                                   uint32_t* crc_out) {
  if (id == 0) return Status::InvalidArgument("read: object id 0 is not an object");
  auto got_obj = get(id, false);
  if (!got_obj.ok()) {
    if (got_obj.status().code() == Code::kNotFound) return uint64_t{0};
    return got_obj.status();
  }
  auto obj = std::move(got_obj).value();
  std::shared_lock lk(obj->mu);
  const uint64_t size = obj->size;
  if (offset >= size || dst.empty()) return uint64_t{0};
  const uint64_t n = std::min<uint64_t>(dst.size(), size - offset);
  const uint64_t a = offset - offset % kBlockSize;  // first block start
  const uint64_t blocks_end = (offset + n + kBlockSize - 1) / kBlockSize * kBlockSize;
  const uint64_t e = std::min(blocks_end, size);  // data in the covering blocks ends here
  // One preadv: head of the first block, the caller's bytes, tail of the last.
  alignas(kBlockSize) std::array<std::byte, kBlockSize> head, tail;
  iovec v[3] = {{head.data(), offset - a}, {dst.data(), n}, {tail.data(), e - (offset + n)}};
  const bool direct = obj->direct_fd >= 0 && v[0].iov_len == 0 && v[2].iov_len == 0 &&
                      aligned(reinterpret_cast<uintptr_t>(dst.data())) && aligned(n) && aligned(offset);
  SURGE_ASSIGN_OR_RETURN(uint64_t got, preadv_all(direct ? obj->direct_fd : obj->data_fd, v, a, obj->data_path));
  if (got != e - a) {
    return Status::IOError("object " + std::to_string(id) + ": short read at offset " +
                           std::to_string(a) + " of " + obj->data_path);
  }
  // Stored CRCs of the covering blocks, in one read.
  const uint64_t b0 = a / kBlockSize, nb = (blocks_end - a) / kBlockSize;
  std::vector<uint32_t> stored(nb, 0);
  ssize_t cr = ::pread(obj->crc_fd, stored.data(), nb * kCrcEntrySize, static_cast<off_t>(b0 * kCrcEntrySize));
  if (cr < 0) return errno_status(errno, "read checksums of object " + std::to_string(id));
  static const Crc32cShift block_shift(kBlockSize);
  uint32_t out = crc_out != nullptr ? *crc_out : 0;
  for (uint64_t i = 0; i < nb; ++i) {
    const uint64_t bs = a + i * kBlockSize;
    const uint64_t data_end = std::min(bs + kBlockSize, e);
    uint32_t crc = crc32c_segments(v, bs - a, data_end - bs);
    if (crc_out != nullptr) {
      // A block read whole is its own CRC; the caller's part of a partial
      // block (at most the first and the last) is checksummed apart.
      if (bs >= offset && bs + kBlockSize <= offset + n) {
        out = block_shift.combine(out, crc);
      } else {
        const uint64_t from = std::max(bs, offset), to = std::min(bs + kBlockSize, offset + n);
        out = surge::crc32c(dst.data() + (from - offset), to - from, out);
      }
    }
    crc = crc32c_zeros(bs + kBlockSize - data_end, crc);
    if (crc != decode_block_crc(stored[i])) {
      SLOG_ERROR("object {}: checksum mismatch in block at offset {} ({}): stored {:08x}, data {:08x}", id,
                 bs, obj->data_path, decode_block_crc(stored[i]), crc);
      return Status::Corruption("object " + std::to_string(id) + ": checksum mismatch in block at offset " +
                                std::to_string(bs));
    }
  }
  if (crc_out != nullptr) *crc_out = out;
  return n;
}

Status ObjectStore::truncate(uint64_t id, uint64_t size, std::optional<uint64_t> only_if_size) {
  if (id == 0) return Status::InvalidArgument("truncate: object id 0 is not an object");
  if (size > options_.max_object_size) {
    return Status::InvalidArgument("truncate object " + std::to_string(id) + " to " + std::to_string(size) +
                                   ": past the maximum object size " + std::to_string(options_.max_object_size));
  }
  auto got = get(id, size > 0);
  if (!got.ok()) {
    if (got.status().code() == Code::kNotFound) return Status::OK();  // size 0 of nothing
    return got.status();
  }
  auto obj = std::move(got).value();
  std::unique_lock lk(obj->mu);
  if (only_if_size && obj->size != *only_if_size) return Status::OK();
  return truncate_locked(*obj, size);
}

Status ObjectStore::truncate_locked(ObjectFile& obj, uint64_t size) {
  const uint64_t id = obj.id;
  if (size == obj.size) return Status::OK();
  // The block that will hold the new end must be sound before it is cut.
  if (size < obj.size && size % kBlockSize != 0) {
    std::array<std::byte, kBlockSize> buf;
    SURGE_RETURN_IF_ERROR(read_block(obj, size / kBlockSize, buf.data()));
  }
  SURGE_RETURN_IF_ERROR(begin_change(id));
  ChangeScope change(this, id);
  if (::ftruncate(obj.data_fd, static_cast<off_t>(size)) != 0) {
    return errno_status(errno, "truncate object " + std::to_string(id) + " " + obj.data_path +
                                   " to " + std::to_string(size));
  }
  const uint64_t old_size = obj.size;
  obj.size = size;
  if (size < old_size && size % kBlockSize != 0) {
    SURGE_RETURN_IF_ERROR(rechecksum_block(obj, size / kBlockSize, false));
  }
  // Growing needs no CRC work: the old tail was checksummed as zero-padded.
  if (size < old_size) {
    off_t crc_len = static_cast<off_t>((size + kBlockSize - 1) / kBlockSize * kCrcEntrySize);
    if (::ftruncate(obj.crc_fd, crc_len) != 0) {
      return errno_status(errno, "truncate checksums of object " + std::to_string(id));
    }
  }
  return Status::OK();
}

Result<bool> ObjectStore::remove(uint64_t id) {
  if (id == 0) return Status::InvalidArgument("remove: object id 0 is not an object");
  std::shared_ptr<ObjectFile> dropped;  // closes after the lock, if the last reference
  {
    std::lock_guard lk(cache_mu_);
    if (opening_.count(id) != 0) doomed_.insert(id);
    evicted_.erase(id);
    auto it = cache_.find(id);
    if (it != cache_.end()) {
      dropped = std::move(it->second.obj);
      lru_.erase(it->second.lru_pos);
      cache_.erase(it);
    }
  }
  std::string dpath = data_path(id);
  bool existed = true;
  if (::unlink(dpath.c_str()) != 0) {
    if (errno != ENOENT) return errno_status(errno, "remove object " + std::to_string(id) + " " + dpath);
    existed = false;
  }
  std::string cpath = crc_path(id);
  if (::unlink(cpath.c_str()) != 0 && errno != ENOENT) {
    return errno_status(errno, "remove checksums of object " + std::to_string(id) + " " + cpath);
  }
  std::string gpath = generation_path(id);
  if (::unlink(gpath.c_str()) != 0 && errno != ENOENT) {
    return errno_status(
        errno, "remove the truncate generation of object " + std::to_string(id) + " " + gpath);
  }
  if (existed) objects_.fetch_sub(1);
  std::lock_guard lk(dirty_mu_);
  dirty_.erase(id);
  new_dirs_.erase(id);
  return existed;
}

Result<uint64_t> ObjectStore::stat(uint64_t id) {
  if (id == 0) return Status::InvalidArgument("stat: object id 0 is not an object");
  SURGE_ASSIGN_OR_RETURN(auto obj, get(id, false));
  std::shared_lock lk(obj->mu);
  return obj->size;
}

Status ObjectStore::sync_object(ObjectFile& obj) {
  if (::fdatasync(obj.data_fd) != 0) {
    return errno_status(errno, "sync object " + std::to_string(obj.id) + " " + obj.data_path);
  }
  if (::fdatasync(obj.crc_fd) != 0) {
    return errno_status(errno, "sync checksums of object " + std::to_string(obj.id));
  }
  bool new_dir;
  {
    std::lock_guard lk(dirty_mu_);
    new_dir = new_dirs_.erase(obj.id) > 0;
  }
  if (new_dir) {
    // The name of a new object must be durable too, or a synced object
    // could vanish in a crash: its directory, and each fan-out directory
    // created since it was last synced, up to objects/.
    const std::string dir = fanout_dir(options_.data_dir, obj.id);
    const std::string mid = dir.substr(0, dir.rfind('/'));
    bool leaf_new, mid_new;
    {
      std::lock_guard lk(dirty_mu_);
      leaf_new = unsynced_dirs_.count(dir) > 0;
      mid_new = unsynced_dirs_.count(mid) > 0;
    }
    Status st = fsync_dir(dir);
    if (st.ok() && leaf_new) st = fsync_dir(mid);
    if (st.ok() && mid_new) st = fsync_dir(options_.data_dir + "/objects");
    std::lock_guard lk(dirty_mu_);
    if (!st.ok()) {
      new_dirs_.insert(obj.id);
      return st;
    }
    if (leaf_new) unsynced_dirs_.erase(dir);
    if (mid_new) unsynced_dirs_.erase(mid);
  }
  return Status::OK();
}

Status ObjectStore::sync(std::span<const uint64_t> ids) {
  std::vector<uint64_t> todo;
  {
    std::lock_guard lk(dirty_mu_);
    if (ids.empty()) {
      todo.assign(dirty_.begin(), dirty_.end());
    } else {
      for (uint64_t id : ids) {
        if (dirty_.count(id)) todo.push_back(id);
      }
    }
    // Taken out first: a write racing with this sync marks its object again.
    for (uint64_t id : todo) dirty_.erase(id);
  }
  for (size_t i = 0; i < todo.size(); ++i) {
    auto obj = get(todo[i], false);
    Status st = obj.ok() ? sync_object(**obj) : obj.status();
    if (st.code() == Code::kNotFound) continue;  // removed meanwhile
    if (!st.ok()) {
      std::lock_guard lk(dirty_mu_);
      for (size_t j = i; j < todo.size(); ++j) dirty_.insert(todo[j]);
      return st;
    }
  }
  if (ids.empty()) {
    // Everything written so far is durable: the dirty log can start over
    // (objects dirtied meanwhile are logged again on their next write).
    std::lock_guard lk(dirty_mu_);
    // Not while a change is between begin_change and end_change: its
    // entry must stay until its object is synced.
    if (dirty_.empty() && changes_in_progress_ == 0 && dirty_log_fd_ >= 0) {
      if (::ftruncate(dirty_log_fd_, 0) != 0) return errno_status(errno, "truncate dirty.log");
      logged_.clear();
    }
  }
  return Status::OK();
}

Result<StoreStats> ObjectStore::statfs() {
  struct statvfs vfs {};
  if (::statvfs(options_.data_dir.c_str(), &vfs) != 0) return errno_status(errno, "statvfs " + options_.data_dir);
  StoreStats s;
  s.capacity_bytes = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
  s.free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  s.objects = objects_.load();
  SURGE_ASSIGN_OR_RETURN(s.filesystem_id, filesystem_id_of(options_.data_dir));
  return s;
}

Status ObjectStore::verify(uint64_t id) {
  SURGE_ASSIGN_OR_RETURN(auto obj, get(id, false));
  std::shared_lock lk(obj->mu);
  return verify_locked(*obj);
}

Status ObjectStore::scrub(uint32_t first_dir, uint32_t count, size_t max_bad, ScrubStats& out) {
  // Directory d is objects/<d >> 8>/<d & 0xff> (hex): a slice covers whole
  // first-level directories, each listed once, so the leaves that were
  // never created cost nothing (most of them, on a young data server).
  const uint32_t end = std::min<uint64_t>(kFanoutDirs, uint64_t{first_dir} + count);
  std::array<bool, 256> leaf_exists{};
  uint32_t listed_top = UINT32_MAX;
  for (uint32_t d = first_dir; d < end; ++d) {
    // d < 65536: two hex digits each (sized for any uint32_t all the same,
    // which sanitizer builds' truncation warnings insist on).
    char top[12], sub[24];
    std::snprintf(top, sizeof top, "%02x", (d >> 8) & 0xffu);
    std::snprintf(sub, sizeof sub, "%02x/%02x", (d >> 8) & 0xffu, d & 0xffu);
    if (listed_top != d >> 8) {
      listed_top = d >> 8;
      leaf_exists.fill(false);
      std::string tdir = options_.data_dir + "/objects/" + top;
      if (DIR* th = ::opendir(tdir.c_str())) {
        while (dirent* e = ::readdir(th)) {
          if (std::strlen(e->d_name) == 2) {
            leaf_exists[std::strtoul(e->d_name, nullptr, 16) & 0xff] = true;
          }
        }
        ::closedir(th);
      } else if (errno != ENOENT) {
        return errno_status(errno, "scrub: open directory " + tdir);
      }
    }
    if (!leaf_exists[d & 0xff]) continue;
    std::string dir = options_.data_dir + "/objects/" + sub;
    DIR* dh = ::opendir(dir.c_str());
    if (dh == nullptr) {
      if (errno == ENOENT) continue;
      return errno_status(errno, "scrub: open directory " + dir);
    }
    std::vector<uint64_t> ids;
    while (dirent* e = ::readdir(dh)) {
      std::string_view n = e->d_name;
      if (n.size() != 20 || n.substr(16) != ".dat") continue;
      ids.push_back(std::strtoull(std::string(n.substr(0, 16)).c_str(), nullptr, 16));
    }
    ::closedir(dh);
    for (uint64_t id : ids) {
      auto got = get(id, false);
      if (!got.ok()) {
        if (got.status().code() == Code::kNotFound) continue;  // removed meanwhile
        return got.status();
      }
      ObjectFile& obj = **got;
      std::shared_lock lk(obj.mu);
      SURGE_RETURN_IF_ERROR(scan_blocks(obj, [&](uint64_t b) {
        SLOG_ERROR("object {}: scrub: checksum mismatch in block at offset {} ({})", id, b * kBlockSize,
                   obj.data_path);
        if (out.bad.size() < max_bad) out.bad.emplace_back(id, b * kBlockSize);
        return Status::OK();
      }));
      ++out.objects;
      out.bytes += obj.size;
    }
  }
  return Status::OK();
}

Status ObjectStore::verify_locked(ObjectFile& obj) {
  return scan_blocks(obj, [&](uint64_t b) {
    SLOG_ERROR("object {}: checksum mismatch in block at offset {} ({})", obj.id, b * kBlockSize, obj.data_path);
    return Status::Corruption("object " + std::to_string(obj.id) + ": checksum mismatch in block at offset " +
                              std::to_string(b * kBlockSize));
  });
}

// Whole-object checks (recovery, scrub, verify) read 1 MiB of data and its
// 256 CRCs per step rather than two small reads per block.
Status ObjectStore::scan_blocks(ObjectFile& obj, const std::function<Status(uint64_t block)>& on_bad) {
  constexpr uint64_t kStepBlocks = 256;
  std::vector<std::byte> buf(kStepBlocks * kBlockSize);
  std::vector<uint32_t> stored(kStepBlocks);
  const uint64_t blocks = (obj.size + kBlockSize - 1) / kBlockSize;
  for (uint64_t b0 = 0; b0 < blocks; b0 += kStepBlocks) {
    const uint64_t nb = std::min(kStepBlocks, blocks - b0);
    iovec v{buf.data(), nb * kBlockSize};
    SURGE_ASSIGN_OR_RETURN(uint64_t got, preadv_all(obj.data_fd, {&v, 1}, b0 * kBlockSize, obj.data_path));
    std::memset(buf.data() + got, 0, nb * kBlockSize - got);
    std::fill(stored.begin(), stored.end(), 0);
    if (::pread(obj.crc_fd, stored.data(), nb * kCrcEntrySize, static_cast<off_t>(b0 * kCrcEntrySize)) < 0) {
      return errno_status(errno, "read checksums of object " + std::to_string(obj.id));
    }
    for (uint64_t i = 0; i < nb; ++i) {
      if (surge::crc32c(buf.data() + i * kBlockSize, kBlockSize) != decode_block_crc(stored[i])) {
        SURGE_RETURN_IF_ERROR(on_bad(b0 + i));
      }
    }
  }
  return Status::OK();
}

}  // namespace surge::ods
