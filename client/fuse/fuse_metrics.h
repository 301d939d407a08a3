// The FUSE operations on surge-fuse's metrics page (served with
// --metrics-listen): per operation (label op = "lookup", "read", ...)
//   surge_fuse_requests_total            requests handled
//   surge_fuse_request_errors_total      requests answered with an error
//   surge_fuse_request_duration_seconds  time in the handler (a write that goes
//                                        behind: until it is handed to libsurge)
//
// timed<op, fn> wraps an operation of the low-level table: the wrapper
// counts and times the call and, for the call's duration, makes op the
// thread's current operation, so reply_error() (used instead of
// fuse_reply_err in surge_fs.cpp) charges an error to it. Every series is
// resolved once, at the first request (or declare_fuse_metrics()), into a
// table indexed by op: a request costs two relaxed increments and a
// histogram observe, no lock.
#pragma once

#include <fuse_lowlevel.h>

#include <chrono>
#include <cstddef>

namespace surge::fuse {

enum class FuseOp : size_t {
  kLookup, kForget, kForgetMulti, kGetattr, kSetattr, kReadlink, kMknod, kMkdir, kUnlink,
  kRmdir, kSymlink, kRename, kLink, kOpen, kCreate, kRead, kWrite, kFlush, kFallocate,
  kRelease, kFsync, kOpendir, kReaddir, kReaddirplus, kReleasedir, kStatfs, kSetxattr,
  kGetxattr, kListxattr, kRemovexattr, kAccess,
  kCount
};

// The label value of an operation ("forget_multi").
const char* fuse_op_name(FuseOp op);

// Declares every series in the process's registry (zero for each op), so
// the page lists them before the first request.
void declare_fuse_metrics();

// For the duration of one operation on this thread (see timed).
class FuseOpScope {
 public:
  explicit FuseOpScope(FuseOp op);
  ~FuseOpScope();
  FuseOpScope(const FuseOpScope&) = delete;
  FuseOpScope& operator=(const FuseOpScope&) = delete;

 private:
  FuseOp op_;
  FuseOp outer_;  // the thread's operation before (none outside a handler)
  std::chrono::steady_clock::time_point start_;
};

// fuse_reply_err, and an error (errno != 0) counted against the thread's
// current operation.
int reply_error(fuse_req_t req, int err);

template <FuseOp op, auto fn>
struct Timed;
template <FuseOp op, class... A, void (*fn)(fuse_req_t, A...)>
struct Timed<op, fn> {
  static void call(fuse_req_t req, A... args) {
    FuseOpScope scope(op);
    fn(req, args...);
  }
};
// The operation fn, counted and timed as op.
template <FuseOp op, auto fn>
inline constexpr auto timed = &Timed<op, fn>::call;

}  // namespace surge::fuse
