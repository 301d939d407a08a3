// ObjectStore::fallocate: reserve, punch and zero ranges of an object with
// fallocate(2), and keep the per-block CRC sidecar true (block_checksum.h).
//
// The sidecar convention makes this cheap: an entry of 0 is the CRC of a
// zero block, so every block the range covers whole just gets entry 0
// (punched out of the sidecar too, for a punch, so large punches free the
// sidecar's pages as well). Only the partly covered blocks at the edges
// need their CRC computed again, after the file system zeroed their part.
// Ordering is a write's: dirty log entry, data, then CRCs; a crash in
// between leaves blocks that recovery re-checksums (object_store.h).
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <vector>

#include "common/log.h"
#include "ods/store/object_store.h"

namespace surge::ods {
namespace {

std::string range_text(uint64_t offset, uint64_t length) {
  std::string s = "[";  // appended, not "[" + string: GCC 12's false -Wrestrict
  s += std::to_string(offset);
  s += ", +";
  s += std::to_string(length);
  s += ")";
  return s;
}

// fallocate(2) retried on EINTR; 0 or the errno.
int fallocate_errno(int fd, int mode, uint64_t offset, uint64_t length) {
  for (;;) {
    if (::fallocate(fd, mode, static_cast<off_t>(offset), static_cast<off_t>(length)) == 0) return 0;
    if (errno != EINTR) return errno;
  }
}

// Makes [offset, +length) of fd read as zeros and stay allocated. Tries
// FALLOC_FL_ZERO_RANGE; where the file system lacks it (tmpfs), punches
// and allocates again.
int zero_range(int fd, uint64_t offset, uint64_t length, bool keep_size) {
  const int keep = keep_size ? FALLOC_FL_KEEP_SIZE : 0;
  int err = fallocate_errno(fd, FALLOC_FL_ZERO_RANGE | keep, offset, length);
  if (err != EOPNOTSUPP) return err;
  err = fallocate_errno(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length);
  if (err != 0) return err;
  return fallocate_errno(fd, keep, offset, length);
}

}  // namespace

Status ObjectStore::fallocate(uint64_t id, uint64_t offset, uint64_t length, SpaceOp op,
                              bool keep_size) {
  const std::string what = "fallocate object " + std::to_string(id) + " " + range_text(offset, length);
  if (id == 0) return Status::InvalidArgument("fallocate: object id 0 is not an object");
  if (length == 0) return Status::InvalidArgument(what + ": length 0");
  if (offset > options_.max_object_size || length > options_.max_object_size - offset) {
    return Status::InvalidArgument(what + ": past the maximum object size " +
                                   std::to_string(options_.max_object_size));
  }
  if (op == SpaceOp::kPunch) keep_size = true;  // as Linux: a punch never changes the size
  auto got = get(id, op != SpaceOp::kPunch);
  if (!got.ok()) {
    // Nothing to punch in an object that was never written.
    if (op == SpaceOp::kPunch && got.status().code() == Code::kNotFound) return Status::OK();
    return got.status();
  }
  auto obj = std::move(got).value();
  std::unique_lock lk(obj->mu);
  const uint64_t old_size = obj->size;
  const uint64_t end = offset + length;
  const uint64_t first_block = offset / kBlockSize, last_block = (end - 1) / kBlockSize;
  const bool zeroes = op != SpaceOp::kReserve;

  // Edge blocks partly in the range that hold data: their other bytes stay,
  // so they must be sound before they get a new CRC.
  std::vector<uint64_t> edges;
  if (zeroes) {
    auto partial_with_data = [&](uint64_t b) {
      const uint64_t bs = b * kBlockSize;
      return (offset > bs || end < bs + kBlockSize) && bs < old_size;
    };
    if (partial_with_data(first_block)) edges.push_back(first_block);
    if (last_block != first_block && partial_with_data(last_block)) edges.push_back(last_block);
    std::array<std::byte, kBlockSize> buf;
    for (uint64_t b : edges) SURGE_RETURN_IF_ERROR(read_block(*obj, b, buf.data()));
  }

  SURGE_RETURN_IF_ERROR(begin_change(id));
  ChangeScope change(this, id);
  int err = 0;
  switch (op) {
    case SpaceOp::kReserve:
      err = fallocate_errno(obj->data_fd, keep_size ? FALLOC_FL_KEEP_SIZE : 0, offset, length);
      break;
    case SpaceOp::kPunch:
      err = fallocate_errno(obj->data_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length);
      break;
    case SpaceOp::kZero:
      err = zero_range(obj->data_fd, offset, length, keep_size);
      break;
  }
  // A failed fallocate may still have allocated (and, without KEEP_SIZE,
  // grown the file over) part of the range: the size is what the file says.
  struct stat sb {};
  if (::fstat(obj->data_fd, &sb) != 0) {
    return Status::FromErrno(errno, what + ": fstat " + obj->data_path);
  }
  obj->size = static_cast<uint64_t>(sb.st_size);
  if (err != 0) {
    if (zeroes) {
      // The zeroing may have reached some blocks: their CRCs follow the data.
      for (uint64_t b = first_block; b <= last_block && b * kBlockSize < old_size; ++b) {
        Status rs = rechecksum_block(*obj, b, false);
        if (!rs.ok()) SLOG_ERROR("object {}: {}", id, rs.ToString());
      }
    }
    return Status::FromErrno(err, what + " (" + obj->data_path + ")");
  }

  if (zeroes) {
    // Blocks the range covers whole and that held data get entry 0 (a zero
    // block); entries past the old end are 0 already.
    const uint64_t whole_from = (offset + kBlockSize - 1) / kBlockSize;
    const uint64_t whole_to = std::min(end / kBlockSize, (old_size + kBlockSize - 1) / kBlockSize);
    if (whole_to > whole_from) {
      const uint64_t at = whole_from * kCrcEntrySize, n = (whole_to - whole_from) * kCrcEntrySize;
      err = op == SpaceOp::kPunch
                ? fallocate_errno(obj->crc_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, at, n)
                : zero_range(obj->crc_fd, at, n, true);
      if (err != 0) return Status::FromErrno(err, what + ": zeroing its checksums");
    }
    for (uint64_t b : edges) SURGE_RETURN_IF_ERROR(rechecksum_block(*obj, b, false));
  }
  if (op != SpaceOp::kPunch) {
    // The sidecar entries a later write of the range stores need room too.
    const uint64_t at = first_block * kCrcEntrySize;
    const uint64_t n = (last_block - first_block + 1) * kCrcEntrySize;
    err = fallocate_errno(obj->crc_fd, FALLOC_FL_KEEP_SIZE, at, n);
    if (err != 0) return Status::FromErrno(err, what + ": reserving its checksums");
  }
  return Status::OK();
}

}  // namespace surge::ods
