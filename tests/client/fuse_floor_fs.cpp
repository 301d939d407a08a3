// fuse_floor_fs: the floor under any FUSE file system's metadata rates on
// this host. A libfuse low-level file system that keeps its namespace in a
// map in memory and answers every request at once, with no network and no
// store: what surge-bench --mode md measures through it is what the
// kernel's FUSE round trips alone cost (the same requests per syscall as
// surge-fuse, since it mounts with the same options and timeouts), so
// surge-fuse can never be faster than it, and mount / libsurge cannot pass
// floor / libsurge. Benchmark only (docs/benchmarks.md); not a product.
//
//   fuse_floor_fs MOUNTPOINT [THREADS]     runs in the foreground until
//                                          fusermount3 -u MOUNTPOINT
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

struct Node {
  struct stat st {};
  std::map<std::string, fuse_ino_t> children;  // directories only
  uint64_t lookups = 0;                        // the kernel's references
};

// One mutex over the whole namespace: the floor is the kernel's cost, and
// the benchmark's processes work in directories of their own.
struct Floor {
  std::mutex mu;
  std::unordered_map<fuse_ino_t, Node> nodes;
  fuse_ino_t next_ino = 2;
  double timeout = 1.0;  // surge-fuse's default entry, attr and negative timeouts
};

Floor& floor_of(fuse_req_t req) {
  return *static_cast<Floor*>(fuse_req_userdata(req));
}

void touch(struct stat& st) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  st.st_mtim = st.st_ctim = now;
}

// Caller holds mu.
fuse_entry_param entry_for(Floor& f, fuse_ino_t ino) {
  fuse_entry_param e{};
  Node& n = f.nodes.at(ino);
  ++n.lookups;
  e.ino = ino;
  e.attr = n.st;
  e.attr_timeout = f.timeout;
  e.entry_timeout = f.timeout;
  return e;
}

void reply_new(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
               fuse_file_info* fi) {
  Floor& f = floor_of(req);
  const fuse_ctx* ctx = fuse_req_ctx(req);
  std::unique_lock lk(f.mu);
  auto pit = f.nodes.find(parent);
  if (pit == f.nodes.end()) return (void)fuse_reply_err(req, ENOENT);
  if (pit->second.children.count(name) != 0) return (void)fuse_reply_err(req, EEXIST);
  fuse_ino_t ino = f.next_ino++;
  Node n;
  n.st.st_ino = ino;
  n.st.st_mode = mode;
  n.st.st_nlink = S_ISDIR(mode) ? 2 : 1;
  n.st.st_uid = ctx->uid;
  n.st.st_gid = ctx->gid;
  n.st.st_blksize = 4096;
  touch(n.st);
  n.st.st_atim = n.st.st_mtim;
  f.nodes.emplace(ino, std::move(n));
  Node& p = f.nodes.at(parent);
  p.children.emplace(name, ino);
  if (S_ISDIR(mode)) ++p.st.st_nlink;
  touch(p.st);
  fuse_entry_param e = entry_for(f, ino);
  lk.unlock();
  if (fi != nullptr) {
    fuse_reply_create(req, &e, fi);
  } else {
    fuse_reply_entry(req, &e);
  }
}

void op_init(void*, fuse_conn_info* conn) {
  auto want = [conn](unsigned cap) {
    if (conn->capable & cap) conn->want |= cap;
  };
  want(FUSE_CAP_ASYNC_READ);
  want(FUSE_CAP_ATOMIC_O_TRUNC);
  want(FUSE_CAP_PARALLEL_DIROPS);
  conn->want &= ~static_cast<unsigned>(FUSE_CAP_READDIRPLUS);
  conn->want &= ~static_cast<unsigned>(FUSE_CAP_WRITEBACK_CACHE);
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Floor& f = floor_of(req);
  std::unique_lock lk(f.mu);
  auto pit = f.nodes.find(parent);
  if (pit == f.nodes.end()) return (void)fuse_reply_err(req, ENOENT);
  auto cit = pit->second.children.find(name);
  if (cit == pit->second.children.end()) {
    // As surge-fuse: a miss is a negative entry the kernel may cache.
    fuse_entry_param e{};
    e.entry_timeout = f.timeout;
    lk.unlock();
    return (void)fuse_reply_entry(req, &e);
  }
  fuse_entry_param e = entry_for(f, cit->second);
  lk.unlock();
  fuse_reply_entry(req, &e);
}

void forget_locked(Floor& f, fuse_ino_t ino, uint64_t n) {
  auto it = f.nodes.find(ino);
  if (it == f.nodes.end()) return;
  it->second.lookups -= std::min(n, it->second.lookups);
  if (it->second.lookups == 0 && it->second.st.st_nlink == 0) f.nodes.erase(it);
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t n) {
  Floor& f = floor_of(req);
  {
    std::lock_guard lk(f.mu);
    forget_locked(f, ino, n);
  }
  fuse_reply_none(req);
}

void op_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  Floor& f = floor_of(req);
  {
    std::lock_guard lk(f.mu);
    for (size_t i = 0; i < count; ++i) forget_locked(f, forgets[i].ino, forgets[i].nlookup);
  }
  fuse_reply_none(req);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  Floor& f = floor_of(req);
  std::unique_lock lk(f.mu);
  auto it = f.nodes.find(ino);
  if (it == f.nodes.end()) return (void)fuse_reply_err(req, ENOENT);
  struct stat st = it->second.st;
  lk.unlock();
  fuse_reply_attr(req, &st, f.timeout);
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) {
  Floor& f = floor_of(req);
  std::unique_lock lk(f.mu);
  auto it = f.nodes.find(ino);
  if (it == f.nodes.end()) return (void)fuse_reply_err(req, ENOENT);
  struct stat& st = it->second.st;
  if (to_set & FUSE_SET_ATTR_MODE) st.st_mode = (st.st_mode & S_IFMT) | (attr->st_mode & 07777);
  if (to_set & FUSE_SET_ATTR_UID) st.st_uid = attr->st_uid;
  if (to_set & FUSE_SET_ATTR_GID) st.st_gid = attr->st_gid;
  if (to_set & FUSE_SET_ATTR_SIZE) st.st_size = attr->st_size;
  if (to_set & FUSE_SET_ATTR_ATIME) st.st_atim = attr->st_atim;
  if (to_set & FUSE_SET_ATTR_MTIME) st.st_mtim = attr->st_mtim;
  touch(st);
  struct stat out = st;
  lk.unlock();
  fuse_reply_attr(req, &out, f.timeout);
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  reply_new(req, parent, name, S_IFDIR | (mode & 07777), nullptr);
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
               fuse_file_info* fi) {
  reply_new(req, parent, name, S_IFREG | (mode & 07777), fi);
}

void remove_name(fuse_req_t req, fuse_ino_t parent, const char* name, bool dir) {
  Floor& f = floor_of(req);
  std::lock_guard lk(f.mu);
  auto pit = f.nodes.find(parent);
  if (pit == f.nodes.end()) return (void)fuse_reply_err(req, ENOENT);
  auto cit = pit->second.children.find(name);
  if (cit == pit->second.children.end()) return (void)fuse_reply_err(req, ENOENT);
  Node& child = f.nodes.at(cit->second);
  if (dir != S_ISDIR(child.st.st_mode)) return (void)fuse_reply_err(req, dir ? ENOTDIR : EISDIR);
  if (dir && !child.children.empty()) return (void)fuse_reply_err(req, ENOTEMPTY);
  child.st.st_nlink = 0;
  touch(child.st);
  fuse_ino_t ino = cit->second;
  pit->second.children.erase(cit);
  if (dir) --pit->second.st.st_nlink;
  touch(pit->second.st);
  forget_locked(f, ino, 0);
  fuse_reply_err(req, 0);
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  remove_name(req, parent, name, false);
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  remove_name(req, parent, name, true);
}

void op_open(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  fuse_reply_open(req, fi);
}

void op_ok(fuse_req_t req, fuse_ino_t, fuse_file_info*) {
  fuse_reply_err(req, 0);
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  Floor& f = floor_of(req);
  std::unique_lock lk(f.mu);
  auto it = f.nodes.find(ino);
  if (it == f.nodes.end()) return (void)fuse_reply_err(req, ENOENT);
  off_t end = it->second.st.st_size;
  lk.unlock();
  size_t n = off >= end ? 0 : std::min<size_t>(size, static_cast<size_t>(end - off));
  std::vector<char> zeros(n);  // the floor keeps sizes, not bytes
  fuse_reply_buf(req, zeros.data(), n);
}

void op_write(fuse_req_t req, fuse_ino_t ino, const char*, size_t size, off_t off,
              fuse_file_info*) {
  Floor& f = floor_of(req);
  {
    std::lock_guard lk(f.mu);
    auto it = f.nodes.find(ino);
    if (it == f.nodes.end()) return (void)fuse_reply_err(req, ENOENT);
    struct stat& st = it->second.st;
    st.st_size = std::max<off_t>(st.st_size, off + static_cast<off_t>(size));
    touch(st);
  }
  fuse_reply_write(req, size);
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  Floor& f = floor_of(req);
  std::vector<char> buf(size);
  size_t used = 0;
  std::lock_guard lk(f.mu);
  auto it = f.nodes.find(ino);
  if (it == f.nodes.end()) return (void)fuse_reply_err(req, ENOENT);
  std::vector<std::pair<std::string, fuse_ino_t>> names = {{".", ino}, {"..", ino}};
  names.insert(names.end(), it->second.children.begin(), it->second.children.end());
  for (off_t i = off; i < static_cast<off_t>(names.size()); ++i) {
    struct stat st {};
    st.st_ino = names[i].second;
    st.st_mode = i < 2 ? S_IFDIR : f.nodes.at(names[i].second).st.st_mode;
    size_t need =
        fuse_add_direntry(req, buf.data() + used, size - used, names[i].first.c_str(), &st, i + 1);
    if (need > size - used) break;
    used += need;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void op_statfs(fuse_req_t req, fuse_ino_t) {
  struct statvfs s {};
  s.f_bsize = s.f_frsize = 4096;
  s.f_blocks = s.f_bfree = s.f_bavail = 1ull << 30;
  s.f_files = s.f_ffree = 1ull << 30;
  s.f_namemax = 255;
  fuse_reply_statfs(req, &s);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MOUNTPOINT [THREADS]\n", argv[0]);
    return 2;
  }
  unsigned threads = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 16;

  Floor f;
  Node root;
  root.st.st_ino = FUSE_ROOT_ID;
  root.st.st_mode = S_IFDIR | 0777;
  root.st.st_nlink = 2;
  touch(root.st);
  root.lookups = 1;
  f.nodes.emplace(FUSE_ROOT_ID, std::move(root));

  fuse_lowlevel_ops ops{};
  ops.init = op_init;
  ops.lookup = op_lookup;
  ops.forget = op_forget;
  ops.forget_multi = op_forget_multi;
  ops.getattr = op_getattr;
  ops.setattr = op_setattr;
  ops.mkdir = op_mkdir;
  ops.create = op_create;
  ops.unlink = op_unlink;
  ops.rmdir = op_rmdir;
  ops.open = op_open;
  ops.flush = op_ok;
  ops.release = op_ok;
  ops.fsync = [](fuse_req_t req, fuse_ino_t, int, fuse_file_info*) { fuse_reply_err(req, 0); };
  ops.read = op_read;
  ops.write = op_write;
  ops.opendir = op_open;
  ops.readdir = op_readdir;
  ops.releasedir = op_ok;
  ops.statfs = op_statfs;

  // surge-fuse's own mount options (client/fuse/surge_fuse_main.cpp).
  std::vector<std::string> args = {"fuse_floor_fs", "-o",
                                   "fsname=floor,subtype=floor,default_permissions,allow_other"};
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  fuse_args fargs = FUSE_ARGS_INIT(static_cast<int>(cargs.size()), cargs.data());
  fuse_session* se = fuse_session_new(&fargs, &ops, sizeof(ops), &f);
  if (se == nullptr) {
    std::fprintf(stderr, "fuse_floor_fs: fuse_session_new failed\n");
    return 1;
  }
  if (fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, argv[1]) != 0) {
    std::fprintf(stderr, "fuse_floor_fs: cannot mount %s\n", argv[1]);
    fuse_session_destroy(se);
    return 1;
  }
  fuse_loop_config* cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(cfg, threads);
  fuse_loop_cfg_set_idle_threads(cfg, threads);
  int rc = fuse_session_loop_mt(se, cfg);
  fuse_loop_cfg_destroy(cfg);
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  fuse_opt_free_args(&fargs);
  return rc == 0 ? 0 : 1;
}
