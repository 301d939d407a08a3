// surge/surge.h over surge/client.h: errno-style returns, opaque handles.
#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "surge/client.h"
#include "surge/surge.h"

struct surge_client {
  std::unique_ptr<surge::Client> client;
  surge::Caller caller;
  std::mutex buffers_mu;
  std::unordered_map<void*, std::unique_ptr<surge::RegisteredBuffer>> buffers;
};

struct surge_file {
  surge::FileRef file;
};

namespace {

int neg(const surge::Status& st) { return -st.to_errno(); }

void fill_stat(const surge::Attr& a, struct stat* st) {
  std::memset(st, 0, sizeof(*st));
  st->st_ino = a.ino;
  st->st_mode = a.mode;
  st->st_nlink = a.nlink;
  st->st_uid = a.uid;
  st->st_gid = a.gid;
  st->st_size = static_cast<off_t>(a.size);
  st->st_rdev = a.rdev;
  st->st_blksize = 1 << 20;
  st->st_blocks = static_cast<blkcnt_t>((a.size + 511) / 512);
  st->st_atim.tv_sec = a.atime.sec;
  st->st_atim.tv_nsec = a.atime.nsec;
  st->st_mtim.tv_sec = a.mtime.sec;
  st->st_mtim.tv_nsec = a.mtime.nsec;
  st->st_ctim.tv_sec = a.ctime.sec;
  st->st_ctim.tv_nsec = a.ctime.nsec;
}

}  // namespace

extern "C" {

int surge_connect(const surge_options_t* o, surge_t** out) {
  if (o == nullptr || o->mds_address == nullptr || out == nullptr) return -EINVAL;
  surge::ClientOptions opt;
  opt.mds_address = o->mds_address;
  if (o->cluster_key) opt.cluster_key = o->cluster_key;
  if (o->cluster_key_file) opt.cluster_key_file = o->cluster_key_file;
  if (o->transport) opt.transport = o->transport;
  if (o->io_timeout_ms) opt.io_timeout = std::chrono::milliseconds(o->io_timeout_ms);
  if (o->mds_timeout_ms) opt.mds_timeout = std::chrono::milliseconds(o->mds_timeout_ms);
  auto c = surge::Client::Connect(opt);
  if (!c.ok()) return neg(c.status());
  auto* fs = new surge_client;
  fs->client = std::move(*c);
  fs->caller = surge::Caller::Current();
  *out = fs;
  return 0;
}

void surge_disconnect(surge_t* fs) { delete fs; }

int surge_open(surge_t* fs, const char* path, int flags, mode_t mode, surge_file_t** out) {
  auto f = fs->client->open(std::string_view(path), flags, mode, fs->caller);
  if (!f.ok()) return neg(f.status());
  *out = new surge_file{std::move(*f)};
  return 0;
}

int surge_close(surge_t* fs, surge_file_t* f) {
  surge::Status st = fs->client->close(std::move(f->file));
  delete f;
  return st.ok() ? 0 : neg(st);
}

ssize_t surge_pread(surge_t* fs, surge_file_t* f, void* buf, size_t len, uint64_t offset) {
  auto n = fs->client->pread(*f->file, buf, len, offset);
  return n.ok() ? static_cast<ssize_t>(*n) : neg(n.status());
}

ssize_t surge_pwrite(surge_t* fs, surge_file_t* f, const void* buf, size_t len, uint64_t offset) {
  auto n = fs->client->pwrite(*f->file, buf, len, offset);
  return n.ok() ? static_cast<ssize_t>(*n) : neg(n.status());
}

int surge_fsync(surge_t* fs, surge_file_t* f) {
  surge::Status st = fs->client->fsync(*f->file, false);
  return st.ok() ? 0 : neg(st);
}

int surge_fallocate(surge_t* fs, surge_file_t* f, int mode, uint64_t offset, uint64_t length) {
  surge::Status st = fs->client->fallocate(*f->file, mode, offset, length);
  return st.ok() ? 0 : neg(st);
}

void* surge_alloc_buffer(surge_t* fs, size_t size) {
  auto b = fs->client->register_buffer(size);
  if (!b.ok()) return nullptr;
  void* p = (*b)->data();
  std::lock_guard lk(fs->buffers_mu);
  fs->buffers[p] = std::move(*b);
  return p;
}

void surge_free_buffer(surge_t* fs, void* buf) {
  std::lock_guard lk(fs->buffers_mu);
  fs->buffers.erase(buf);
}

int surge_stat(surge_t* fs, const char* path, struct stat* st) {
  auto a = fs->client->stat(path, fs->caller);
  if (!a.ok()) return neg(a.status());
  fill_stat(*a, st);
  return 0;
}

int surge_truncate(surge_t* fs, const char* path, uint64_t size) {
  surge::Status st = fs->client->truncate(path, size, fs->caller);
  return st.ok() ? 0 : neg(st);
}

int surge_mkdir(surge_t* fs, const char* path, mode_t mode) {
  surge::Status st = fs->client->mkdir(std::string_view(path), mode, fs->caller);
  return st.ok() ? 0 : neg(st);
}

int surge_rmdir(surge_t* fs, const char* path) {
  surge::Status st = fs->client->rmdir(std::string_view(path), fs->caller);
  return st.ok() ? 0 : neg(st);
}

int surge_unlink(surge_t* fs, const char* path) {
  surge::Status st = fs->client->unlink(std::string_view(path), fs->caller);
  return st.ok() ? 0 : neg(st);
}

int surge_rename(surge_t* fs, const char* from, const char* to) {
  surge::Status st =
      fs->client->rename(std::string_view(from), std::string_view(to), 0, fs->caller);
  return st.ok() ? 0 : neg(st);
}

int surge_link(surge_t* fs, const char* existing, const char* new_path) {
  surge::Status st =
      fs->client->link(std::string_view(existing), std::string_view(new_path), fs->caller);
  return st.ok() ? 0 : neg(st);
}

int surge_symlink(surge_t* fs, const char* target, const char* link_path) {
  surge::Status st =
      fs->client->symlink(std::string_view(target), std::string_view(link_path), fs->caller);
  return st.ok() ? 0 : neg(st);
}

int surge_readdir(surge_t* fs, const char* path, surge_dirent_fn fn, void* arg) {
  auto entries = fs->client->list(path, fs->caller);
  if (!entries.ok()) return neg(entries.status());
  for (const auto& e : *entries) {
    struct stat st;
    fill_stat(e.attr, &st);
    if (fn(e.name.c_str(), &st, arg) != 0) break;
  }
  return 0;
}

int surge_getxattr(surge_t* fs, const char* path, const char* name, void* value, size_t size) {
  auto a = fs->client->stat(path, fs->caller);
  if (!a.ok()) return neg(a.status());
  auto v = fs->client->getxattr(a->ino, name, fs->caller);
  if (!v.ok()) return neg(v.status());
  if (size == 0) return static_cast<int>(v->size());
  if (size < v->size()) return -ERANGE;
  std::memcpy(value, v->data(), v->size());
  return static_cast<int>(v->size());
}

int surge_setxattr(surge_t* fs, const char* path, const char* name, const void* value,
                   size_t size, int flags) {
  auto a = fs->client->stat(path, fs->caller);
  if (!a.ok()) return neg(a.status());
  surge::Status st = fs->client->setxattr(
      a->ino, name, std::string_view(static_cast<const char*>(value), size),
      static_cast<uint32_t>(flags), fs->caller);
  return st.ok() ? 0 : neg(st);
}

int surge_statfs(surge_t* fs, surge_statfs_t* out) {
  auto s = fs->client->statfs();
  if (!s.ok()) return neg(s.status());
  out->total_bytes = s->total_bytes;
  out->free_bytes = s->free_bytes;
  out->total_inodes = s->total_inodes;
  out->free_inodes = s->free_inodes;
  return 0;
}

}  // extern "C"
