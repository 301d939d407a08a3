#include "client/lib/write_behind.h"

#include <cstring>
#include <new>

namespace surge::client {

void WriteBehind::retire_oldest_locked(InodeState& st, std::unique_lock<std::mutex>& wl) {
  // The oldest may still be being sent by its writer (wb_mu released).
  st.wb_cv.wait(wl, [&] { return st.inflight.empty() || st.inflight.front().batch != nullptr; });
  if (st.inflight.empty()) return;  // another thread retired it meanwhile
  InodeState::PendingWrite w = std::move(st.inflight.front());
  st.inflight.pop_front();
  st.inflight_bytes -= w.length;
  Status s = w.batch->wait();
  // Read ahead fetched while these bytes travelled may hold the old ones.
  st.data_gen.fetch_add(1, std::memory_order_acq_rel);
  if (!s.ok()) {
    std::lock_guard lk(st.mu);
    st.write_error = s;
    ++st.write_error_seq;
  }
}

void WriteBehind::drain(InodeState& st) {
  std::unique_lock wl(st.wb_mu);
  while (!st.inflight.empty()) retire_oldest_locked(st, wl);
}

Status WriteBehind::take_error(FileImpl& f) {
  InodeState& st = *f.state;
  std::lock_guard lk(st.mu);
  if (f.seen_error_seq == st.write_error_seq) return Status::OK();
  f.seen_error_seq = st.write_error_seq;
  return st.write_error;
}

Status WriteBehind::peek_error(const FileImpl& f) {
  InodeState& st = *f.state;
  std::lock_guard lk(st.mu);
  return f.seen_error_seq == st.write_error_seq ? Status::OK() : st.write_error;
}

Result<size_t> WriteBehind::write(InodeState& st, const std::byte* buf, size_t len, uint64_t offset,
                                  std::unique_ptr<RegisteredBuffer>* owned,
                                  const std::function<void()>* on_accepted) {
  auto accepted = [&] {
    if (on_accepted != nullptr && *on_accepted) (*on_accepted)();
  };
  FileLayout layout;
  {
    std::lock_guard lk(st.mu);
    layout = st.layout;
  }
  auto note_written = [&] {
    std::lock_guard lk(st.mu);
    st.written_end = std::max(st.written_end, offset + len);
    st.dirty = true;
  };
  if (limit_ > 0 && len <= limit_) {
    std::unique_lock wl(st.wb_mu);
    auto overlaps = [&] {
      for (const auto& w : st.inflight) {
        if (offset < w.offset + w.length && w.offset < offset + len) return true;
      }
      return false;
    };
    while (!st.inflight.empty() && (st.inflight_bytes + len > limit_ || overlaps())) {
      retire_oldest_locked(st, wl);
    }
    InodeState::PendingWrite w;
    w.offset = offset;
    w.length = len;
    const std::byte* src = nullptr;  // what the data servers read, kept until done
    if (owned != nullptr) {
      w.owned = std::move(*owned);
      src = buf;
    } else if (len <= pool_->max_buffer_size()) {
      // No buffer free: this file's oldest write in flight gives its buffer
      // back (once it landed) and we try again, rather than waiting for
      // every write in flight and writing through: small writes keep
      // flowing when the pool, not the data servers, is the limit.
      for (;;) {
        auto pb = pool_->try_acquire(len);
        if (pb.ok()) {
          w.pool_copy = std::move(*pb);
          std::memcpy(w.pool_copy.data(), buf, len);
          src = w.pool_copy.data();
          break;
        }
        if (st.inflight.empty()) break;
        retire_oldest_locked(st, wl);
      }
    } else {
      w.heap_copy.reset(new (std::nothrow) std::byte[len]);
      if (w.heap_copy) {
        std::memcpy(w.heap_copy.get(), buf, len);
        src = w.heap_copy.get();
      }
    }
    if (src != nullptr) {
      // Ordered now: the write is in the in-flight list before wb_mu is let
      // go, so no later overlapping write can pass it (it waits to retire
      // this one, which waits for the send below). The caller may
      // acknowledge before the bytes leave. References to deque elements
      // survive pushes and pops of others, and this one is popped only
      // after its batch is attached.
      st.inflight_bytes += len;
      InodeState::PendingWrite& mine = st.inflight.emplace_back(std::move(w));
      note_written();
      accepted();
      wl.unlock();
      std::unique_ptr<WriteBatch> batch = data_->start_write(st.ino, layout, src, len, offset);
      wl.lock();
      mine.batch = std::move(batch);
      // Notified under the lock: once it is let go, a close waiting for this
      // batch may finish and free st (the caller was answered above, so the
      // kernel may already have released the file), and nothing of st may
      // be touched after that.
      st.wb_cv.notify_all();
      return len;
    }
    while (!st.inflight.empty()) retire_oldest_locked(st, wl);  // no memory: write through
  } else {
    drain(st);
  }
  SURGE_RETURN_IF_ERROR(data_->write(st.ino, layout, buf, len, offset));
  note_written();
  accepted();
  return len;
}

}  // namespace surge::client
