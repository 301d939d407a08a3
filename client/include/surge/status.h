// Status and Result<T>: the one error type of the whole project, and of
// libsurge's public API (installed as <surge/status.h>; the tree includes it
// as common/status.h).
//
// Errors are values. Every operation that can fail at run time returns a
// Status or a Result<T>; exceptions are reserved for programmer errors.
// Codes are grouped by subsystem and map one-to-one onto errno at the FUSE
// boundary (to_errno), and travel the wire as their numeric value, so a
// handler's status reaches the caller intact.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace surge {

// Numeric values are part of the wire protocol: append, never renumber.
enum class Code : uint16_t {
  kOk = 0,
  // common
  kInvalidArgument = 1,   // EINVAL
  kNotFound = 2,          // ENOENT
  kAlreadyExists = 3,     // EEXIST
  kPermissionDenied = 4,  // EACCES
  kNotPermitted = 5,      // EPERM
  kIOError = 6,           // EIO
  kCorruption = 7,        // EIO (checksum or on-disk format)
  kNoSpace = 8,           // ENOSPC
  kBusy = 9,              // EBUSY
  kTimedOut = 10,         // ETIMEDOUT
  kNotSupported = 11,     // EOPNOTSUPP
  kInternal = 12,         // EIO
  kResourceExhausted = 13,// ENOMEM / EAGAIN (pools, credits)
  kCancelled = 14,        // ECANCELED
  kOutOfRange = 15,       // ERANGE
  // namespace (POSIX)
  kNotDirectory = 20,     // ENOTDIR
  kIsDirectory = 21,      // EISDIR
  kNotEmpty = 22,         // ENOTEMPTY
  kNameTooLong = 23,      // ENAMETOOLONG
  kNoData = 24,           // ENODATA (xattr absent)
  kTooBig = 25,           // E2BIG (xattr value too large)
  kTooManyLinks = 26,     // EMLINK
  kStale = 27,            // ESTALE (inode gone)
  kLoop = 28,             // ELOOP
  kFileTooBig = 29,       // EFBIG
  kBadFile = 30,          // EBADF
  kReadOnly = 31,         // EROFS
  kNotTty = 32,           // unused placeholder to keep numbering dense
  kXdev = 33,             // EXDEV (never produced by the namespace itself)
  // rpc / transport
  kDisconnected = 40,     // ENOTCONN: the connection dropped
  kProtocolError = 41,    // EPROTO: malformed frame
  kUnknownMethod = 42,    // ENOSYS
  kAuthFailed = 43,       // EACCES: cluster key mismatch
  kUnavailable = 44,      // EIO: server down / unreachable
  kConnectionRefused = 45,// ECONNREFUSED
  // redundancy (docs/redundancy.md): refusals a client or data server
  // answers by refreshing the cluster map and retrying, never surfaced
  // to an application unless retries run out (then EIO)
  kStaleChain = 46,       // EIO: request made under an older chain version
  kWrongTarget = 47,      // EIO: request meant for another target id
  kChunkDirty = 48,       // EIO: replica holds an uncommitted update; read elsewhere
  kChunkVersionGap = 49,  // EIO: forwarded update skips a version; sync the chunk first
  kNotServing = 50,       // EIO: target is in the chain but not serving reads (syncing)
};

std::string_view code_name(Code c);
// errno for the FUSE boundary and the C API.
int to_errno(Code c);
// The inverse, for wrapping a failing syscall: Status::FromErrno.
Code from_errno(int err);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(Code code, std::string msg) : code_(code), msg_(std::move(msg)) {}

  static Status OK() { return {}; }
  static Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {Code::kAlreadyExists, std::move(m)}; }
  static Status PermissionDenied(std::string m) { return {Code::kPermissionDenied, std::move(m)}; }
  static Status NotPermitted(std::string m) { return {Code::kNotPermitted, std::move(m)}; }
  static Status IOError(std::string m) { return {Code::kIOError, std::move(m)}; }
  static Status Corruption(std::string m) { return {Code::kCorruption, std::move(m)}; }
  static Status NoSpace(std::string m) { return {Code::kNoSpace, std::move(m)}; }
  static Status Busy(std::string m) { return {Code::kBusy, std::move(m)}; }
  static Status TimedOut(std::string m) { return {Code::kTimedOut, std::move(m)}; }
  static Status NotSupported(std::string m) { return {Code::kNotSupported, std::move(m)}; }
  static Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {Code::kResourceExhausted, std::move(m)}; }
  static Status Cancelled(std::string m) { return {Code::kCancelled, std::move(m)}; }
  static Status OutOfRange(std::string m) { return {Code::kOutOfRange, std::move(m)}; }
  static Status Disconnected(std::string m) { return {Code::kDisconnected, std::move(m)}; }
  static Status ProtocolError(std::string m) { return {Code::kProtocolError, std::move(m)}; }
  static Status UnknownMethod(std::string m) { return {Code::kUnknownMethod, std::move(m)}; }
  static Status AuthFailed(std::string m) { return {Code::kAuthFailed, std::move(m)}; }
  static Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
  static Status StaleChain(std::string m) { return {Code::kStaleChain, std::move(m)}; }
  static Status WrongTarget(std::string m) { return {Code::kWrongTarget, std::move(m)}; }
  static Status ChunkDirty(std::string m) { return {Code::kChunkDirty, std::move(m)}; }
  static Status ChunkVersionGap(std::string m) { return {Code::kChunkVersionGap, std::move(m)}; }
  static Status NotServing(std::string m) { return {Code::kNotServing, std::move(m)}; }
  // From a failed syscall: "what: strerror(err)".
  static Status FromErrno(int err, std::string_view what);

  bool ok() const { return code_ == Code::kOk; }
  explicit operator bool() const { return ok(); }
  Code code() const { return code_; }
  const std::string& message() const { return msg_; }
  int to_errno() const { return surge::to_errno(code_); }
  // "NotFound: lookup 'a' in inode 7"
  std::string ToString() const;
  // Prefix context: "while writing object 5: <old message>".
  Status WithContext(std::string_view ctx) const;

  bool operator==(Code c) const { return code_ == c; }

 private:
  Code code_ = Code::kOk;
  std::string msg_;
};

// Result<T>: a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Status st) : v_(std::in_place_index<1>, std::move(st)) {    // NOLINT
    if (std::get<1>(v_).ok()) v_.template emplace<1>(Code::kInternal, "Result built from OK status");
  }
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<1>(v_);
  }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T value_or(T fallback) const& { return ok() ? value() : std::move(fallback); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace surge

#define SURGE_CONCAT_INNER(a, b) a##b
#define SURGE_CONCAT(a, b) SURGE_CONCAT_INNER(a, b)

// Return early with the status if it is not OK.
#define SURGE_RETURN_IF_ERROR(expr)              \
  do {                                           \
    ::surge::Status _st = (expr);                \
    if (!_st.ok()) return _st;                   \
  } while (0)

// Same, adding context: SURGE_RETURN_IF_ERROR_CTX(op(), "while writing " + name)
#define SURGE_RETURN_IF_ERROR_CTX(expr, ctx)     \
  do {                                           \
    ::surge::Status _st = (expr);                \
    if (!_st.ok()) return _st.WithContext(ctx);  \
  } while (0)

// auto x = ...; from a Result<T>, or return its status.
#define SURGE_ASSIGN_OR_RETURN(lhs, expr)                                  \
  auto SURGE_CONCAT(_res_, __LINE__) = (expr);                             \
  if (!SURGE_CONCAT(_res_, __LINE__).ok())                                 \
    return SURGE_CONCAT(_res_, __LINE__).status();                         \
  lhs = std::move(SURGE_CONCAT(_res_, __LINE__)).value()
