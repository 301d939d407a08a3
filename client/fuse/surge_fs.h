// SurgeFs: the FUSE low-level operation table over libsurge. Every FUSE
// inode number is the MDS inode number (the root is 1 on both sides), so
// the only per-inode state here is the kernel's lookup count, kept exactly
// (lookup/create/mkdir/readdirplus add, forget subtracts) and dropped at
// zero: an mdtest-scale run leaves nothing behind. Open files are
// surge::FileRef handles stored in fi->fh and closed in release.
//
// Credentials: the mount always has the kernel's default_permissions, so
// the kernel checks the mode of every path component and of every open,
// also of names and nodes (FIFOs, devices) it serves from its caches
// without asking us; every request still runs with the caller's uid, gid
// and supplementary groups (fuse_req_ctx + fuse_req_getgroups), which the
// MDS checks again.
#pragma once

#include <fuse_lowlevel.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "surge/client.h"

namespace surge::fuse {

struct FsOptions {
  double entry_timeout = 1.0;  // seconds the kernel caches a name
  double attr_timeout = 1.0;   // seconds the kernel caches attributes
  // Seconds the kernel remembers that a name does not exist (a negative
  // dentry): repeated misses (include paths, PATH, imports) stay off the
  // MDS. Own creates replace it at once; another client's create of that
  // name shows here after at most this long. 0: every miss asks the MDS.
  double negative_timeout = 1.0;
  uint32_t max_write = 1u << 20;
  uint32_t max_readahead = 1u << 20;  // per request (FUSE init)
  // Bytes per read request (the max_read mount option too), whatever
  // max_pages allows (init_extensions.h).
  uint32_t max_read = 1u << 20;
  uint32_t max_background = 64;
  // Files opened write-only bypass the kernel page cache: the kernel hands
  // the writer's own pages to us, sparing the page-cache copy and
  // allocation that bound a streaming writer (cp, tar, dd, IOR write
  // phases). Such a descriptor cannot be mmapped anyway, and the kernel
  // drops cached pages of the range each direct write covers.
  bool wronly_direct = true;
  // Read-write opens bypass it too, but only where the kernel lets such
  // files be mapped MAP_SHARED anyway (FUSE_DIRECT_IO_ALLOW_MMAP, Linux
  // 6.6+; init_extensions.h). Reads through them then go to libsurge
  // directly, which reads ahead on its own for a sequential stream.
  bool rdwr_direct = true;
  // Read-only opens of files of at least rdonly_direct_min bytes bypass it
  // as well, under the same condition: a stream through the page cache
  // costs the kernel a fresh page and a copy per 4 KiB, which a data file
  // read by IOR, fio, cp or a training loader (large reads: st_blksize is
  // the 1 MiB stripe) does not need. libsurge reads ahead in their place.
  // The price is a FUSE request per read(2): small reads of such a file
  // (dd bs=4k, tar's 10 KiB records) are slower; smaller files, sources,
  // configs, keep the page cache.
  bool rdonly_direct = true;
  uint64_t rdonly_direct_min = 16u << 20;
  // libsurge's read-ahead for direct opens (the mount's readahead_kb).
  size_t direct_read_ahead = 4u << 20;
};

// Whether an open with these flags, of a file of this size, gets
// FOPEN_DIRECT_IO: O_DIRECT, O_APPEND (libsurge places appends at the true
// end, which the kernel may not know), write-only opens when wronly_direct
// is set, and where direct-IO files can still be mapped (mmap_ok)
// read-write opens when rdwr_direct is set and read-only opens of files of
// rdonly_direct_min bytes or more when rdonly_direct is set.
bool direct_io_for(const FsOptions& o, int open_flags, uint64_t file_size, bool mmap_ok);

class SurgeFs {
 public:
  SurgeFs(std::unique_ptr<Client> client, FsOptions options)
      : client_(std::move(client)), options_(options) {}

  static const fuse_lowlevel_ops* ops();

  Client& client() { return *client_; }
  // The mounted session, for invalidating kernel caches.
  void set_session(fuse_session* se) { session_ = se; }
  fuse_session* session() const { return session_; }
  const FsOptions& options() const { return options_; }

  // Lookup counts (kernel references) per inode.
  void remember(Ino ino);
  void forget(Ino ino, uint64_t n);
  size_t remembered() const;

 private:
  std::unique_ptr<Client> client_;
  FsOptions options_;
  fuse_session* session_ = nullptr;
  mutable std::mutex lookups_mu_;
  std::unordered_map<Ino, uint64_t> lookups_;
};

}  // namespace surge::fuse
