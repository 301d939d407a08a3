// WriteBehind: a write returns once its bytes are copied into a buffer of
// the client's registered pool (or, for pwrite_from, once the caller's own
// registered buffer is handed over) and sent; up to `limit` bytes per inode
// stay in flight. Overlapping writes are never in flight together, so they
// land in program order (data servers may apply concurrent requests in any
// order). A write that fails in flight is kept in the inode's write_error
// and reported by the next write, flush, fsync or close of every handle
// open on the file (as Linux reports a writeback error to each descriptor). When
// no buffer is free, the file's oldest write in flight is waited for and
// its buffer tried again; when none of the file's writes is in flight, or
// the write is larger than the limit, or the limit is 0, the write goes
// through: it returns when the bytes are stored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "client/lib/data_path.h"
#include "client/lib/open_file.h"
#include "common/status.h"
#include "net/buffer_pool.h"

namespace surge::client {

class WriteBehind {
 public:
  WriteBehind(net::BufferPool* pool, DataPath* data, size_t limit)
      : pool_(pool), data_(data), limit_(limit) {}

  // Writes [offset, offset + len) of st's inode from buf (len > 0). owned
  // (may be null) is the caller's registered buffer holding buf, kept
  // instead of a copy; on_accepted (may be null) runs once the write is
  // ordered, before its bytes travel. Extends st's written end.
  Result<size_t> write(InodeState& st, const std::byte* buf, size_t len, uint64_t offset,
                       std::unique_ptr<RegisteredBuffer>* owned,
                       const std::function<void()>* on_accepted);
  // Waits for every write in flight on st; failures go to st.write_error.
  void drain(InodeState& st);
  // The failure of an earlier write in flight not yet reported to this
  // handle, once (then OK again for it).
  Status take_error(FileImpl& f);
  // The same failure, left to be reported again (a flush's: see
  // ClientImpl::flush).
  Status peek_error(const FileImpl& f);

 private:
  // st.wb_mu held by `wl`; may wait (releasing it) for the oldest write's send.
  void retire_oldest_locked(InodeState& st, std::unique_lock<std::mutex>& wl);

  net::BufferPool* pool_;
  DataPath* data_;
  size_t limit_;
};

}  // namespace surge::client
