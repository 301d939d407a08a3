// Status names, errno mapping and formatting.
#include "common/status.h"

#include <cerrno>
#include <cstring>

namespace surge {

std::string_view code_name(Code c) {
  switch (c) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kNotFound: return "NotFound";
    case Code::kAlreadyExists: return "AlreadyExists";
    case Code::kPermissionDenied: return "PermissionDenied";
    case Code::kNotPermitted: return "NotPermitted";
    case Code::kIOError: return "IOError";
    case Code::kCorruption: return "Corruption";
    case Code::kNoSpace: return "NoSpace";
    case Code::kBusy: return "Busy";
    case Code::kTimedOut: return "TimedOut";
    case Code::kNotSupported: return "NotSupported";
    case Code::kInternal: return "Internal";
    case Code::kResourceExhausted: return "ResourceExhausted";
    case Code::kCancelled: return "Cancelled";
    case Code::kOutOfRange: return "OutOfRange";
    case Code::kNotDirectory: return "NotDirectory";
    case Code::kIsDirectory: return "IsDirectory";
    case Code::kNotEmpty: return "NotEmpty";
    case Code::kNameTooLong: return "NameTooLong";
    case Code::kNoData: return "NoData";
    case Code::kTooBig: return "TooBig";
    case Code::kTooManyLinks: return "TooManyLinks";
    case Code::kStale: return "Stale";
    case Code::kLoop: return "Loop";
    case Code::kFileTooBig: return "FileTooBig";
    case Code::kBadFile: return "BadFile";
    case Code::kReadOnly: return "ReadOnly";
    case Code::kNotTty: return "NotTty";
    case Code::kXdev: return "CrossDevice";
    case Code::kDisconnected: return "Disconnected";
    case Code::kProtocolError: return "ProtocolError";
    case Code::kUnknownMethod: return "UnknownMethod";
    case Code::kAuthFailed: return "AuthFailed";
    case Code::kUnavailable: return "Unavailable";
    case Code::kConnectionRefused: return "ConnectionRefused";
    case Code::kStaleChain: return "StaleChain";
    case Code::kWrongTarget: return "WrongTarget";
    case Code::kChunkDirty: return "ChunkDirty";
    case Code::kChunkVersionGap: return "ChunkVersionGap";
    case Code::kNotServing: return "NotServing";
  }
  return "Unknown";
}

int to_errno(Code c) {
  switch (c) {
    case Code::kOk: return 0;
    case Code::kInvalidArgument: return EINVAL;
    case Code::kNotFound: return ENOENT;
    case Code::kAlreadyExists: return EEXIST;
    case Code::kPermissionDenied: return EACCES;
    case Code::kNotPermitted: return EPERM;
    case Code::kIOError: return EIO;
    case Code::kCorruption: return EIO;
    case Code::kNoSpace: return ENOSPC;
    case Code::kBusy: return EBUSY;
    case Code::kTimedOut: return ETIMEDOUT;
    case Code::kNotSupported: return EOPNOTSUPP;
    case Code::kInternal: return EIO;
    case Code::kResourceExhausted: return ENOMEM;
    case Code::kCancelled: return ECANCELED;
    case Code::kOutOfRange: return ERANGE;
    case Code::kNotDirectory: return ENOTDIR;
    case Code::kIsDirectory: return EISDIR;
    case Code::kNotEmpty: return ENOTEMPTY;
    case Code::kNameTooLong: return ENAMETOOLONG;
    case Code::kNoData: return ENODATA;
    case Code::kTooBig: return E2BIG;
    case Code::kTooManyLinks: return EMLINK;
    case Code::kStale: return ESTALE;
    case Code::kLoop: return ELOOP;
    case Code::kFileTooBig: return EFBIG;
    case Code::kBadFile: return EBADF;
    case Code::kReadOnly: return EROFS;
    case Code::kNotTty: return ENOTTY;
    case Code::kXdev: return EXDEV;
    case Code::kDisconnected: return EIO;
    case Code::kProtocolError: return EPROTO;
    case Code::kUnknownMethod: return ENOSYS;
    case Code::kAuthFailed: return EACCES;
    case Code::kUnavailable: return EIO;
    case Code::kConnectionRefused: return ECONNREFUSED;
    case Code::kStaleChain:
    case Code::kWrongTarget:
    case Code::kChunkDirty:
    case Code::kChunkVersionGap:
    case Code::kNotServing: return EIO;
  }
  return EIO;
}

Code from_errno(int err) {
  switch (err) {
    case 0: return Code::kOk;
    case EINVAL: return Code::kInvalidArgument;
    case ENOENT: return Code::kNotFound;
    case EEXIST: return Code::kAlreadyExists;
    case EACCES: return Code::kPermissionDenied;
    case EPERM: return Code::kNotPermitted;
    case ENOSPC: case EDQUOT: return Code::kNoSpace;
    case EBUSY: return Code::kBusy;
    case ETIMEDOUT: return Code::kTimedOut;
    case EOPNOTSUPP: return Code::kNotSupported;
    case ENOMEM: case EAGAIN: return Code::kResourceExhausted;
    case ECANCELED: return Code::kCancelled;
    case ERANGE: return Code::kOutOfRange;
    case ENOTDIR: return Code::kNotDirectory;
    case EISDIR: return Code::kIsDirectory;
    case ENOTEMPTY: return Code::kNotEmpty;
    case ENAMETOOLONG: return Code::kNameTooLong;
    case ENODATA: return Code::kNoData;
    case E2BIG: return Code::kTooBig;
    case EMLINK: return Code::kTooManyLinks;
    case ESTALE: return Code::kStale;
    case ELOOP: return Code::kLoop;
    case EFBIG: return Code::kFileTooBig;
    case EBADF: return Code::kBadFile;
    case EROFS: return Code::kReadOnly;
    case EXDEV: return Code::kXdev;
    case ENOTCONN: case EPIPE: case ECONNRESET: return Code::kDisconnected;
    case EPROTO: return Code::kProtocolError;
    case ENOSYS: return Code::kUnknownMethod;
    case ECONNREFUSED: return Code::kConnectionRefused;
    default: return Code::kIOError;
  }
}

Status Status::FromErrno(int err, std::string_view what) {
  std::string m(what);
  m += ": ";
  m += std::strerror(err);
  return {from_errno(err), std::move(m)};
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s(code_name(code_));
  if (!msg_.empty()) {
    s += ": ";
    s += msg_;
  }
  return s;
}

Status Status::WithContext(std::string_view ctx) const {
  if (ok()) return *this;
  std::string m(ctx);
  m += ": ";
  m += msg_;
  return {code_, std::move(m)};
}

}  // namespace surge
