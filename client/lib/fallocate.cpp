// fallocate through libsurge: Client::fallocate (ordering against this
// client's write behind and read ahead, the file size) and the striped
// calls to the data servers (DataPath::fallocate: one OdsFallocate per
// chunk the range touches, each to its chain's head or its format 1
// target, retried as a write is).
//
// Order: the size lock is taken (no size report or truncate of the inode
// runs meanwhile), the writes in flight land, the data servers do the
// operation, and only then, for a mode that grows the file, the new end is
// reported to the MDS (max-merged there, as a write's end). Read-ahead
// windows fetched before or during the operation are dropped (data_gen).
#include <fcntl.h>
#include <linux/falloc.h>

#include <vector>

#include "client/lib/client_impl.h"
#include "net/proto/ods_methods.h"

namespace surge::client {

static_assert(kFallocKeepSize == FALLOC_FL_KEEP_SIZE && kFallocPunchHole == FALLOC_FL_PUNCH_HOLE &&
                  kFallocZeroRange == FALLOC_FL_ZERO_RANGE,
              "surge/client.h's fallocate modes are Linux's");

Status ClientImpl::fallocate(File& file, int mode, uint64_t offset, uint64_t length) {
  auto& f = static_cast<FileImpl&>(file);
  const std::string what = "fallocate of inode " + std::to_string(f.ino());
  if ((f.flags() & O_ACCMODE) == O_RDONLY) {
    return Status(Code::kBadFile, what + ": the file is open read-only");
  }
  if (length == 0) return Status::InvalidArgument(what + ": length 0");
  if (offset + length < offset || offset + length > (uint64_t{1} << 63)) {
    return Status(Code::kFileTooBig, what + ": the range ends past the largest file size");
  }
  // What Linux accepts, as ext4 answers the rest (collapse, insert, unshare
  // range, no-hide-stale): EOPNOTSUPP.
  if ((mode & ~(kFallocKeepSize | kFallocPunchHole | kFallocZeroRange)) != 0 ||
      ((mode & kFallocPunchHole) && !(mode & kFallocKeepSize)) ||
      ((mode & kFallocPunchHole) && (mode & kFallocZeroRange))) {
    return Status::NotSupported(what + ": mode " + std::to_string(mode) +
                                " is not supported (0, KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE, "
                                "ZERO_RANGE[|KEEP_SIZE])");
  }
  const proto::ods::FallocateMode op = (mode & kFallocPunchHole)   ? proto::ods::FALLOCATE_PUNCH
                                       : (mode & kFallocZeroRange) ? proto::ods::FALLOCATE_ZERO
                                                                   : proto::ods::FALLOCATE_RESERVE;
  const bool keep_size = (mode & kFallocKeepSize) != 0;
  InodeState& st = *f.state;

  std::lock_guard size_lock(st.size_mu);
  writes_->drain(st);  // an earlier write of the range lands before it is punched or zeroed
  FileLayout layout;
  {
    std::lock_guard lk(st.mu);
    layout = st.layout;
  }
  st.data_gen.fetch_add(1, std::memory_order_acq_rel);
  Status s = data_->fallocate(f.ino(), layout, offset, length, op, keep_size);
  // Windows read while the data servers changed the range are stale too.
  st.data_gen.fetch_add(1, std::memory_order_acq_rel);
  SURGE_RETURN_IF_ERROR_CTX(s, what);
  if (keep_size) return Status::OK();
  const uint64_t end = offset + length;
  {
    std::lock_guard lk(st.mu);
    if (end <= std::max(st.mds_size, st.written_end)) return Status::OK();
    st.written_end = end;
    st.dirty = true;
  }
  SURGE_RETURN_IF_ERROR_CTX(sizes_->report_locked(st, false), what);
  return Status::OK();
}

}  // namespace surge::client
