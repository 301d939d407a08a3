// Namespace: attribute changes (setattr, size reports, truncation of the
// objects), extended attributes and layouts. Each holds its inode's stripe
// while it reads, decides and commits.
#include <sys/stat.h>

#include "common/ec/rs_codec.h"
#include "mds/cluster/file_chunks.h"
#include "mds/namespace/errors.h"
#include "mds/namespace/namespace.h"
#include "mds/namespace/op_limits.h"
#include "mds/namespace/permissions.h"
#include "mds/namespace/record_wire.h"

namespace surge::mds {

namespace {
constexpr uint32_t kXattrCreate = 1;
constexpr uint32_t kXattrReplace = 2;
constexpr size_t kXattrNameMax = 255;
constexpr size_t kXattrValueMax = 65536;
constexpr size_t kXattrListMax = 65536;
constexpr uint32_t kMinStripeSize = 64 << 10;

enum class XattrNs { kUser, kTrusted, kSecurity, kSystem, kOther };
XattrNs xattr_ns(const std::string& name) {
  auto starts = [&](const char* p) { return name.rfind(p, 0) == 0; };
  if (starts("user.")) return XattrNs::kUser;
  if (starts("trusted.")) return XattrNs::kTrusted;
  if (starts("security.")) return XattrNs::kSecurity;
  if (starts("system.")) return XattrNs::kSystem;
  return XattrNs::kOther;
}

Status validate_xattr_name(const std::string& name) {
  if (name.empty() || name.size() > kXattrNameMax) {
    return Status::OutOfRange("xattr name of " + std::to_string(name.size()) +
                              " bytes (must be 1..255)");
  }
  if (name.find('\0') != std::string::npos) {
    return Status::InvalidArgument("xattr name contains a NUL byte");
  }
  switch (xattr_ns(name)) {
    case XattrNs::kSystem:
      return Status::NotSupported("xattr '" + name + "': system.* (ACLs) is not supported");
    case XattrNs::kOther:
      return Status::NotSupported("xattr '" + name + "': unknown namespace");
    default:
      return Status::OK();
  }
}

// May cred read (write=false) or change (write=true) xattr 'name' of a?
Status check_xattr_access(const pb::Credentials& c, const records::StoredAttr& a,
                          const std::string& name,
                          bool write) {
  switch (xattr_ns(name)) {
    case XattrNs::kTrusted:
      if (c.uid() != 0) {
        if (!write) return err::NoData("xattr '" + name + "' of " + ino_str(a.ino()));
        return Status::NotPermitted("xattr '" + name + "': trusted.* needs uid 0");
      }
      return Status::OK();
    case XattrNs::kSecurity:
      if (write && !is_owner_or_root(c, a)) {
        return Status::NotPermitted("xattr '" + name + "': only the owner may set it");
      }
      return Status::OK();
    case XattrNs::kUser:
      if (!S_ISREG(a.mode()) && !S_ISDIR(a.mode())) {
        if (write) {
          return Status::NotPermitted("xattr '" + name + "': user.* only on files and directories");
        }
        return err::NoData("xattr '" + name + "' of " + ino_str(a.ino()));
      }
      if (write && S_ISDIR(a.mode()) && (a.mode() & S_ISVTX) && !is_owner_or_root(c, a)) {
        return Status::NotPermitted("xattr '" + name + "': sticky directory of another owner");
      }
      return check_access(c, a, write ? kMayWrite : kMayRead, "xattr");
    default:
      return Status::NotSupported("xattr '" + name + "'");
  }
}

Status validate_layout(const pb::Layout& l, bool allow_zero) {
  const uint32_t ss = l.stripe_size();
  if (!(allow_zero && ss == 0) && (ss < kMinStripeSize || ss % kMinStripeSize != 0)) {
    return Status::InvalidArgument("stripe size " + std::to_string(ss) +
                                   " must be a multiple of 64 KiB");
  }
  if (!allow_zero && l.stripe_count() == 0) {
    return Status::InvalidArgument("stripe count must be at least 1");
  }
  if (l.stripe_count() > 4096) {
    return Status::InvalidArgument("stripe count " + std::to_string(l.stripe_count()) +
                                   " is too large");
  }
  return Status::OK();
}

// The redundancy a setstripe asks for, against the data servers there are.
Status validate_scheme(const pb::Layout& l, uint32_t targets) {
  switch (l.scheme()) {
    case pb::SCHEME_UNSET:
      return Status::OK();
    case pb::SCHEME_REPLICAS:
      if (l.replicas() < 1 || l.replicas() > targets) {
        return Status::InvalidArgument("replicas " + std::to_string(l.replicas()) +
                                       " must be 1.." + std::to_string(targets) +
                                       " (the data servers registered)");
      }
      return Status::OK();
    case pb::SCHEME_EC:
      if (l.ec_data() < 1 || l.ec_parity() < 1 || l.ec_data() + l.ec_parity() > targets) {
        return Status::InvalidArgument("ec " + std::to_string(l.ec_data()) + "+" +
                                       std::to_string(l.ec_parity()) +
                                       " needs K >= 1, M >= 1 and K + M <= " +
                                       std::to_string(targets) + " (the data servers registered)");
      }
      // The codec's own bound (common/ec/rs_codec.h): a wider group could
      // be placed but never encoded.
      if (uint64_t{l.ec_data()} + l.ec_parity() > ec::kMaxChunks) {
        return Status::InvalidArgument("ec " + std::to_string(l.ec_data()) + "+" +
                                       std::to_string(l.ec_parity()) + ": K + M must be at most " +
                                       std::to_string(ec::kMaxChunks) +
                                       " (the Reed-Solomon codec's group width)");
      }
      return Status::OK();
    default:
      return Status::InvalidArgument("unknown redundancy scheme " + std::to_string(l.scheme()));
  }
}

// A directory default keeps the size, the count and the scheme only.
pb::Layout dir_default_of(const pb::Layout& req) {
  pb::Layout l;
  l.set_stripe_size(req.stripe_size());
  l.set_stripe_count(req.stripe_count());
  if (req.scheme() != pb::SCHEME_UNSET) {
    l.set_scheme(req.scheme());
    if (req.scheme() == pb::SCHEME_EC) {
      l.set_ec_data(req.ec_data());
      l.set_ec_parity(req.ec_parity());
    } else {
      l.set_replicas(req.replicas());
    }
  }
  return l;
}
}  // namespace

Status Namespace::change_inode(uint64_t ino, const char* what, records::InodeRecord* rec,
                               const std::function<Status(KvBatch&, LockTable::Guard&)>& change) {
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    conflict_backoff(attempt);
    auto g = locks_.lock({ino});
    KvBatch b;
    SURGE_ASSIGN_OR_RETURN(*rec, load_existing(ino, what, &b));
    SURGE_RETURN_IF_ERROR(change(b, g));
    put_inode(b, *rec);
    Status st = commit_then_sync(b, g);
    if (!conflicted(st)) return st;
  }
  return Status::Busy(std::string(what) + ": " + ino_str(ino) + " keeps changing");
}

Status Namespace::setattr(const pb::SetAttrRequest& req, pb::EntryReply* out) {
  const auto& c = req.cred();
  const uint32_t v = req.valid();
  records::InodeRecord rec;
  auto change = [&](KvBatch& b, LockTable::Guard& g) -> Status {
    records::StoredAttr* a = rec.mutable_attr();
    const bool owner_or_root = is_owner_or_root(c, *a);
    const uint64_t now = now_ns();
    const std::string what = "setattr " + ino_str(req.ino());
    // Through a descriptor opened for writing: write permission was checked
    // at its open (ftruncate of an open(O_CREAT|O_RDWR, 0) file works).
    const bool open_for_write =
        req.open_session_id() != 0 && sessions_->holds_open(req.open_session_id(), req.ino());
    auto check_write = [&](const char* op) {
      return open_for_write ? Status::OK() : check_access(c, *a, kMayWrite, op);
    };

    // Checks first, all of them, then the changes: a refused request changes nothing.
    if ((v & pb::SETATTR_MODE) && !owner_or_root) {
      return Status::NotPermitted(what + ": chmod by uid " + std::to_string(c.uid()) +
                                  ", not owner");
    }
    if ((v & pb::SETATTR_UID) && c.uid() != 0 && !(c.uid() == a->uid() && req.uid() == a->uid())) {
      return Status::NotPermitted(what + ": chown needs uid 0");
    }
    if ((v & pb::SETATTR_GID) && c.uid() != 0 &&
        !(c.uid() == a->uid() && (req.gid() == a->gid() || in_group(c, req.gid())))) {
      return Status::NotPermitted(what + ": chgrp to gid " + std::to_string(req.gid()) +
                                  " needs ownership and membership");
    }
    if ((v & (pb::SETATTR_ATIME | pb::SETATTR_MTIME | pb::SETATTR_CTIME)) && !owner_or_root) {
      return Status::NotPermitted(what + ": setting times needs ownership");
    }
    if ((v & (pb::SETATTR_ATIME_NOW | pb::SETATTR_MTIME_NOW)) && !owner_or_root) {
      SURGE_RETURN_IF_ERROR(check_access(c, *a, kMayWrite, "utimes"));
    }
    if (v & pb::SETATTR_SIZE) {
      if (S_ISDIR(a->mode())) return err::IsDirectory(what + ": truncate of a directory");
      if (!S_ISREG(a->mode()))
        return Status::InvalidArgument(what + ": truncate of a special file");
      SURGE_RETURN_IF_ERROR(check_write("truncate"));
    }
    if ((v & pb::SETATTR_KILL_SUIDGID) && !owner_or_root) {
      SURGE_RETURN_IF_ERROR(check_write("clearing setuid/setgid"));
    }
    if (req.report_size()) {  // as report_size checks it
      if (!S_ISREG(a->mode())) {
        return Status::InvalidArgument(what + ": a size report for a file that is not regular");
      }
      if (!owner_or_root) SURGE_RETURN_IF_ERROR(check_access(c, *a, kMayWrite, "report size"));
    }

    if (req.report_size()) {  // first, as if reported just before this request
      if (req.report_end() > a->size()) a->set_size(req.report_end());
      a->set_mtime_ns(now);
    }
    if (v & pb::SETATTR_SIZE) {
      SURGE_RETURN_IF_ERROR(resize_locked(rec, req.size(), b, g));
      a->set_mtime_ns(now);
    }
    // Linux: a write or truncate by a process without CAP_FSETID (for
    // libsurge callers: any uid but 0) clears setuid, and setgid where it
    // means "group executable", so an altered program keeps no privilege.
    if (((v & pb::SETATTR_KILL_SUIDGID) || ((v & pb::SETATTR_SIZE) && c.uid() != 0)) &&
        !S_ISDIR(a->mode())) {
      a->set_mode(without_suidgid(a->mode()));
    }
    if (v & pb::SETATTR_MODE) {
      uint32_t mode = req.mode() & 07777;
      const uint32_t gid = (v & pb::SETATTR_GID) ? req.gid() : a->gid();
      if (c.uid() != 0 && !in_group(c, gid)) mode &= ~static_cast<uint32_t>(S_ISGID);
      a->set_mode((a->mode() & S_IFMT) | mode);
    }
    if ((v & (pb::SETATTR_UID | pb::SETATTR_GID)) && !S_ISDIR(a->mode())) {
      a->set_mode(without_suidgid(a->mode()));  // chown drops them too
    }
    if (v & pb::SETATTR_UID) a->set_uid(req.uid());
    if (v & pb::SETATTR_GID) a->set_gid(req.gid());
    if (v & pb::SETATTR_ATIME) a->set_atime_ns(req.atime_ns());
    if (v & pb::SETATTR_ATIME_NOW) a->set_atime_ns(now);
    if (v & pb::SETATTR_MTIME) a->set_mtime_ns(req.mtime_ns());
    if (v & pb::SETATTR_MTIME_NOW) a->set_mtime_ns(now);
    a->set_ctime_ns((v & pb::SETATTR_CTIME) ? req.ctime_ns() : now);
    return Status::OK();
  };
  SURGE_RETURN_IF_ERROR(change_inode(req.ino(), "setattr", &rec, change));
  if (v & pb::SETATTR_SIZE) settle_truncate(rec.attr(), req.open_session_id());
  to_wire(rec.attr(), out->mutable_attr());
  return Status::OK();
}

Status Namespace::report_size(const pb::ReportSizeRequest& req, pb::EntryReply* out) {
  records::InodeRecord rec;
  SURGE_RETURN_IF_ERROR(change_inode(req.ino(), "report size", &rec, [&](KvBatch& b) -> Status {
    records::StoredAttr* a = rec.mutable_attr();
    if (S_ISDIR(a->mode()))
      return err::IsDirectory("report size: " + ino_str(req.ino()) + " is a directory");
    if (!S_ISREG(a->mode()))
      return Status::InvalidArgument("report size: " + ino_str(req.ino()) +
                                     " is not a regular file");
    if (!is_owner_or_root(req.cred(), *a)) {
      SURGE_RETURN_IF_ERROR(check_access(req.cred(), *a, kMayWrite, "report size"));
    }
    const uint64_t now = now_ns();
    if (req.end() > a->size()) a->set_size(req.end());
    a->set_mtime_ns(req.mtime_ns() != 0 ? req.mtime_ns() : now);
    a->set_ctime_ns(now);
    return Status::OK();
  }));
  to_wire(rec.attr(), out->mutable_attr());
  return Status::OK();
}

Status Namespace::setxattr(const pb::SetXattrRequest& req) {
  SURGE_RETURN_IF_ERROR(validate_xattr_name(req.name()));
  if (req.value().size() > kXattrValueMax) {
    return err::TooBig("xattr '" + req.name() + "': value of " +
                       std::to_string(req.value().size()) + " bytes exceeds 64 KiB");
  }
  if ((req.flags() & ~(kXattrCreate | kXattrReplace)) != 0) {
    return Status::InvalidArgument("setxattr: unknown flags " + std::to_string(req.flags()));
  }
  records::InodeRecord rec;
  return change_inode(req.ino(), "setxattr", &rec, [&](KvBatch& b) -> Status {
    SURGE_RETURN_IF_ERROR(check_xattr_access(req.cred(), rec.attr(), req.name(), true));
    const std::string key = keys::xattr(req.ino(), req.name());
    SURGE_ASSIGN_OR_RETURN(auto old, kv_->get(Space::kXattrs, key));
    b.check(Space::kXattrs, key, old);  // create/replace decided on it
    if ((req.flags() & kXattrCreate) && old) {
      return Status::AlreadyExists("xattr '" + req.name() + "' of " + ino_str(req.ino()) +
                                   " exists");
    }
    if ((req.flags() & kXattrReplace) && !old) {
      return err::NoData("xattr '" + req.name() + "' of " + ino_str(req.ino()) + " does not exist");
    }
    if (!old) {
      // The list of names must stay within what listxattr can return.
      size_t total = req.name().size() + 1;
      SURGE_RETURN_IF_ERROR(kv_->scan(Space::kXattrs, keys::xattr(req.ino(), ""),
                                      keys::xattr_end(req.ino()),
                                      [&](std::string_view k, std::string_view) {
                                        total += k.size() - 8 + 1;
                                        return true;
                                      }));
      if (total > kXattrListMax) {
        return Status::NoSpace("xattr '" + req.name() + "': " + ino_str(req.ino()) +
                               " has no room for more xattr names");
      }
    }
    rec.mutable_attr()->set_ctime_ns(now_ns());
    b.put(Space::kXattrs, key, req.value());
    return Status::OK();
  });
}

Status Namespace::getxattr(const pb::GetXattrRequest& req, pb::GetXattrReply* out) {
  SURGE_RETURN_IF_ERROR(validate_xattr_name(req.name()));
  SURGE_ASSIGN_OR_RETURN(auto rec, load_existing(req.ino(), "getxattr"));
  SURGE_RETURN_IF_ERROR(check_xattr_access(req.cred(), rec.attr(), req.name(), false));
  SURGE_ASSIGN_OR_RETURN(auto v, kv_->get(Space::kXattrs, keys::xattr(req.ino(), req.name())));
  if (!v) return err::NoData("xattr '" + req.name() + "' of " + ino_str(req.ino()));
  out->set_size(static_cast<uint32_t>(v->size()));
  if (req.size() == 0) return Status::OK();
  if (req.size() < v->size()) {
    return Status::OutOfRange("xattr '" + req.name() + "' of " + ino_str(req.ino()) + " has " +
                              std::to_string(v->size()) + " bytes, buffer holds " +
                              std::to_string(req.size()));
  }
  out->set_value(std::move(*v));
  return Status::OK();
}

Status Namespace::listxattr(const pb::ListXattrRequest& req, pb::ListXattrReply* out) {
  SURGE_ASSIGN_OR_RETURN(auto rec, load_existing(req.ino(), "listxattr"));
  std::vector<std::string> names;
  size_t total = 0;
  SURGE_RETURN_IF_ERROR(kv_->scan(Space::kXattrs, keys::xattr(req.ino(), ""),
                                  keys::xattr_end(req.ino()),
                                  [&](std::string_view k, std::string_view) {
                                    std::string n(k.substr(8));
                                    if (xattr_ns(n) == XattrNs::kTrusted && req.cred().uid() != 0) {
                                      return true;  // hidden from non-root, as Linux does
                                    }
                                    total += n.size() + 1;
                                    names.push_back(std::move(n));
                                    return true;
                                  }));
  out->set_size(static_cast<uint32_t>(total));
  if (req.size() == 0) return Status::OK();
  if (req.size() < total) {
    return Status::OutOfRange("xattr list of " + ino_str(req.ino()) + " has " +
                              std::to_string(total) + " bytes, buffer holds " +
                              std::to_string(req.size()));
  }
  for (auto& n : names) out->add_names(std::move(n));
  return Status::OK();
}

Status Namespace::removexattr(const pb::RemoveXattrRequest& req) {
  SURGE_RETURN_IF_ERROR(validate_xattr_name(req.name()));
  records::InodeRecord rec;
  return change_inode(req.ino(), "removexattr", &rec, [&](KvBatch& b) -> Status {
    SURGE_RETURN_IF_ERROR(check_xattr_access(req.cred(), rec.attr(), req.name(), true));
    const std::string key = keys::xattr(req.ino(), req.name());
    SURGE_ASSIGN_OR_RETURN(auto old, kv_->get(Space::kXattrs, key));
    b.check(Space::kXattrs, key, old);  // ENODATA decided on it
    if (!old) return err::NoData("xattr '" + req.name() + "' of " + ino_str(req.ino()));
    rec.mutable_attr()->set_ctime_ns(now_ns());
    b.del(Space::kXattrs, key);
    return Status::OK();
  });
}

Status Namespace::set_layout(const pb::SetLayoutRequest& req, pb::SetLayoutReply* out) {
  records::InodeRecord rec;
  auto change = [&](KvBatch& b, LockTable::Guard& g) -> Status {
    const std::string what = "setstripe on " + ino_str(req.ino());
    if (!is_owner_or_root(req.cred(), rec.attr())) {
      return Status::NotPermitted(what + ": only the owner or root may change a layout");
    }
    SURGE_RETURN_IF_ERROR_CTX(validate_scheme(req.layout(), map_->target_count()), what);
    if (S_ISDIR(rec.attr().mode())) {
      SURGE_RETURN_IF_ERROR_CTX(validate_layout(req.layout(), true), what);
      pb::Layout l = dir_default_of(req.layout());
      *rec.mutable_default_layout() = to_stored(l);
      *out->mutable_layout() = l;
    } else if (S_ISREG(rec.attr().mode())) {
      SURGE_RETURN_IF_ERROR_CTX(validate_layout(req.layout(), false), what);
      if (rec.attr().size() != 0) {
        return Status::Busy(what + ": the file holds " + std::to_string(rec.attr().size()) +
                            " bytes; layouts change only on empty files");
      }
      SURGE_ASSIGN_OR_RETURN(pb::Layout l, place(dir_default_of(req.layout()), req.ino()));
      // Chunks of the old layout may exist (a file written, then truncated
      // to 0): they go through an intent (namespace_truncate.cpp).
      SURGE_RETURN_IF_ERROR_CTX(relayout_locked(rec, to_stored(l), b, g), what);
      *out->mutable_layout() = l;
    } else {
      return Status::InvalidArgument(what + ": not a file or directory");
    }
    rec.mutable_attr()->set_ctime_ns(now_ns());
    return Status::OK();
  };
  return change_inode(req.ino(), "setstripe", &rec, change);
}

Status Namespace::get_layout(const pb::GetLayoutRequest& req, pb::GetLayoutReply* out) {
  SURGE_ASSIGN_OR_RETURN(auto rec, load_existing(req.ino(), "getstripe"));
  if (S_ISREG(rec.attr().mode())) {
    to_wire(rec.attr().layout(), out->mutable_layout());
    for (auto& c : map_->chains_named(out->layout())) *out->add_chains() = std::move(c);
    return Status::OK();
  }
  if (!S_ISDIR(rec.attr().mode())) {
    return Status::InvalidArgument("getstripe: " + ino_str(req.ino()) +
                                   " is not a file or directory");
  }
  SURGE_ASSIGN_OR_RETURN(auto l, effective_dir_layout(rec));
  *out->mutable_layout() = l;
  out->set_inherited(!rec.has_default_layout());
  return Status::OK();
}

}  // namespace surge::mds
