// ClientImpl: libsurge's Client, the facade over the client's rooms. It
// owns them and passes each call to the ones it concerns:
//   MdsSession    the MDS session and its heartbeat          (mds_session.*)
//   InodeTable    the inodes held open and their state       (inode_table.*, open_file.h)
//   SizeReporter  the end of data each writer tells the MDS  (size_reporter.*)
//   WriteBehind   writes returned before their bytes landed  (write_behind.*)
//   ReadAhead     windows fetched past a sequential reader   (read_ahead.*)
//   DirAttrCache  directories as our own changes left them    (dir_attr_cache.*)
//   DirLeases     directories only we add names to, for now    (dir_leases.*)
//   StatAhead     entries fetched in bulk for a run of lookups (stat_ahead.*)
//   DataPath      placement and failure handling of every IO (data_path.*)
// Namespace operations are plain MDS calls (namespace_ops.cpp); the open
// file operations are file_ops.cpp. A background thread reports sizes
// (size_report_interval) and heartbeats the session.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "client/lib/close_queue.h"
#include "client/lib/cluster_map_cache.h"
#include "client/lib/data_path.h"
#include "client/lib/dir_attr_cache.h"
#include "client/lib/dir_leases.h"
#include "client/lib/inode_table.h"
#include "client/lib/mds_link.h"
#include "client/lib/mds_session.h"
#include "client/lib/open_file.h"
#include "client/lib/read_ahead.h"
#include "client/lib/size_reporter.h"
#include "client/lib/stat_ahead.h"
#include "client/lib/write_behind.h"
#include "net/buffer_pool.h"
#include "surge/client.h"

namespace surge::client {

class ClientImpl : public Client {
 public:
  static Result<std::unique_ptr<ClientImpl>> Create(const ClientOptions& options);
  ~ClientImpl() override;

  // Namespace (namespace_ops.cpp).
  Result<Attr> lookup(Ino parent, std::string_view name, const Caller& c) override;
  Result<Attr> getattr(Ino ino, const Caller& c) override;
  Status access(Ino ino, uint32_t mask, const Caller& c) override;
  Result<Attr> setattr(Ino ino, const SetAttr& sa, const Caller& c) override;
  Result<Attr> mkdir(Ino parent, std::string_view name, uint32_t mode, const Caller& c) override;
  Result<Attr> mknod(Ino parent, std::string_view name, uint32_t mode, uint64_t rdev,
                     const Caller& c) override;
  Result<Attr> symlink(Ino parent, std::string_view name, std::string_view target,
                       const Caller& c) override;
  Result<std::string> readlink(Ino ino) override;
  Result<Attr> link(Ino ino, Ino new_parent, std::string_view new_name, const Caller& c) override;
  Status unlink(Ino parent, std::string_view name, const Caller& c) override;
  Status rmdir(Ino parent, std::string_view name, const Caller& c) override;
  Status rename(Ino parent, std::string_view name, Ino new_parent, std::string_view new_name,
                uint32_t flags, const Caller& c) override;
  Result<DirPage> readdir(Ino dir, uint64_t cookie, size_t max_entries, const Caller& c) override;
  Result<std::string> getxattr(Ino ino, std::string_view name, const Caller& c) override;
  Status setxattr(Ino ino, std::string_view name, std::string_view value, uint32_t flags,
                  const Caller& c) override;
  Result<std::vector<std::string>> listxattr(Ino ino, const Caller& c) override;
  Status removexattr(Ino ino, std::string_view name, const Caller& c) override;
  Result<FsStat> statfs() override;
  Result<ClusterStatus> cluster_status() override;
  Result<StripeLayout> get_layout(Ino ino, const Caller& c) override;
  Status set_dir_layout(Ino dir, uint32_t stripe_size, uint32_t stripe_count,
                        const Caller& c) override;

  // Open files (client_impl.cpp: open, create; file_ops.cpp: the rest).
  Result<FileRef> open(Ino ino, int flags, const Caller& c, Attr* attr_out) override;
  Result<FileRef> create(Ino parent, std::string_view name, uint32_t mode, int flags,
                         const Caller& c, Attr* attr_out) override;
  Result<size_t> pread(File& f, void* buf, size_t len, uint64_t offset) override;
  Result<size_t> pread_to(File& f, size_t len, uint64_t offset, const ReadSink& sink) override;
  Result<size_t> pwrite(File& f, const void* buf, size_t len, uint64_t offset) override;
  Result<size_t> pwrite_from(File& f, std::unique_ptr<RegisteredBuffer> buf, const std::byte* data,
                             size_t len, uint64_t offset,
                             const std::function<void()>& on_accepted) override;
  Status fsync(File& f, bool data_only) override;
  Status flush(File& f) override;
  Status close(FileRef f) override;
  Result<std::unique_ptr<RegisteredBuffer>> register_buffer(size_t size) override;
  Result<std::unique_ptr<RegisteredBuffer>> try_pool_buffer(size_t size) override;
  void set_read_ahead(File& f, size_t bytes) override;
  std::optional<Attr> recent_dir_attr(Ino dir, std::chrono::nanoseconds max_age,
                                      std::chrono::nanoseconds* age) override;
  Result<Attr> lookup_ahead(Ino parent, std::string_view name, const Caller& c,
                            std::chrono::nanoseconds max_age,
                            std::chrono::nanoseconds* age) override;
  Status fallocate(File& f, int mode, uint64_t offset, uint64_t length) override;  // fallocate.cpp

  using Client::link;
  using Client::mkdir;
  using Client::open;
  using Client::rename;
  using Client::rmdir;
  using Client::symlink;
  using Client::unlink;

  Status close_handle(FileImpl& f);

 private:
  explicit ClientImpl(const ClientOptions& options);
  Status start();
  // A fresh id for a create-like MDS request (see CreateRequest.op_id).
  uint64_t next_op_id();
  // A handle of a just opened or created inode (the MDS's reply in pa).
  FileRef make_handle(const Attr& a, const proto::mds::Attr& pa, int flags, const Caller& c);
  // pread and pread_to: the bytes go to sink as pieces of the client's
  // buffers, except what is read into dst when dst is not null (the caller's
  // memory, which pread's sink then need not copy).
  Result<size_t> read_impl(FileImpl& f, size_t len, uint64_t offset, std::byte* dst,
                           const ReadSink& sink);
  // The size reads are served up to (the MDS's or this client's own end of
  // data, whichever is further) and the file's layout.
  std::pair<uint64_t, FileLayout> read_extent(FileImpl& f);
  // pwrite and pwrite_from: owned (may be null) is the caller's buffer that
  // holds buf, kept instead of a copy; on_accepted (may be null) as in
  // Client::pwrite_from.
  Status kill_suidgid_before_write(FileImpl& f);
  Result<size_t> write_impl(File& file, const std::byte* buf, size_t len, uint64_t offset,
                            std::unique_ptr<RegisteredBuffer>* owned,
                            const std::function<void()>* on_accepted);
  void background_loop();
  // Keeps the parent directory's attributes a reply carries (dir_attr_cache.h).
  void note_parent(const proto::mds::EntryReply& resp);
  void note_parent(const proto::mds::UnlinkReply& resp);
  // Reads the directory of a stat-ahead fetch and hands its entries over.
  void fetch_ahead(const StatAhead::Fetch& f, const Caller& c);

  // Declared in the order they are built; each room outlives those that
  // use it.
  ClientOptions options_;
  std::string key_;
  std::unique_ptr<net::BufferPool> pool_;
  std::unique_ptr<MdsLink> mds_;
  std::unique_ptr<net::ChannelPool> ods_channels_;
  std::unique_ptr<ClusterMapCache> map_;
  std::unique_ptr<DataPath> data_;
  InodeTable inodes_;
  std::unique_ptr<MdsSession> session_;
  std::unique_ptr<WriteBehind> writes_;
  std::unique_ptr<SizeReporter> sizes_;
  std::unique_ptr<ReadAhead> read_ahead_;
  std::unique_ptr<CloseQueue> closes_;  // opens released at the MDS off close's path
  DirAttrCache dir_attrs_;              // directories as our own changes left them
  DirLeases leases_;                    // misses answered without the MDS
  StatAhead ahead_;                     // runs of lookups answered from one readdirplus

  std::atomic<uint64_t> op_seq_{0};  // next op id; random start

  std::mutex bg_mu_;
  std::condition_variable bg_cv_;
  bool stopping_ = false;
  std::thread bg_;
};

}  // namespace surge::client
