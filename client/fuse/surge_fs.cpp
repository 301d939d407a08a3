#include "client/fuse/surge_fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "client/fuse/fuse_loop.h"
#include "client/fuse/fuse_metrics.h"
#include "client/fuse/init_extensions.h"
#include "client/fuse/kill_privs.h"
#include "common/log.h"

namespace surge::fuse {

namespace {

SurgeFs& fs_of(fuse_req_t req) { return *static_cast<SurgeFs*>(fuse_req_userdata(req)); }

Caller caller_of(fuse_req_t req) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  Caller c;
  c.uid = ctx->uid;
  c.gid = ctx->gid;
  if (c.uid != 0) {
    // Supplementary groups of the calling thread (from /proc).
    gid_t groups[64];
    int n = fuse_req_getgroups(req, 64, groups);
    if (n > 64) {
      std::vector<gid_t> big(static_cast<size_t>(n));
      n = fuse_req_getgroups(req, n, big.data());
      for (int i = 0; i < n; ++i) c.groups.push_back(big[static_cast<size_t>(i)]);
    } else {
      for (int i = 0; i < n; ++i) c.groups.push_back(groups[i]);
    }
  }
  return c;
}

int err_of(const Status& st, const char* op, uint64_t ino) {
  int e = st.to_errno();
  if (e == EIO || e == ETIMEDOUT || e == EPROTO) {
    SLOG_WARN("fuse: {} on inode {}: {}", op, ino, st.ToString());
  } else {
    SLOG_DEBUG("fuse: {} on inode {}: {}", op, ino, st.ToString());
  }
  return e;
}

void to_stat(const Attr& a, struct stat* st) {
  std::memset(st, 0, sizeof(*st));
  st->st_ino = a.ino;
  st->st_mode = a.mode;
  st->st_nlink = a.nlink;
  st->st_uid = a.uid;
  st->st_gid = a.gid;
  st->st_size = static_cast<off_t>(a.size);
  st->st_rdev = static_cast<dev_t>(a.rdev);
  st->st_blksize = 1 << 20;  // the stripe: tools size their IO from this
  st->st_blocks = static_cast<blkcnt_t>((a.size + 511) / 512);
  st->st_atim.tv_sec = a.atime.sec;
  st->st_atim.tv_nsec = a.atime.nsec;
  st->st_mtim.tv_sec = a.mtime.sec;
  st->st_mtim.tv_nsec = a.mtime.nsec;
  st->st_ctim.tv_sec = a.ctime.sec;
  st->st_ctim.tv_nsec = a.ctime.nsec;
}

fuse_entry_param entry_of(SurgeFs& fs, const Attr& a) {
  fuse_entry_param e;
  std::memset(&e, 0, sizeof(e));
  e.ino = a.ino;
  e.generation = a.generation;
  to_stat(a, &e.attr);
  e.attr_timeout = fs.options().attr_timeout;
  e.entry_timeout = fs.options().entry_timeout;
  return e;
}

// Replies with an entry and counts the kernel's new reference. age: how
// old the entry is (a stat-ahead fetch's), taken off its timeouts.
void reply_entry(fuse_req_t req, const Result<Attr>& a, const char* op, Ino parent,
                 std::chrono::nanoseconds age = {}) {
  SurgeFs& fs = fs_of(req);
  if (!a.ok()) {
    reply_error(req, err_of(a.status(), op, parent));
    return;
  }
  fuse_entry_param e = entry_of(fs, *a);
  const double aged = std::chrono::duration<double>(age).count();
  e.attr_timeout = std::max(0.0, e.attr_timeout - aged);
  e.entry_timeout = std::max(0.0, e.entry_timeout - aged);
  fs.remember(a->ino);
  if (fuse_reply_entry(req, &e) != 0) fs.forget(a->ino, 1);  // interrupted: no reference
}

void reply_status(fuse_req_t req, const Status& st, const char* op, Ino ino) {
  reply_error(req, st.ok() ? 0 : err_of(st, op, ino));
}

struct OpenFile {
  FileRef file;
  // The mode as last seen: a write by a caller without CAP_FSETID clears
  // setuid/setgid at the MDS when this says there are some to clear.
  std::atomic<uint32_t> mode{0};
};
OpenFile& open_file_of(fuse_file_info* fi) { return *reinterpret_cast<OpenFile*>(fi->fh); }
FileRef& file_of(fuse_file_info* fi) { return open_file_of(fi).file; }

// Clears setuid/setgid of an open file at the MDS (a write or O_TRUNC open
// by a caller without CAP_FSETID), and the kernel's cached mode with them.
Status kill_privs(fuse_req_t req, fuse_ino_t ino, OpenFile& of) {
  SurgeFs& fs = fs_of(req);
  SetAttr sa;
  sa.mask = kKillSuidgid;
  sa.file = of.file.get();
  auto a = fs.client().setattr(ino, sa, caller_of(req));
  if (!a.ok()) return a.status();
  of.mode.store(a->mode);
  if (fs.session() != nullptr) fuse_lowlevel_notify_inval_inode(fs.session(), ino, -1, 0);
  return Status::OK();
}

// ---- operations ------------------------------------------------------------

void op_init(void* userdata, fuse_conn_info* conn) {
  auto* fs = static_cast<SurgeFs*>(userdata);
  const FsOptions& o = fs->options();
  conn->max_write = o.max_write;
  conn->max_readahead = o.max_readahead;
  conn->max_read = o.max_read;  // as the mount option said (surge_fuse_main)
  conn->max_background = o.max_background;
  conn->congestion_threshold = o.max_background * 3 / 4;
  auto want = [conn](unsigned cap) {
    if (conn->capable & cap) conn->want |= cap;
  };
  want(FUSE_CAP_ASYNC_READ);
  want(FUSE_CAP_ATOMIC_O_TRUNC);   // O_TRUNC arrives with open; the MDS truncates
  want(FUSE_CAP_READDIRPLUS);
  want(FUSE_CAP_PARALLEL_DIROPS);
  want(FUSE_CAP_ASYNC_DIO);
  want(FUSE_CAP_CACHE_SYMLINKS);
  // With FUSE_HANDLE_KILLPRIV_V2 (init_extensions.h) the kernel flags the
  // requests of callers without CAP_FSETID; v1 would leave us to guess.
  if (killpriv_v2_offered()) conn->want &= ~static_cast<unsigned>(FUSE_CAP_HANDLE_KILLPRIV);
  conn->want &= ~static_cast<unsigned>(FUSE_CAP_READDIRPLUS_AUTO);  // always plus
  conn->want &= ~static_cast<unsigned>(FUSE_CAP_WRITEBACK_CACHE);   // write-through
  SLOG_INFO("fuse: init: max_write {} KiB, max_readahead {} KiB, capable {:#x}, want {:#x}",
            o.max_write >> 10, o.max_readahead >> 10, conn->capable, conn->want);
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  SurgeFs& fs = fs_of(req);
  // A run of lookups here may be answered from one readdirplus of the
  // directory (Client::lookup_ahead), no older than the kernel would keep
  // the entry; the kernel has checked search permission on parent.
  const auto max_age =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(
          std::min(fs.options().entry_timeout, fs.options().attr_timeout)));
  std::chrono::nanoseconds age{};
  Result<Attr> a = fs.client().lookup_ahead(parent, name, caller_of(req), max_age, &age);
  if (!a.ok() && a.status().code() == Code::kNotFound && fs.options().negative_timeout > 0) {
    // A negative entry: inode 0 with a timeout is how FUSE says "cache
    // this miss" (plain ENOENT is never cached).
    fuse_entry_param e;
    std::memset(&e, 0, sizeof(e));
    e.entry_timeout = fs.options().negative_timeout;
    fuse_reply_entry(req, &e);
    return;
  }
  reply_entry(req, a, "lookup", parent, age);
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  fs_of(req).forget(ino, nlookup);
  fuse_reply_none(req);
}

void op_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  SurgeFs& fs = fs_of(req);
  for (size_t i = 0; i < count; ++i) fs.forget(forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

// The kernel drops its attributes of a directory at every create, mkdir,
// unlink... in it, and with default_permissions it needs them at the next
// path walk through it: cp -a, tar -x and rm -rf would pay an MDS getattr
// per entry. The MDS answered that change with the directory's new
// attributes (Client::recent_dir_attr); they are given to the kernel for
// what is left of attr_timeout since they came, so no attribute it holds is
// older than attr_timeout, as with a getattr.
bool reply_recent_dir_attr(fuse_req_t req, SurgeFs& fs, fuse_ino_t ino) {
  const double timeout = fs.options().attr_timeout;
  if (timeout <= 0) return false;
  const auto max_age = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(timeout));
  std::chrono::nanoseconds age{};
  auto a = fs.client().recent_dir_attr(ino, max_age, &age);
  if (!a) return false;
  struct stat st;
  to_stat(*a, &st);
  fuse_reply_attr(req, &st, timeout - std::chrono::duration<double>(age).count());
  return true;
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  SurgeFs& fs = fs_of(req);
  if (reply_recent_dir_attr(req, fs, ino)) return;
  auto a = fs.client().getattr(ino, caller_of(req));
  if (!a.ok()) {
    reply_error(req, err_of(a.status(), "getattr", ino));
    return;
  }
  struct stat st;
  to_stat(*a, &st);
  fuse_reply_attr(req, &st, fs.options().attr_timeout);
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set,
                fuse_file_info* fi) {
  SurgeFs& fs = fs_of(req);
  SetAttr sa;
  if (to_set & FUSE_SET_ATTR_MODE) {
    sa.mask |= kSetMode;
    sa.mode = attr->st_mode;
  }
  if (to_set & FUSE_SET_ATTR_UID) {
    sa.mask |= kSetUid;
    sa.uid = attr->st_uid;
  }
  if (to_set & FUSE_SET_ATTR_GID) {
    sa.mask |= kSetGid;
    sa.gid = attr->st_gid;
  }
  if (to_set & FUSE_SET_ATTR_SIZE) {
    sa.mask |= kSetSize;
    sa.size = static_cast<uint64_t>(attr->st_size);
  }
  if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
    sa.mask |= kSetAtimeNow;
  } else if (to_set & FUSE_SET_ATTR_ATIME) {
    sa.mask |= kSetAtime;
    sa.atime = {attr->st_atim.tv_sec, static_cast<uint32_t>(attr->st_atim.tv_nsec)};
  }
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
    sa.mask |= kSetMtimeNow;
  } else if (to_set & FUSE_SET_ATTR_MTIME) {
    sa.mask |= kSetMtime;
    sa.mtime = {attr->st_mtim.tv_sec, static_cast<uint32_t>(attr->st_mtim.tv_nsec)};
  }
  if (to_set & FUSE_SET_ATTR_CTIME) {
    sa.mask |= kSetCtime;
    sa.ctime = {attr->st_ctim.tv_sec, static_cast<uint32_t>(attr->st_ctim.tv_nsec)};
  }
  if (setattr_kills_privs()) sa.mask |= kKillSuidgid;
  // The kernel passes the file handle (FATTR_FH) for ftruncate: a
  // descriptor opened for writing, whose permission was checked then.
  if (fi != nullptr && fi->fh != 0 && (to_set & FUSE_SET_ATTR_SIZE)) sa.file = file_of(fi).get();
  auto a = fs.client().setattr(ino, sa, caller_of(req));
  if (!a.ok()) {
    reply_error(req, err_of(a.status(), "setattr", ino));
    return;
  }
  struct stat st;
  to_stat(*a, &st);
  fuse_reply_attr(req, &st, fs.options().attr_timeout);
}

void op_readlink(fuse_req_t req, fuse_ino_t ino) {
  auto t = fs_of(req).client().readlink(ino);
  if (!t.ok()) {
    reply_error(req, err_of(t.status(), "readlink", ino));
    return;
  }
  fuse_reply_readlink(req, t->c_str());
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  reply_entry(req, fs_of(req).client().mknod(parent, name, mode, rdev, caller_of(req)), "mknod",
              parent);
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  reply_entry(req, fs_of(req).client().mkdir(parent, std::string_view(name), mode, caller_of(req)),
              "mkdir", parent);
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  reply_status(req, fs_of(req).client().unlink(parent, std::string_view(name), caller_of(req)),
               "unlink", parent);
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  reply_status(req, fs_of(req).client().rmdir(parent, std::string_view(name), caller_of(req)),
               "rmdir", parent);
}

void op_symlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
  reply_entry(req,
              fs_of(req).client().symlink(parent, std::string_view(name), std::string_view(link),
                                          caller_of(req)),
              "symlink", parent);
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
               const char* newname, unsigned int flags) {
  reply_status(req,
               fs_of(req).client().rename(parent, std::string_view(name), newparent,
                                          std::string_view(newname), flags, caller_of(req)),
               "rename", parent);
}

void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  reply_entry(req,
              fs_of(req).client().link(ino, newparent, std::string_view(newname), caller_of(req)),
              "link", ino);
}

// Whether the kernel caches this open's pages. Never across opens
// (keep_cache 0: close-to-open). A direct open gets libsurge's read-ahead
// in place of the kernel's, which it no longer has.
void set_caching(SurgeFs& fs, fuse_file_info* fi, uint64_t file_size) {
  fi->keep_cache = 0;
  fi->direct_io =
      direct_io_for(fs.options(), fi->flags, file_size, direct_io_mmap_granted()) ? 1 : 0;
  if (fi->direct_io) fs.client().set_read_ahead(*file_of(fi), fs.options().direct_read_ahead);
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  SurgeFs& fs = fs_of(req);
  // O_APPEND writes are placed by libsurge at the file's end as the MDS and
  // this client know it; the kernel's i_size may be older (another mount
  // appended since), which is why such opens are direct (direct_io_for).
  Attr a;
  auto f = fs.client().open(ino, fi->flags, caller_of(req), &a);
  if (!f.ok()) {
    reply_error(req, err_of(f.status(), "open", ino));
    return;
  }
  auto* of = new OpenFile{std::move(*f)};
  of->mode.store(a.mode);
  fi->fh = reinterpret_cast<uint64_t>(of);
  if ((fi->flags & O_TRUNC) && has_killable_privs(a.mode) && open_kills_privs()) {
    Status ks = kill_privs(req, ino, *of);
    if (!ks.ok()) {
      (void)fs.client().close(std::move(of->file));
      delete of;
      reply_error(req, err_of(ks, "open (clearing setuid/setgid)", ino));
      return;
    }
  }
  // Close-to-open: the kernel drops cached pages (keep_cache 0) and, as we
  // invalidate its attributes here, asks for a fresh size before it uses
  // one, so what another client closed is what this open sees. Only the
  // attributes are invalidated (offset -1): no page lock is taken, which
  // makes this safe inside the open request.
  if (fs.session() != nullptr) fuse_lowlevel_notify_inval_inode(fs.session(), ino, -1, 0);
  set_caching(fs, fi, a.size);
  // A read-only handle has nothing of its own to flush (the mount writes
  // through, no writeback cache): its close sends no FLUSH, one request
  // less per open-read-close (compilers, cat, mdtest's read phase).
  if ((fi->flags & O_ACCMODE) == O_RDONLY) fi->noflush = 1;
  if (fuse_reply_open(req, fi) != 0) {
    auto* of = reinterpret_cast<OpenFile*>(fi->fh);
    (void)fs.client().close(std::move(of->file));
    delete of;
  }
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
               fuse_file_info* fi) {
  SurgeFs& fs = fs_of(req);
  Attr a;
  auto f = fs.client().create(parent, name, mode, fi->flags, caller_of(req), &a);
  if (!f.ok()) {
    reply_error(req, err_of(f.status(), "create", parent));
    return;
  }
  auto* created = new OpenFile{std::move(*f)};
  created->mode.store(a.mode);
  fi->fh = reinterpret_cast<uint64_t>(created);
  set_caching(fs, fi, a.size);
  fuse_entry_param e = entry_of(fs, a);
  fs.remember(a.ino);
  if (fuse_reply_create(req, &e, fi) != 0) {
    fs.forget(a.ino, 1);
    auto* of = reinterpret_cast<OpenFile*>(fi->fh);
    (void)fs.client().close(std::move(of->file));
    delete of;
  }
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  SurgeFs& fs = fs_of(req);
  // The reply is written to /dev/fuse straight from the buffers the data
  // servers filled: libsurge's read-ahead windows of a direct open, else a
  // pool buffer read into for this request. No copy on the way.
  auto n = fs.client().pread_to(*file_of(fi), size, static_cast<uint64_t>(off),
                                [req](std::span<const iovec> pieces) {
                                  fuse_reply_iov(req, pieces.data(),
                                                 static_cast<int>(pieces.size()));
                                });
  if (!n.ok()) reply_error(req, err_of(n.status(), "read", ino));
}

void op_write(fuse_req_t req, fuse_ino_t ino, const char* data, size_t size, off_t off,
              fuse_file_info* fi) {
  SurgeFs& fs = fs_of(req);
  OpenFile& of = open_file_of(fi);
  // Before the bytes land, as Linux does; read off the raw request before
  // its buffer is handed over.
  if (has_killable_privs(of.mode.load()) && write_kills_privs()) {
    Status ks = kill_privs(req, ino, of);
    if (!ks.ok()) {
      reply_error(req, err_of(ks, "write (clearing setuid/setgid)", ino));
      return;
    }
  }
  if (auto owned = take_receive_buffer(data, size)) {
    // The bytes stay where the kernel put them (registered memory) and the
    // kernel hears back once the write is ordered, while they travel.
    auto n = fs.client().pwrite_from(*file_of(fi), std::move(owned),
                                     reinterpret_cast<const std::byte*>(data), size,
                                     static_cast<uint64_t>(off),
                                     [req, size] { fuse_reply_write(req, size); });
    if (!n.ok()) reply_error(req, err_of(n.status(), "write", ino));
    return;
  }
  auto n = fs.client().pwrite(*file_of(fi), data, size, static_cast<uint64_t>(off));
  if (!n.ok()) {
    reply_error(req, err_of(n.status(), "write", ino));
    return;
  }
  fuse_reply_write(req, *n);
}

// The kernel checked that fi is open for writing and that a punch comes
// with KEEP_SIZE; for PUNCH_HOLE and ZERO_RANGE it writes back and drops
// its cached pages of the range itself, and it learns a grown size from
// the mode (offset + length), so libsurge does the rest.
void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                  fuse_file_info* fi) {
  if (offset < 0 || length <= 0) {
    reply_error(req, EINVAL);
    return;
  }
  reply_status(req,
               fs_of(req).client().fallocate(*file_of(fi), mode, static_cast<uint64_t>(offset),
                                             static_cast<uint64_t>(length)),
               "fallocate", ino);
}

void op_flush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  reply_status(req, fs_of(req).client().flush(*file_of(fi)), "flush", ino);
}

void op_release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto* of = reinterpret_cast<OpenFile*>(fi->fh);
  Status st = fs_of(req).client().close(std::move(of->file));
  delete of;
  if (!st.ok()) (void)err_of(st, "release", ino);
  reply_error(req, 0);  // release errors are not seen by anyone
}

void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi) {
  reply_status(req, fs_of(req).client().fsync(*file_of(fi), datasync != 0), "fsync", ino);
}

// Directory offsets: 1 and 2 are "." and "..", then the MDS cookies (>= 3),
// which stay valid while entries come and go.
void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus) {
  SurgeFs& fs = fs_of(req);
  Caller c = caller_of(req);
  std::vector<char> buf(size);
  size_t used = 0;
  auto add_dot = [&](const char* name, Ino dot_ino, off_t next) -> bool {
    struct stat st;
    std::memset(&st, 0, sizeof(st));
    st.st_ino = dot_ino;
    st.st_mode = S_IFDIR;
    size_t n;
    if (plus) {
      fuse_entry_param e;
      std::memset(&e, 0, sizeof(e));
      e.attr = st;  // ino 0 in e: the kernel does not take a reference
      n = fuse_add_direntry_plus(req, buf.data() + used, size - used, name, &e, next);
    } else {
      n = fuse_add_direntry(req, buf.data() + used, size - used, name, &st, next);
    }
    if (n > size - used) return false;
    used += n;
    return true;
  };
  if (off < 1 && !add_dot(".", ino, 1)) goto reply;
  if (off < 2 && !add_dot("..", ino, 2)) goto reply;
  {
    uint64_t cookie = off <= 2 ? 0 : static_cast<uint64_t>(off);
    // ~ how many names fit: ask for a few more than that.
    size_t want = std::max<size_t>(16, size / (plus ? 160 : 32) + 8);
    for (;;) {
      auto page = fs.client().readdir(ino, cookie, want, c);
      if (!page.ok()) {
        if (used == 0) {
          reply_error(req, err_of(page.status(), "readdir", ino));
          return;
        }
        goto reply;
      }
      for (const DirEntry& d : page->entries) {
        size_t n;
        if (plus) {
          fuse_entry_param e = entry_of(fs, d.attr);
          n = fuse_add_direntry_plus(req, buf.data() + used, size - used, d.name.c_str(), &e,
                                     static_cast<off_t>(d.cookie));
          if (n > size - used) goto reply;
          fs.remember(d.attr.ino);
        } else {
          struct stat st;
          to_stat(d.attr, &st);
          n = fuse_add_direntry(req, buf.data() + used, size - used, d.name.c_str(), &st,
                                static_cast<off_t>(d.cookie));
          if (n > size - used) goto reply;
        }
        used += n;
        cookie = d.cookie;
      }
      if (page->eof || page->entries.empty()) break;
    }
  }
reply:
  fuse_reply_buf(req, buf.data(), used);
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  do_readdir(req, ino, size, off, false);
}
void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    fuse_file_info* fi) {
  do_readdir(req, ino, size, off, true);
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  // The kernel has checked read permission (default_permissions).
  fi->fh = 0;
  fi->cache_readdir = 0;
  fuse_reply_open(req, fi);
}

void op_releasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) { reply_error(req, 0); }

void op_statfs(fuse_req_t req, fuse_ino_t ino) {
  auto s = fs_of(req).client().statfs();
  if (!s.ok()) {
    reply_error(req, err_of(s.status(), "statfs", ino));
    return;
  }
  struct statvfs v;
  std::memset(&v, 0, sizeof(v));
  v.f_bsize = s->block_size;
  v.f_frsize = s->block_size;
  v.f_blocks = s->total_bytes / s->block_size;
  v.f_bfree = s->free_bytes / s->block_size;
  v.f_bavail = v.f_bfree;
  v.f_files = s->total_inodes;
  v.f_ffree = s->free_inodes;
  v.f_favail = s->free_inodes;
  v.f_namemax = s->max_name;
  fuse_reply_statfs(req, &v);
}

void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value,
                 size_t size, int flags) {
  reply_status(req,
               fs_of(req).client().setxattr(ino, name, std::string_view(value, size),
                                            static_cast<uint32_t>(flags), caller_of(req)),
               "setxattr", ino);
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  auto v = fs_of(req).client().getxattr(ino, name, caller_of(req));
  if (!v.ok()) {
    reply_error(req, err_of(v.status(), "getxattr", ino));
  } else if (size == 0) {
    fuse_reply_xattr(req, v->size());
  } else if (size < v->size()) {
    reply_error(req, ERANGE);
  } else {
    fuse_reply_buf(req, v->data(), v->size());
  }
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  auto names = fs_of(req).client().listxattr(ino, caller_of(req));
  if (!names.ok()) {
    reply_error(req, err_of(names.status(), "listxattr", ino));
    return;
  }
  std::string all;
  for (const auto& n : *names) {
    all += n;
    all.push_back('\0');
  }
  if (size == 0) {
    fuse_reply_xattr(req, all.size());
  } else if (size < all.size()) {
    reply_error(req, ERANGE);
  } else {
    fuse_reply_buf(req, all.data(), all.size());
  }
}

void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  reply_status(req, fs_of(req).client().removexattr(ino, name, caller_of(req)), "removexattr",
               ino);
}

void op_access(fuse_req_t req, fuse_ino_t ino, int mask) {
  reply_status(req, fs_of(req).client().access(ino, static_cast<uint32_t>(mask), caller_of(req)),
               "access", ino);
}

fuse_lowlevel_ops make_ops() {
  fuse_lowlevel_ops o;
  std::memset(&o, 0, sizeof(o));
  o.init = op_init;
  o.lookup = timed<FuseOp::kLookup, op_lookup>;
  o.forget = timed<FuseOp::kForget, op_forget>;
  o.forget_multi = timed<FuseOp::kForgetMulti, op_forget_multi>;
  o.getattr = timed<FuseOp::kGetattr, op_getattr>;
  o.setattr = timed<FuseOp::kSetattr, op_setattr>;
  o.readlink = timed<FuseOp::kReadlink, op_readlink>;
  o.mknod = timed<FuseOp::kMknod, op_mknod>;
  o.mkdir = timed<FuseOp::kMkdir, op_mkdir>;
  o.unlink = timed<FuseOp::kUnlink, op_unlink>;
  o.rmdir = timed<FuseOp::kRmdir, op_rmdir>;
  o.symlink = timed<FuseOp::kSymlink, op_symlink>;
  o.rename = timed<FuseOp::kRename, op_rename>;
  o.link = timed<FuseOp::kLink, op_link>;
  o.open = timed<FuseOp::kOpen, op_open>;
  o.create = timed<FuseOp::kCreate, op_create>;
  o.read = timed<FuseOp::kRead, op_read>;
  o.write = timed<FuseOp::kWrite, op_write>;
  o.flush = timed<FuseOp::kFlush, op_flush>;
  o.fallocate = timed<FuseOp::kFallocate, op_fallocate>;
  o.release = timed<FuseOp::kRelease, op_release>;
  o.fsync = timed<FuseOp::kFsync, op_fsync>;
  o.opendir = timed<FuseOp::kOpendir, op_opendir>;
  o.readdir = timed<FuseOp::kReaddir, op_readdir>;
  o.readdirplus = timed<FuseOp::kReaddirplus, op_readdirplus>;
  o.releasedir = timed<FuseOp::kReleasedir, op_releasedir>;
  o.statfs = timed<FuseOp::kStatfs, op_statfs>;
  o.setxattr = timed<FuseOp::kSetxattr, op_setxattr>;
  o.getxattr = timed<FuseOp::kGetxattr, op_getxattr>;
  o.listxattr = timed<FuseOp::kListxattr, op_listxattr>;
  o.removexattr = timed<FuseOp::kRemovexattr, op_removexattr>;
  o.access = timed<FuseOp::kAccess, op_access>;
  return o;
}

}  // namespace

const fuse_lowlevel_ops* SurgeFs::ops() {
  static const fuse_lowlevel_ops kOps = make_ops();
  return &kOps;
}

bool direct_io_for(const FsOptions& o, int open_flags, uint64_t file_size, bool mmap_ok) {
  // Appends bypass the page cache always: libsurge places them, not the
  // kernel, so cached pages at the kernel's (possibly stale) end would lie.
  if (open_flags & (O_DIRECT | O_APPEND)) return true;
  switch (open_flags & O_ACCMODE) {
    case O_WRONLY:
      return o.wronly_direct;
    case O_RDWR:
      return o.rdwr_direct && mmap_ok;
    default:
      return o.rdonly_direct && mmap_ok && file_size >= o.rdonly_direct_min;
  }
}

void SurgeFs::remember(Ino ino) {
  if (ino == FUSE_ROOT_ID) return;  // the root is never forgotten
  std::lock_guard lk(lookups_mu_);
  ++lookups_[ino];
}

void SurgeFs::forget(Ino ino, uint64_t n) {
  std::lock_guard lk(lookups_mu_);
  auto it = lookups_.find(ino);
  if (it == lookups_.end()) return;
  if (it->second <= n) {
    lookups_.erase(it);
  } else {
    it->second -= n;
  }
}

size_t SurgeFs::remembered() const {
  std::lock_guard lk(lookups_mu_);
  return lookups_.size();
}

}  // namespace surge::fuse
