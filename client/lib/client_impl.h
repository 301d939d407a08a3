// ClientImpl: libsurge's Client. Owns the MDS link and session, the cluster
// map, the data-server channels and the striped IO engine, and the state of
// every inode this client holds open:
//   * written_end: the end of what this client wrote; reads and getattr see
//     max(MDS size, written_end), so a writer's own data is coherent before
//     the MDS hears of it;
//   * reported_end / dirty: what the MDS has been told. flush, fsync, close
//     and a background timer report the end (the MDS max-merges it).
// A background thread heartbeats the session (reopening it after an MDS
// restart, with every open re-recorded) and reports sizes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "client/lib/cluster_map_cache.h"
#include "client/lib/mds_link.h"
#include "client/lib/stripe_io.h"
#include "net/buffer_pool.h"
#include "net/proto/mds_methods.h"
#include "surge/client.h"

namespace surge::client {

// Per-inode state shared by every open handle of that inode in this client.
struct InodeState {
  Ino ino = 0;
  std::mutex mu;
  StripeLayout layout;
  uint64_t mds_size = 0;      // last size the MDS told us
  uint64_t written_end = 0;   // end of what we wrote (0: nothing)
  uint64_t reported_end = 0;  // what the MDS has been told
  bool dirty = false;         // writes since the last report
  int opens = 0;              // open handles in this client
  Caller last_caller;         // for re-recording opens after an MDS restart
  int last_flags = 0;
  Status write_error;         // a write-behind failure, reported once
  // Held across a size report's or a truncate's MDS call: a report taken
  // before a truncate must not reach the MDS after it and grow the file
  // back (reports only ever raise the size there).
  std::mutex size_mu;

  // Write behind. wb_mu orders issuing and retiring in-flight writes, so
  // "nothing in flight" is true when a drain returns, and no two
  // overlapping writes are ever in flight at once (data servers may apply
  // concurrent requests in any order). A write joins `inflight` under
  // wb_mu, then is sent with wb_mu released (so writers of other ranges of
  // the file, such as the FUSE workers of one stream, send side by side);
  // until its batch is attached it cannot be retired: retiring waits on
  // wb_cv for that.
  struct PendingWrite {
    uint64_t offset = 0;
    uint64_t length = 0;
    net::PoolBuffer pool_copy;             // the bytes, when a pool buffer was free
    std::unique_ptr<std::byte[]> heap_copy;
    std::unique_ptr<RegisteredBuffer> owned;  // the caller's buffer (pwrite_from)
    std::unique_ptr<WriteBatch> batch;     // null while being sent; destroyed first
  };
  std::mutex wb_mu;
  std::condition_variable wb_cv;      // a batch was attached to an in-flight write
  std::deque<PendingWrite> inflight;  // oldest first; guarded by wb_mu
  uint64_t inflight_bytes = 0;        // guarded by wb_mu

  // Bumped whenever this client changes the file's bytes or size (a write
  // accepted or retired, a truncate): read-ahead windows fetched under an
  // older value may hold old bytes and are dropped before being served.
  std::atomic<uint64_t> data_gen{0};
};

class FileImpl : public File {
 public:
  FileImpl(std::shared_ptr<InodeState> st, int flags, Caller c, size_t read_ahead_bytes)
      : state(std::move(st)), flags_(flags), caller(std::move(c)), read_ahead(read_ahead_bytes) {}
  ~FileImpl() override;
  Ino ino() const override { return state->ino; }
  int flags() const override { return flags_; }

  std::shared_ptr<InodeState> state;
  int flags_;
  Caller caller;
  std::atomic<size_t> read_ahead;  // bytes; ClientOptions' unless set_read_ahead
  std::atomic<bool> closed{false};

  // Read ahead, per open file (one sequential stream each, so readers of
  // one file through several descriptors neither wait for nor undo each
  // other), guarded by ra_mu: contiguous windows past the last sequential
  // read, each fetched (or being fetched) into a pool buffer.
  struct Window {
    uint64_t offset = 0;
    size_t length = 0;
    net::PoolBuffer buf;
    std::unique_ptr<ReadBatch> batch;  // destroyed (waited for) before buf
    bool landed = false;               // batch waited for; status below
    Status status;
  };
  std::mutex ra_mu;
  uint64_t ra_next = 0;           // where the next sequential read starts
  uint64_t ra_gen = 0;            // state->data_gen when the windows were fetched
  std::deque<Window> ra_windows;  // ascending and contiguous
  // Closes on destruction when the user forgot; files must not outlive
  // their Client.
  class ClientImpl* owner = nullptr;
};

class ClientImpl : public Client {
 public:
  static Result<std::unique_ptr<ClientImpl>> Create(const ClientOptions& options);
  ~ClientImpl() override;

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
  Result<Attr> link(Ino ino, Ino new_parent, std::string_view new_name,
                    const Caller& c) override;
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
  // Size as this client sees it (MDS size, or more if we wrote past it).
  Attr merge_local(Attr a);
  std::shared_ptr<InodeState> attach(const Attr& a, const proto::mds::Attr& pa, int flags,
                                     const Caller& c);
  Status report_size(InodeState& st, bool force);
  Status report_size_locked(InodeState& st, bool force);  // st.size_mu held
  // Waits for every write in flight on st; failures go to st.write_error.
  void drain_writes(InodeState& st);
  // wb_mu held by `wl`; may wait (releasing it) for the oldest write's send.
  void retire_oldest_locked(InodeState& st, std::unique_lock<std::mutex>& wl);
  // pread and pread_to: the bytes go to sink as pieces of the client's
  // buffers, except what is read into dst when dst is not null (the caller's
  // memory, which pread's sink then need not copy).
  Result<size_t> read_impl(FileImpl& f, size_t len, uint64_t offset, std::byte* dst,
                           const ReadSink& sink);
  // read_impl's data path when read ahead is on: hands sink what the windows
  // hold and what it reads of the rest, then keeps read_ahead bytes in
  // flight past it.
  Status read_with_read_ahead(FileImpl& f, const StripeLayout& layout, uint64_t size,
                              size_t read_ahead, size_t n, uint64_t offset, std::byte* dst,
                              const ReadSink& sink);
  void drop_read_ahead(FileImpl& f);
  // The size reads are served up to (the MDS's or this client's own end of
  // data, whichever is further) and the file's layout.
  std::pair<uint64_t, StripeLayout> read_extent(FileImpl& f);
  // pwrite and pwrite_from: owned (may be null) is the caller's buffer that
  // holds buf, kept instead of a copy; on_accepted (may be null) as in
  // Client::pwrite_from.
  Result<size_t> write_impl(File& file, const std::byte* buf, size_t len, uint64_t offset,
                            std::unique_ptr<RegisteredBuffer>* owned,
                            const std::function<void()>* on_accepted);
  Status take_write_error(InodeState& st);
  void background_loop();
  Status reopen_session();
  // After an MDS restart our session id is unknown there: open a new one
  // (once, however many threads notice) when `failed` says so and the
  // session is still `used`. True when the caller should retry.
  bool renew_session_after(const Status& failed, uint64_t used);
  std::mutex session_mu_;
  uint64_t session() const { return session_id_.load(); }

  ClientOptions options_;
  std::string key_;
  std::unique_ptr<net::BufferPool> pool_;
  std::unique_ptr<MdsLink> mds_;
  std::unique_ptr<net::ChannelPool> ods_channels_;
  std::unique_ptr<ClusterMapCache> map_;
  std::unique_ptr<StripeIo> io_;

  std::atomic<uint64_t> session_id_{0};
  std::atomic<uint64_t> op_seq_{0};  // next op id; random start
  std::chrono::milliseconds heartbeat_interval_{2000};

  std::mutex inodes_mu_;
  std::unordered_map<Ino, std::shared_ptr<InodeState>> inodes_;

  std::mutex bg_mu_;
  std::condition_variable bg_cv_;
  bool stopping_ = false;
  std::thread bg_;
};

// proto <-> API conversions
Attr attr_from_proto(const proto::mds::Attr& a);
StripeLayout layout_from_proto(const proto::mds::Layout& l);
proto::mds::Credentials cred_to_proto(const Caller& c);

}  // namespace surge::client
