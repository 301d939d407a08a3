// The state of what this client holds open. InodeState is shared by every
// open handle of one inode in this client; FileImpl is one handle (a
// libsurge File, a FUSE file handle). The rooms that act on them each own
// a group of fields: InodeTable (opens), SizeReporter (the end of data and
// what the MDS was told), WriteBehind (writes in flight) and ReadAhead
// (a handle's windows).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>

#include "client/lib/stripe_io.h"
#include "common/status.h"
#include "net/buffer_pool.h"
#include "surge/client.h"

namespace surge::client {

class ClientImpl;

struct InodeState {
  Ino ino = 0;
  std::mutex mu;
  FileLayout layout;  // where its bytes live (format 1 or chains)
  uint64_t mds_size = 0;      // last size the MDS told us
  uint64_t written_end = 0;   // end of what we wrote (0: nothing)
  uint64_t reported_end = 0;  // what the MDS has been told
  bool dirty = false;         // writes since the last report
  int opens = 0;              // open handles in this client
  Caller last_caller;         // for re-recording opens after an MDS restart
  int last_flags = 0;
  // The latest write-behind failure and how many there were: each open
  // handle reports every failure since it last looked (as Linux's errseq
  // does for a file's descriptors), so one handle's close or flush cannot
  // take away the error another handle's fsync must see.
  Status write_error;
  uint64_t write_error_seq = 0;
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
    net::PoolBuffer pool_copy;  // the bytes, when a pool buffer was free
    std::unique_ptr<std::byte[]> heap_copy;
    std::unique_ptr<RegisteredBuffer> owned;  // the caller's buffer (pwrite_from)
    std::unique_ptr<WriteBatch> batch;        // null while being sent; destroyed first
  };
  std::mutex wb_mu;
  std::condition_variable wb_cv;      // a batch was attached to an in-flight write
  std::deque<PendingWrite> inflight;  // oldest first; guarded by wb_mu
  uint64_t inflight_bytes = 0;        // guarded by wb_mu

  // Bumped whenever this client changes the file's bytes or size (a write
  // accepted or retired, a truncate): read-ahead windows fetched under an
  // older value may hold old bytes and are dropped before being served.
  std::atomic<uint64_t> data_gen{0};

  // The mode as of the last open or setattr through this client: a write
  // clears setuid/setgid first when it has them (kill_suidgid_on_write).
  std::atomic<uint32_t> mode{0};
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
  uint64_t seen_error_seq = 0;     // state->write_error_seq this handle reported (under state->mu)
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
  ClientImpl* owner = nullptr;
};

}  // namespace surge::client
