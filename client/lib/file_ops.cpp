// ClientImpl's operations on open files: reads (through read ahead when it
// is on), writes (through write behind), fsync, flush and close. The rooms
// they use do the work; this file orders them.
#include <fcntl.h>
#include <sys/stat.h>

#include <cstring>

#include "client/lib/client_impl.h"
#include "client/lib/registered_buffers.h"
#include "net/proto/mds_methods.h"

namespace surge::client {

namespace mds = proto::mds;

// ---- reads ------------------------------------------------------------------------

Result<size_t> ClientImpl::pread(File& file, void* buf, size_t len, uint64_t offset) {
  // What is not in read-ahead windows is read straight into buf (the piece
  // handed over then lies there already); the windows' pieces are copied.
  auto* dst = static_cast<std::byte*>(buf);
  std::byte* at = dst;
  return read_impl(static_cast<FileImpl&>(file), len, offset, dst,
                   [&at](std::span<const iovec> pieces) {
                     for (const iovec& p : pieces) {
                       if (p.iov_base != at) std::memcpy(at, p.iov_base, p.iov_len);
                       at += p.iov_len;
                     }
                   });
}

Result<size_t> ClientImpl::pread_to(File& file, size_t len, uint64_t offset, const ReadSink& sink) {
  return read_impl(static_cast<FileImpl&>(file), len, offset, nullptr, sink);
}

std::pair<uint64_t, FileLayout> ClientImpl::read_extent(FileImpl& f) {
  std::lock_guard lk(f.state->mu);
  return {std::max(f.state->mds_size, f.state->written_end), f.state->layout};
}

Result<size_t> ClientImpl::read_impl(FileImpl& f, size_t len, uint64_t offset, std::byte* dst,
                                     const ReadSink& sink) {
  if ((f.flags() & O_ACCMODE) == O_WRONLY) {
    return Status(Code::kBadFile, "inode " + std::to_string(f.ino()) + " is open write-only");
  }
  auto [size, layout] = read_extent(f);
  if (offset >= size || len == 0) {
    sink({});
    return size_t{0};
  }
  writes_->drain(*f.state);  // our own writes in flight first
  size_t n = static_cast<size_t>(std::min<uint64_t>(len, size - offset));
  if (size_t ra = f.read_ahead.load(std::memory_order_relaxed); ra > 0) {
    SURGE_RETURN_IF_ERROR(read_ahead_->read(f, layout, size, ra, n, offset, dst, sink));
    return n;
  }
  std::unique_ptr<RegisteredBuffer> own;
  if (dst == nullptr) {
    SURGE_ASSIGN_OR_RETURN(own, register_buffer(n));
    dst = own->data();
  }
  SURGE_RETURN_IF_ERROR(data_->read(f.ino(), layout, dst, n, offset));
  const iovec piece{dst, n};
  sink({&piece, 1});
  return n;
}

void ClientImpl::set_read_ahead(File& file, size_t bytes) {
  static_cast<FileImpl&>(file).read_ahead.store(bytes, std::memory_order_relaxed);
}

// ---- writes -----------------------------------------------------------------------

Result<size_t> ClientImpl::pwrite(File& file, const void* buf, size_t len, uint64_t offset) {
  return write_impl(file, static_cast<const std::byte*>(buf), len, offset, nullptr, nullptr);
}

Result<size_t> ClientImpl::pwrite_from(File& file, std::unique_ptr<RegisteredBuffer> buf,
                                       const std::byte* data, size_t len, uint64_t offset,
                                       const std::function<void()>& on_accepted) {
  if (!buf || data < buf->data() || len > buf->size() ||
      static_cast<size_t>(data - buf->data()) > buf->size() - len) {
    return Status::InvalidArgument("pwrite_from: the data does not lie inside the buffer given");
  }
  return write_impl(file, data, len, offset, &buf, &on_accepted);
}

Result<size_t> ClientImpl::write_impl(File& file, const std::byte* buf, size_t len, uint64_t offset,
                                      std::unique_ptr<RegisteredBuffer>* owned,
                                      const std::function<void()>* on_accepted) {
  auto& f = static_cast<FileImpl&>(file);
  if ((f.flags() & O_ACCMODE) == O_RDONLY) {
    return Status(Code::kBadFile, "inode " + std::to_string(f.ino()) + " is open read-only");
  }
  if (len == 0) {
    if (on_accepted != nullptr && *on_accepted) (*on_accepted)();
    return size_t{0};
  }
  InodeState& st = *f.state;
  SURGE_RETURN_IF_ERROR(writes_->take_error(f));  // an earlier write-behind failure
  SURGE_RETURN_IF_ERROR(kill_suidgid_before_write(f));
  st.data_gen.fetch_add(1, std::memory_order_acq_rel);  // every handle's windows may be stale
  if (f.flags() & O_APPEND) {
    writes_->drain(st);
    SURGE_RETURN_IF_ERROR(writes_->take_error(f));
    SURGE_ASSIGN_OR_RETURN(Attr a, getattr(f.ino(), f.caller));
    offset = a.size;
  }
  return writes_->write(st, buf, len, offset, owned, on_accepted);
}

// Linux clears setuid, and setgid with group-execute, when a process
// without CAP_FSETID writes (for libsurge callers: any uid but 0), so an
// altered program keeps no privilege. Once per change: the MDS answers
// with the new mode. Through the open file, so a mode that denies writing
// since the open does not refuse it.
Status ClientImpl::kill_suidgid_before_write(FileImpl& f) {
  const uint32_t mode = f.state->mode.load(std::memory_order_relaxed);
  const bool killable = (mode & S_ISUID) != 0 || (mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP);
  if (!options_.kill_suidgid_on_write || f.caller.uid == 0 || !killable) return Status::OK();
  SetAttr sa;
  sa.mask = kKillSuidgid;
  sa.file = &f;
  SURGE_ASSIGN_OR_RETURN(Attr a, setattr(f.ino(), sa, f.caller));
  f.state->mode.store(a.mode, std::memory_order_relaxed);
  return Status::OK();
}

// ---- fsync, flush, close --------------------------------------------------------------

Status ClientImpl::fsync(File& file, bool data_only) {
  auto& f = static_cast<FileImpl&>(file);
  FileLayout layout;
  {
    std::lock_guard lk(f.state->mu);
    layout = f.state->layout;
  }
  writes_->drain(*f.state);
  SURGE_RETURN_IF_ERROR(writes_->take_error(f));
  if (layout.stripe_count > 0) SURGE_RETURN_IF_ERROR(data_->sync(f.ino(), layout));
  return sizes_->report(*f.state, false);
}

// A flush reports a write-behind failure without clearing it, as NFS's
// close does: through the mount a FLUSH comes with the close of every copy
// of a descriptor, a forked child's exit included, and such a close must
// not take the error from the process that wrote and will fsync or close
// it (found by surge-stress: its `surgectl` children's exits flushed the
// workers' descriptors, and a writer's fsync returned 0 for bytes that
// never landed). fsync and the last close clear it.
Status ClientImpl::flush(File& file) {
  auto& f = static_cast<FileImpl&>(file);
  writes_->drain(*f.state);
  SURGE_RETURN_IF_ERROR(writes_->peek_error(f));
  return sizes_->report(*f.state, false);
}

Status ClientImpl::close_handle(FileImpl& f) {
  if (f.closed.exchange(true)) return Status::OK();
  writes_->drain(*f.state);
  Status first = writes_->take_error(f);
  Status rs = sizes_->report(*f.state, false);
  if (first.ok()) first = rs;
  read_ahead_->drop(f);  // its pool buffers serve others now
  inodes_.release(f.state);
  // Its size and times as the MDS has them now are newer than any fetch.
  if ((f.flags() & O_ACCMODE) != O_RDONLY) ahead_.inode_changed(f.ino());
  // The size is reported (close-to-open holds from here); the MDS's open
  // record is released off this path (close_queue.h).
  closes_->post(session_->id(), f.ino());
  return first;
}

Status ClientImpl::close(FileRef f) {
  if (!f) return Status::InvalidArgument("close of a null file");
  return close_handle(static_cast<FileImpl&>(*f));
}

Result<std::unique_ptr<RegisteredBuffer>> ClientImpl::try_pool_buffer(size_t size) {
  return pool_buffer(*pool_, size);
}

Result<std::unique_ptr<RegisteredBuffer>> ClientImpl::register_buffer(size_t size) {
  return any_buffer(*pool_, size);
}

}  // namespace surge::client
