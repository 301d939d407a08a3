// libsurge: the native Surge client. This header (with surge/surge.h, its C
// twin) is the whole public API; everything under client/lib is private.
//
// A Client holds one session with the metadata server (heartbeated in the
// background), the cluster map, and connections to the data servers. File
// data is striped: an IO is split at stripe boundaries and the pieces go to
// their data servers in parallel, each carrying a CRC32C that the other side
// checks. Consistency is close-to-open: what one client wrote is visible to
// another after the writer's close/fsync and the reader's open.
//
// Two levels of API on one object:
//   * inode level (lookup/getattr/create/... by inode number), which the
//     FUSE mount uses, with the caller's credentials for permission checks;
//   * path level (stat/open/mkdir/... by "/a/b" path), for tools and apps.
// Every call is thread-safe. Errors are Status values whose code maps to
// errno (Status::to_errno); data-server failures surface as IOError (EIO)
// within ClientOptions::io_timeout, never as a hang.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "surge/status.h"

namespace surge {

using Ino = uint64_t;

struct ClientOptions {
  // "tcp://HOST:PORT", "rdma://HOST:PORT" or "HOST:PORT" (tcp); several
  // MDS of one file system comma-separated ("tcp://a:7100,tcp://b:7100"):
  // calls fail over to the next when one is unreachable.
  std::string mds_address;
  // The cluster key itself, or a file holding it (cluster_key wins).
  std::string cluster_key;
  std::string cluster_key_file;
  // "tcp" or "rdma": how data servers are reached when their map address
  // has no scheme.
  std::string transport = "tcp";
  std::string client_name;  // shown by the MDS; default "hostname:pid"
  std::chrono::milliseconds connect_timeout{3000};
  // Metadata calls; an MDS that is restarting is retried for this long.
  std::chrono::milliseconds mds_timeout{30000};
  // One IO to the data servers, retries included: past this it fails
  // with EIO.
  std::chrono::milliseconds io_timeout{10000};
  // One attempt of it (a request to one data server). Below io_timeout so
  // that a request stalled on a server that is dying leaves time to retry
  // on the chain the MDS makes without it. 0: half of io_timeout.
  std::chrono::milliseconds io_attempt_timeout{0};
  // Bound on file bytes in flight to data servers per IO call.
  size_t max_inflight_bytes = 32u << 20;
  // Write behind: pwrite copies the data and returns once it is sent, with
  // up to this many bytes per open file still in flight; an error shows on
  // the next pwrite, flush, fsync or close of the file (as NFS does).
  // 0: every pwrite waits for the data servers.
  size_t write_behind_bytes = 8u << 20;
  // Read ahead: while an open file is read sequentially, up to this many
  // bytes past its last read are already being fetched (1 MiB windows from
  // the registered pool, every data server at once), for each open file on
  // its own. Dropped by a write or truncate of the file in this client.
  // 0: off (surge-fuse turns it off but for direct opens; the kernel reads
  // ahead for the others).
  size_t read_ahead_bytes = 8u << 20;
  // How often the end of written data is reported to the MDS while writing.
  std::chrono::milliseconds size_report_interval{1000};
  // Registered buffer pool size for the zero-copy path (1 MiB buffers).
  size_t pool_buffers = 64;
  // A second class of registered buffers, for callers that receive whole
  // requests into pool memory (surge-fuse reads each FUSE request, header
  // and 1 MiB of data, into one). 0 buffers: no such class.
  size_t request_buffer_size = 0;
  size_t request_buffers = 0;
  // A write by a caller other than uid 0 to a file with setuid (or setgid
  // and group-execute) clears them first, as Linux does for a writer
  // without CAP_FSETID (SetAttr kKillSuidgid). surge-fuse turns it off:
  // the kernel says on each write whether the writer lacks CAP_FSETID.
  bool kill_suidgid_on_write = true;
  // A directory this client makes is leased to its session: lookups of
  // names missing there are answered without the MDS while no other client
  // adds one; another client's first addition there waits for the lease to
  // run out, at most about a quarter of a second (docs/metadata-path.md,
  // "Directory leases"). false: no leases asked for.
  bool dir_leases = true;
  // Lookups that come in a run in one directory fetch its entries in bulk
  // (readdirplus) for lookup_ahead to answer the rest of the run with, each
  // for at most a second (docs/metadata-path.md, "Stat-ahead"). false:
  // lookup_ahead is lookup.
  bool stat_ahead = true;
};

// Who is asking: the MDS checks permissions against these.
struct Caller {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;
  static Caller Current();  // this process's ids and supplementary groups
};

struct TimeSpec {
  int64_t sec = 0;
  uint32_t nsec = 0;
};

struct Attr {
  Ino ino = 0;
  uint32_t mode = 0;  // type and permission bits, as st_mode
  uint32_t nlink = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t size = 0;
  uint64_t rdev = 0;
  TimeSpec atime, mtime, ctime;
  uint64_t generation = 0;
};

// setattr: which fields of SetAttr apply.
enum SetAttrMask : uint32_t {
  kSetMode = 1u << 0,
  kSetUid = 1u << 1,
  kSetGid = 1u << 2,
  kSetSize = 1u << 3,
  kSetAtime = 1u << 4,
  kSetMtime = 1u << 5,
  kSetAtimeNow = 1u << 6,
  kSetMtimeNow = 1u << 7,
  kSetCtime = 1u << 8,
  // Clear setuid, and setgid where group-execute is set (Linux: a write or
  // truncate by a process without CAP_FSETID). A size change by a caller
  // other than uid 0 clears them anyway.
  kKillSuidgid = 1u << 9,
};
class File;
struct SetAttr {
  uint32_t mask = 0;
  uint32_t mode = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t size = 0;
  TimeSpec atime, mtime, ctime;
  // The open file the change is made through (ftruncate), or null. It must
  // be open for writing (else InvalidArgument, as ftruncate's EINVAL); the
  // write permission checked at its open is not checked again.
  const File* file = nullptr;
};

struct DirEntry {
  std::string name;
  Attr attr;            // readdirplus: full attributes
  uint64_t cookie = 0;  // resume readdir after this entry
};
struct DirPage {
  std::vector<DirEntry> entries;
  bool eof = false;
};

struct FsStat {
  uint64_t block_size = 4096;
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
  uint64_t total_inodes = 0;
  uint64_t free_inodes = 0;
  uint32_t max_name = 255;
};

struct StripeLayout {
  uint32_t stripe_size = 0;
  uint32_t stripe_count = 0;
  // One copy on plain targets (layout format 1): a target id per stripe.
  std::vector<uint32_t> targets;
  // Replicated (format 2): a chain id per stripe, each chain `replicas`
  // data servers (surgectl chains lists them); targets is then empty.
  std::vector<uint32_t> chains;
  uint32_t replicas = 1;
};

// One data server as the cluster map shows it.
struct TargetStatus {
  uint32_t id = 0;
  std::string address;
  std::string state;  // "up", "down", "draining", "unknown"
  uint64_t capacity_bytes = 0;
  uint64_t free_bytes = 0;
  uint64_t last_heartbeat_ms = 0;
};
struct ClusterStatus {
  uint64_t map_version = 0;
  uint64_t fs_id = 0;
  std::string mds_address;
  std::vector<TargetStatus> targets;
};

// fallocate modes, with the values of Linux's FALLOC_FL_* (linux/falloc.h).
enum FallocateFlags : int {
  kFallocKeepSize = 0x01,
  kFallocPunchHole = 0x02,
  kFallocZeroRange = 0x10,
};

// rename flags, as renameat2.
enum RenameFlags : uint32_t { kRenameNoReplace = 1, kRenameExchange = 2 };
// setxattr flags, as setxattr(2).
enum XattrFlags : uint32_t { kXattrCreate = 1, kXattrReplace = 2 };

// An open file. Shared by all users of the handle; closed by Client::close
// (or when the last reference goes, reporting the size on the way out).
class File {
 public:
  virtual ~File() = default;
  virtual Ino ino() const = 0;
  virtual int flags() const = 0;  // O_* flags it was opened with
};
using FileRef = std::shared_ptr<File>;

// Memory for the zero-copy path: a buffer of the client's registered pool.
// pread/pwrite into it skip the bounce copy over RDMA.
class RegisteredBuffer {
 public:
  virtual ~RegisteredBuffer() = default;
  virtual std::byte* data() = 0;
  virtual size_t size() const = 0;
};

class Client {
 public:
  static constexpr Ino kRootIno = 1;

  // Connects to the MDS, opens a session, fetches the cluster map.
  static Result<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  virtual ~Client() = default;

  // ---- inode level --------------------------------------------------------
  virtual Result<Attr> lookup(Ino parent, std::string_view name, const Caller& c) = 0;
  virtual Result<Attr> getattr(Ino ino, const Caller& c) = 0;
  // access(2): mask of R_OK, W_OK, X_OK (0: existence).
  virtual Status access(Ino ino, uint32_t mask, const Caller& c) = 0;
  // A size change truncates (or extends) the file at the MDS and on the
  // data servers.
  virtual Result<Attr> setattr(Ino ino, const SetAttr& sa, const Caller& c) = 0;
  virtual Result<Attr> mkdir(Ino parent, std::string_view name, uint32_t mode, const Caller& c) = 0;
  virtual Result<Attr> mknod(Ino parent, std::string_view name, uint32_t mode, uint64_t rdev,
                             const Caller& c) = 0;
  virtual Result<Attr> symlink(Ino parent, std::string_view name, std::string_view target,
                               const Caller& c) = 0;
  virtual Result<std::string> readlink(Ino ino) = 0;
  virtual Result<Attr> link(Ino ino, Ino new_parent, std::string_view new_name,
                            const Caller& c) = 0;
  virtual Status unlink(Ino parent, std::string_view name, const Caller& c) = 0;
  virtual Status rmdir(Ino parent, std::string_view name, const Caller& c) = 0;
  virtual Status rename(Ino parent, std::string_view name, Ino new_parent,
                        std::string_view new_name, uint32_t flags, const Caller& c) = 0;
  // Entries after `cookie` (0: from the start), at most max_entries.
  virtual Result<DirPage> readdir(Ino dir, uint64_t cookie, size_t max_entries,
                                  const Caller& c) = 0;
  virtual Result<std::string> getxattr(Ino ino, std::string_view name, const Caller& c) = 0;
  virtual Status setxattr(Ino ino, std::string_view name, std::string_view value, uint32_t flags,
                          const Caller& c) = 0;
  virtual Result<std::vector<std::string>> listxattr(Ino ino, const Caller& c) = 0;
  virtual Status removexattr(Ino ino, std::string_view name, const Caller& c) = 0;
  virtual Result<FsStat> statfs() = 0;
  // The cluster map, fetched from the MDS now.
  virtual Result<ClusterStatus> cluster_status() = 0;
  virtual Result<StripeLayout> get_layout(Ino ino, const Caller& c) = 0;
  virtual Status set_dir_layout(Ino dir, uint32_t stripe_size, uint32_t stripe_count,
                                const Caller& c) = 0;

  // Opens an existing inode (flags: O_RDONLY/O_WRONLY/O_RDWR, O_TRUNC,
  // O_APPEND); checks access at the MDS. attr_out (may be null) gets the
  // inode's attributes as the open found them.
  virtual Result<FileRef> open(Ino ino, int flags, const Caller& c, Attr* attr_out) = 0;
  // Creates name in parent (O_EXCL: EEXIST if present) and opens it.
  virtual Result<FileRef> create(Ino parent, std::string_view name, uint32_t mode, int flags,
                                 const Caller& c, Attr* attr_out) = 0;

  // ---- file data ------------------------------------------------------------
  // Short only at end of file; holes read as zeros.
  virtual Result<size_t> pread(File& f, void* buf, size_t len, uint64_t offset) = 0;
  // pread without the copy into the caller's memory: the bytes read are
  // handed to `sink` as pieces of the client's own buffers (read-ahead
  // windows, a pool buffer), in file order and valid only while it runs.
  // On an OK return sink ran exactly once (with no pieces at end of file);
  // on an error return it never ran. surge-fuse replies to the kernel from
  // inside it. With read ahead on, other reads of the same open file wait
  // while it runs (it holds the windows).
  using ReadSink = std::function<void(std::span<const iovec> pieces)>;
  virtual Result<size_t> pread_to(File& f, size_t len, uint64_t offset, const ReadSink& sink) = 0;
  // O_APPEND files write at the end whatever offset says.
  virtual Result<size_t> pwrite(File& f, const void* buf, size_t len, uint64_t offset) = 0;
  // pwrite without the write-behind copy: [data, data + len) lies inside
  // buf, which the client keeps until the data servers have the bytes.
  // on_accepted (may be empty) runs exactly once, before an OK return and never with an
  // error return: once the write is ordered after every earlier write to
  // the file and before its bytes are sent, so a caller can acknowledge its
  // own caller there while the bytes travel (an error after that shows on
  // the next pwrite, flush, fsync or close, as for any write behind).
  virtual Result<size_t> pwrite_from(File& f, std::unique_ptr<RegisteredBuffer> buf,
                                     const std::byte* data, size_t len, uint64_t offset,
                                     const std::function<void()>& on_accepted) = 0;
  // fallocate(2) on an open file (mode: kFalloc* bits, Linux's values):
  //   0: reserve [offset, offset + length) on the data servers, so a later
  //      write of it cannot fail for space, and grow the file to cover it
  //      (the MDS records the size, as for a truncate up);
  //   kFallocKeepSize: reserve without changing the size;
  //   kFallocPunchHole | kFallocKeepSize: free the range, which reads as
  //      zeros (Linux requires KEEP_SIZE with a punch);
  //   kFallocZeroRange [| kFallocKeepSize]: the range reads as zeros and
  //      stays reserved; without KEEP_SIZE the file grows to cover it.
  // Writes of this client still in flight land first. Other modes
  // (collapse, insert range, ...) are NotSupported (EOPNOTSUPP); a file
  // not open for writing is BadFile (EBADF); length 0 is InvalidArgument.
  virtual Status fallocate(File& f, int mode, uint64_t offset, uint64_t length) = 0;
  // Read ahead for this open file only, in place of ClientOptions'
  // read_ahead_bytes (0: off). surge-fuse turns it on for the files it
  // opens direct, where the kernel does not read ahead.
  virtual void set_read_ahead(File& f, size_t bytes) = 0;
  // Data durable on the data servers, size recorded at the MDS.
  virtual Status fsync(File& f, bool data_only = false) = 0;
  // Size recorded at the MDS (close-to-open). Reports a write-behind
  // failure without clearing it (fsync and close report it once more).
  virtual Status flush(File& f) = 0;
  // flush, then tell the MDS this client no longer holds the file open.
  virtual Status close(FileRef f) = 0;
  // A buffer from the registered pool when one of that size is free now
  // (zero copy over RDMA), else plain page-aligned memory (bounced).
  virtual Result<std::unique_ptr<RegisteredBuffer>> register_buffer(size_t size) = 0;
  // Only a buffer of the registered pool, now: ResourceExhausted when none
  // of that size is free (no plain-memory fallback, nothing allocated).
  virtual Result<std::unique_ptr<RegisteredBuffer>> try_pool_buffer(size_t size) = 0;
  // The attributes of directory `dir` as this client's own latest change of
  // it left them (the MDS answers a create, mknod, mkdir, symlink, link,
  // unlink, rmdir in it, and a setattr of it, with them), when that answer
  // came less than max_age ago; *age (may be null) says how long ago.
  // Nullopt: none that recent, ask getattr. surge-fuse answers the kernel's
  // getattr of a directory it has just changed with this.
  virtual std::optional<Attr> recent_dir_attr(Ino dir, std::chrono::nanoseconds max_age,
                                              std::chrono::nanoseconds* age) {
    return std::nullopt;
  }
  // lookup, or the entry from a bulk fetch of parent's entries (stat-ahead,
  // ClientOptions::stat_ahead) when one began less than max_age ago; *age
  // says how long ago (zero: the MDS answered now). The caller has checked
  // search permission on parent itself (surge-fuse: the kernel's
  // default_permissions), and gives the entry on with its timeouts cut by
  // *age, so it is no staler than the kernel's own cache of it would be.
  virtual Result<Attr> lookup_ahead(Ino parent, std::string_view name, const Caller& c,
                                    std::chrono::nanoseconds max_age,
                                    std::chrono::nanoseconds* age) {
    if (age != nullptr) *age = std::chrono::nanoseconds(0);
    return lookup(parent, name, c);
  }

  // ---- path level (absolute paths from the file system root) --------------
  Result<Attr> resolve(std::string_view path, const Caller& c);
  Result<Attr> stat(std::string_view path, const Caller& c = {});
  Result<FileRef> open(std::string_view path, int flags, uint32_t mode = 0644,
                       const Caller& c = {});
  Status mkdir(std::string_view path, uint32_t mode, const Caller& c = {});
  Status unlink(std::string_view path, const Caller& c = {});
  Status rmdir(std::string_view path, const Caller& c = {});
  Status rename(std::string_view from, std::string_view to, uint32_t flags = 0,
                const Caller& c = {});
  Status link(std::string_view existing, std::string_view new_path, const Caller& c = {});
  Status symlink(std::string_view target, std::string_view link_path, const Caller& c = {});
  Status truncate(std::string_view path, uint64_t size, const Caller& c = {});
  // Every entry of a directory, all pages.
  Result<std::vector<DirEntry>> list(std::string_view path, const Caller& c = {});

 protected:
  // Splits "/a/b/c" into the parent's inode and the last name.
  Result<std::pair<Ino, std::string>> resolve_parent(std::string_view path, const Caller& c);
};

}  // namespace surge
