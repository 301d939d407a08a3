#include "client/lib/read_ahead.h"

#include <vector>

#include "client/lib/registered_buffers.h"

namespace surge::client {

void ReadAhead::drop(FileImpl& f) {
  std::lock_guard lk(f.ra_mu);
  f.ra_windows.clear();  // each waits for its batch before its buffer goes
}

Status ReadAhead::read(FileImpl& f, const FileLayout& layout, uint64_t size, size_t read_ahead,
                       size_t n, uint64_t offset, std::byte* dst, const Client::ReadSink& sink) {
  constexpr uint64_t kWindow = 1u << 20;
  InodeState& st = *f.state;
  std::lock_guard lk(f.ra_mu);
  if (const uint64_t gen = st.data_gen.load(std::memory_order_acquire); gen != f.ra_gen) {
    f.ra_windows.clear();  // fetched before a write or truncate of this client
    f.ra_gen = gen;
  }
  const bool sequential = offset == f.ra_next;
  f.ra_next = offset + n;
  if (!f.ra_windows.empty() &&
      (offset < f.ra_windows.front().offset ||
       offset >= f.ra_windows.front().offset + f.ra_windows.front().length)) {
    f.ra_windows.clear();  // not where this read is: a jump
  }
  // The pieces point into the windows, which therefore stay until sink has
  // run: only then are the ones used up (or failed) dropped.
  std::vector<iovec> pieces;
  uint64_t pos = offset;
  size_t done = 0, used_up = 0;
  bool failed = false;
  for (size_t i = 0; done < n && i < f.ra_windows.size(); ++i) {
    FileImpl::Window& w = f.ra_windows[i];  // contiguous: w.offset == pos
    if (!w.landed) {
      w.status = w.batch->wait();
      w.landed = true;
    }
    if (!w.status.ok()) {
      failed = true;  // read it again directly below: a lasting error is reported from there
      break;
    }
    size_t k = static_cast<size_t>(std::min<uint64_t>(n - done, w.offset + w.length - pos));
    pieces.push_back({w.buf.data() + (pos - w.offset), k});
    done += k;
    pos += k;
    if (pos == w.offset + w.length) used_up = i + 1;
  }
  std::unique_ptr<RegisteredBuffer> rest;
  if (done < n) {
    std::byte* into = dst != nullptr ? dst + done : nullptr;
    if (into == nullptr) {
      SURGE_ASSIGN_OR_RETURN(rest, any_buffer(*pool_, n - done));
      into = rest->data();
    }
    SURGE_RETURN_IF_ERROR(data_->read(st.ino, layout, into, n - done, pos));
    pieces.push_back({into, n - done});
  }
  sink(pieces);
  if (failed) {
    f.ra_windows.clear();
  } else {
    f.ra_windows.erase(f.ra_windows.begin(),
                       f.ra_windows.begin() + static_cast<std::ptrdiff_t>(used_up));
  }
  if (!sequential) return Status::OK();
  uint64_t from =
      f.ra_windows.empty() ? offset + n : f.ra_windows.back().offset + f.ra_windows.back().length;
  const uint64_t until = std::min(size, offset + n + read_ahead);
  while (from < until) {
    const uint64_t end = std::min(until, (from / kWindow + 1) * kWindow);
    auto pb = pool_->try_acquire(end - from);
    if (!pb.ok()) break;  // the pool is busy (write behind): read ahead less
    FileImpl::Window w;
    w.offset = from;
    w.length = end - from;
    w.buf = std::move(*pb);
    w.batch = data_->start_read(st.ino, layout, w.buf.data(), w.length, from);
    f.ra_windows.push_back(std::move(w));
    from = end;
  }
  return Status::OK();
}

}  // namespace surge::client
