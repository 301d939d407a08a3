// Namespace: formatting, lookups, and the operations that add or remove
// directory entries (create, mknod, mkdir, symlink, link, unlink, rmdir),
// readdir, statfs, open/close and the orphan list. Rename lives in
// namespace_rename.cpp, attribute/xattr/layout changes in
// namespace_attrs.cpp. See namespace.h for the invariants.
#include "mds/namespace/namespace.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <chrono>
#include <random>

#include "common/log.h"
#include "mds/namespace/errors.h"
#include "mds/namespace/op_limits.h"
#include "mds/namespace/permissions.h"
#include "mds/namespace/record_wire.h"
#include "mds/namespace/store_format.h"
#include "net/proto/mds_methods.h"

namespace surge::mds {

namespace {
constexpr uint32_t kMaxLinks = 65000;
std::string entry_str(uint64_t parent, const std::string& name) {
  return "'" + name + "' in directory " + std::to_string(parent);
}
}  // namespace

uint64_t Namespace::now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

Status Namespace::validate_name(const std::string& name) {
  if (name.size() > 255) {
    return err::NameTooLong("name of " + std::to_string(name.size()) + " bytes is longer than 255");
  }
  if (name.empty()) return Status::InvalidArgument("empty name");
  if (name == "." || name == "..")
    return Status::InvalidArgument("name '" + name + "' is reserved");
  if (name.find('/') != std::string::npos) {
    return Status::InvalidArgument("name '" + name + "' contains '/'");
  }
  if (name.find('\0') != std::string::npos) {
    return Status::InvalidArgument("name contains a NUL byte");
  }
  return Status::OK();
}

Result<uint64_t> Namespace::FormatOrLoad(KvStore* kv, uint64_t expect_fs_id) {
  // The id first: a format writes both in one batch, so a marker read
  // after the id is absent but present means another process formatted the
  // store in between (two MDS starting on one empty etcd prefix); read the
  // id again rather than call the store damaged.
  SURGE_ASSIGN_OR_RETURN(auto fsid, kv->get(Space::kSystem, keys::kFsId));
  SURGE_ASSIGN_OR_RETURN(auto format, kv->get(Space::kSystem, keys::kFormat));
  if (format && !fsid) {
    SURGE_ASSIGN_OR_RETURN(fsid, kv->get(Space::kSystem, keys::kFsId));
  }
  if (!format && !fsid) {
    bool has_inodes = false;
    SURGE_RETURN_IF_ERROR(kv->scan(Space::kInodes, "", "", [&](std::string_view, std::string_view) {
      has_inodes = true;
      return false;
    }));
    if (has_inodes) {
      // Formatted by another process between the reads above and the scan
      // (two MDS starting on one empty etcd prefix): its id is there now.
      SURGE_ASSIGN_OR_RETURN(auto since, kv->get(Space::kSystem, keys::kFsId));
      if (since) return FormatOrLoad(kv, expect_fs_id);
      return Status::Corruption(
          "metadata store holds inodes but no file system id: not formatted "
          "by surge-mds, or damaged");
    }
    uint64_t id = expect_fs_id;
    std::random_device rd;
    while (id == 0) id = (static_cast<uint64_t>(rd()) << 32) | rd();
    records::InodeRecord root;
    auto* a = root.mutable_attr();
    const uint64_t now = now_ns();
    a->set_ino(proto::mds::kRootIno);
    a->set_mode(S_IFDIR | 0755);
    a->set_nlink(2);
    a->set_atime_ns(now);
    a->set_mtime_ns(now);
    a->set_ctime_ns(now);
    a->set_generation(1);
    root.set_parent(proto::mds::kRootIno);
    root.set_format_version(kRecordFormatVersion);
    // Checked absent: of two processes formatting one empty store at once
    // (two MDS on one etcd prefix), one formats and the other loads its file
    // system instead of writing a second id over it.
    KvBatch b;
    b.check(Space::kSystem, std::string(keys::kFormat), std::nullopt);
    b.check(Space::kSystem, std::string(keys::kFsId), std::nullopt);
    b.put(Space::kSystem, std::string(keys::kFormat), std::string(kStoreFormat));
    std::string v;
    keys::put_be64(v, id);
    b.put(Space::kSystem, std::string(keys::kFsId), v);
    std::string h;
    keys::put_be64(h, proto::mds::kRootIno + 1);
    b.put(Space::kSystem, std::string(keys::kInoHwm), h);
    b.put(Space::kInodes, keys::inode(proto::mds::kRootIno), root.SerializeAsString());
    b.count(Space::kInodes, 1);
    Status st = kv->commit(b);
    if (st.code() == Code::kBusy) {  // formatted by another process since our read: load it
      SURGE_ASSIGN_OR_RETURN(auto now_there, kv->get(Space::kSystem, keys::kFsId));
      if (!now_there) return Status::Busy("formatting the metadata store: " + st.message());
      return FormatOrLoad(kv, expect_fs_id);
    }
    SURGE_RETURN_IF_ERROR_CTX(st, "formatting the metadata store");
    SLOG_INFO("formatted a new file system, id {:016x}", id);
    return id;
  }
  if (!format || !fsid || fsid->size() != 8) {
    return Status::Corruption("metadata store is damaged: file system id or format marker missing");
  }
  SURGE_RETURN_IF_ERROR(migrate_store(kv, *format));
  const uint64_t id = keys::get_be64(*fsid);
  if (expect_fs_id != 0 && id != expect_fs_id) {
    char buf[128];
    snprintf(buf, sizeof buf, "metadata store belongs to file system %016llx, expected %016llx",
             static_cast<unsigned long long>(id), static_cast<unsigned long long>(expect_fs_id));
    return Status::InvalidArgument(buf);
  }
  SURGE_ASSIGN_OR_RETURN(auto root, kv->get(Space::kInodes, keys::inode(proto::mds::kRootIno)));
  if (!root) return Status::Corruption("metadata store is damaged: the root inode is missing");
  return id;
}

Result<std::unique_ptr<Namespace>> Namespace::Open(KvStore* kv, ClusterMap* map,
                                                   SessionTable* sessions, ObjectTargets* objects,
                                                   NamespaceOptions options) {
  SURGE_ASSIGN_OR_RETURN(uint64_t id, FormatOrLoad(kv, 0));
  std::unique_ptr<Namespace> ns(new Namespace(kv, map, sessions, objects, options));
  ns->fs_id_ = id;
  SURGE_ASSIGN_OR_RETURN(auto hwm, kv->get(Space::kSystem, keys::kInoHwm));
  if (!hwm || hwm->size() != 8) return Status::Corruption("metadata store lacks its inode counter");
  // Nothing reserved yet: the first number claims a block (alloc_ino).
  return ns;
}

Result<uint64_t> Namespace::alloc_ino() {
  std::lock_guard lk(ino_mu_);
  if (next_ino_ >= ino_hwm_) {
    SURGE_RETURN_IF_ERROR(claim_inode_block());
  }
  return next_ino_++;
}

// Reserves a block durably before handing out any number of it, so a
// restart never reuses one. The claim is a compare-and-swap of the stored
// high-water mark, not a put of what this process last wrote: processes
// sharing one store (several MDS on etcd) each claim from what the store
// holds, and one whose read another claim overtook reads again.
Status Namespace::claim_inode_block() {
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    SURGE_ASSIGN_OR_RETURN(auto cur, kv_->get(Space::kSystem, keys::kInoHwm));
    if (!cur || cur->size() != 8) {
      return Status::Corruption("metadata store lacks its inode counter");
    }
    const uint64_t from = keys::get_be64(*cur);
    std::string next;
    keys::put_be64(next, from + opts_.inode_batch);
    KvBatch b;
    b.check(Space::kSystem, std::string(keys::kInoHwm), *cur);
    b.put(Space::kSystem, std::string(keys::kInoHwm), next);
    Status st = kv_->commit(b);
    if (st.code() == Code::kBusy) continue;  // another process claimed since our read
    SURGE_RETURN_IF_ERROR_CTX(st, "reserving inode numbers");
    next_ino_ = from;
    ino_hwm_ = from + opts_.inode_batch;
    return Status::OK();
  }
  return Status::Busy("reserving inode numbers: the counter kept changing");
}

Result<bool> Namespace::load(uint64_t ino, records::InodeRecord* out, KvBatch* reads) {
  std::string key = keys::inode(ino);
  SURGE_ASSIGN_OR_RETURN(auto v, kv_->get(Space::kInodes, key));
  if (reads != nullptr) reads->check(Space::kInodes, std::move(key), v);
  if (!v) return false;
  if (!out->ParseFromString(*v)) {
    return Status::Corruption(ino_str(ino) + " has an unreadable record");
  }
  return true;
}

Result<records::InodeRecord> Namespace::load_existing(uint64_t ino, const char* what,
                                                      KvBatch* reads) {
  if (ino == 0) return Status::InvalidArgument(std::string(what) + ": inode 0 does not exist");
  records::InodeRecord r;
  SURGE_ASSIGN_OR_RETURN(bool found, load(ino, &r, reads));
  if (!found) return Status::NotFound(std::string(what) + ": no " + ino_str(ino));
  return r;
}

Result<records::InodeRecord> Namespace::load_dir(uint64_t ino, const char* what, KvBatch* reads) {
  SURGE_ASSIGN_OR_RETURN(auto r, load_existing(ino, what, reads));
  if (!S_ISDIR(r.attr().mode())) {
    return err::NotDirectory(std::string(what) + ": " + ino_str(ino) + " is not a directory");
  }
  return r;
}

Result<std::optional<keys::DentryValue>> Namespace::find(uint64_t parent, const std::string& name,
                                                         KvBatch* reads) {
  std::string key = keys::dentry(parent, name);
  SURGE_ASSIGN_OR_RETURN(auto v, kv_->get(Space::kDentries, key));
  if (reads != nullptr) reads->check(Space::kDentries, std::move(key), v);
  if (!v) return std::optional<keys::DentryValue>();
  keys::DentryValue d;
  if (!keys::decode_dentry(*v, &d)) {
    return Status::Corruption("unreadable entry " + entry_str(parent, name));
  }
  return std::optional<keys::DentryValue>(d);
}

void Namespace::put_inode(KvBatch& b, records::InodeRecord& r) {
  r.set_format_version(kRecordFormatVersion);
  r.set_change(r.change() + 1);
  b.put(Space::kInodes, keys::inode(r.attr().ino()), r.SerializeAsString());
}

Result<bool> Namespace::dir_empty(uint64_t ino) {
  bool empty = true;
  SURGE_RETURN_IF_ERROR(kv_->scan(Space::kDentries, keys::dentry_from(ino, 0),
                                  keys::dentry_end(ino), [&](std::string_view, std::string_view) {
                                    empty = false;
                                    return false;
                                  }));
  return empty;
}

Status Namespace::delete_xattrs(KvBatch& b, uint64_t ino) {
  return kv_->scan(Space::kXattrs, keys::xattr(ino, ""), keys::xattr_end(ino),
                   [&](std::string_view k, std::string_view) {
                     b.del(Space::kXattrs, std::string(k));
                     return true;
                   });
}

Status Namespace::commit_then_sync(KvBatch& b, LockTable::Guard& g) {
  SURGE_RETURN_IF_ERROR(kv_->commit(b, /*durable=*/false));
  g.release();
  return kv_->make_durable();
}

Result<pb::Layout> Namespace::effective_dir_layout(const records::InodeRecord& dir) {
  pb::Layout l;
  l.set_stripe_size(opts_.default_stripe_size);
  l.set_stripe_count(opts_.default_stripe_count);
  if (opts_.default_replicas != 0) {
    l.set_scheme(pb::SCHEME_REPLICAS);
    l.set_replicas(opts_.default_replicas);
  }
  // New directories copy their parent's default, so the nearest directory
  // that has one is the answer; walk up for directories made before it was set.
  records::InodeRecord cur = dir;
  for (int depth = 0; depth < 4096; ++depth) {
    if (cur.has_default_layout()) {
      if (cur.default_layout().stripe_size() != 0) {
        l.set_stripe_size(cur.default_layout().stripe_size());
      }
      if (cur.default_layout().stripe_count() != 0) {
        l.set_stripe_count(cur.default_layout().stripe_count());
      }
      if (cur.default_layout().scheme() != 0) {
        l.set_scheme(static_cast<pb::RedundancyScheme>(cur.default_layout().scheme()));
        l.set_replicas(cur.default_layout().replicas());
        l.set_ec_data(cur.default_layout().ec_data());
        l.set_ec_parity(cur.default_layout().ec_parity());
      }
      return l;
    }
    if (cur.attr().ino() == proto::mds::kRootIno) return l;
    records::InodeRecord p;
    SURGE_ASSIGN_OR_RETURN(bool found, load(cur.parent(), &p));
    if (!found) return l;
    cur = std::move(p);
  }
  return l;
}

Result<pb::Layout> Namespace::place(const pb::Layout& want, uint64_t ino) {
  if (want.scheme() == pb::SCHEME_UNSET) {
    return map_->pick_layout(want.stripe_size(), want.stripe_count());
  }
  ChainShape shape;
  shape.scheme = want.scheme();
  shape.replicas = want.replicas();
  shape.ec_data = want.ec_data();
  shape.ec_parity = want.ec_parity();
  if (shape.scheme == pb::SCHEME_REPLICAS) {
    // Fewer data servers than copies wanted: as many copies as there are
    // servers (setstripe refuses more than that, so only the default
    // meets this).
    const uint32_t targets = map_->target_count();
    if (targets != 0 && shape.replicas > targets) {
      SLOG_WARN("new file {}: {} replicas wanted, {} data servers registered: {} replicas", ino,
                shape.replicas, targets, targets);
      shape.replicas = targets;
    }
  }
  return map_->pick_chain_layout(want.stripe_size(), want.stripe_count(), shape);
}

Status Namespace::add_child_locked(const pb::Credentials& cred, records::InodeRecord& parent,
                                   const std::string& name, uint32_t mode, uint64_t rdev,
                                   const std::string& symlink, uint64_t op_id, uint64_t session_id,
                                   KvBatch& b, records::InodeRecord* child) {
  const uint32_t type = mode & S_IFMT;
  records::StoredAttr* pa = parent.mutable_attr();
  SURGE_ASSIGN_OR_RETURN(uint64_t ino, alloc_ino());
  const uint64_t now = now_ns();
  child->Clear();
  records::StoredAttr* a = child->mutable_attr();
  a->set_ino(ino);
  uint32_t perm = mode & 07777;
  uint32_t gid = cred.gid();
  if (pa->mode() & S_ISGID) {
    // BSD group semantics of a setgid directory; subdirectories inherit it.
    gid = pa->gid();
    if (type == S_IFDIR) perm |= S_ISGID;
  }
  a->set_mode(type | perm);
  a->set_uid(cred.uid());
  a->set_gid(gid);
  a->set_nlink(type == S_IFDIR ? 2 : 1);
  a->set_atime_ns(now);
  a->set_mtime_ns(now);
  a->set_ctime_ns(now);
  a->set_rdev(type == S_IFCHR || type == S_IFBLK ? rdev : 0);
  a->set_generation(1);
  if (op_id != 0) child->set_creator_op(op_id);
  if (type == S_IFREG) {
    SURGE_ASSIGN_OR_RETURN(pb::Layout want, effective_dir_layout(parent));
    SURGE_ASSIGN_OR_RETURN(pb::Layout l, place(want, ino));
    *a->mutable_layout() = to_stored(l);
  } else if (type == S_IFDIR) {
    child->set_parent(pa->ino());
    if (parent.has_default_layout()) *child->mutable_default_layout() = parent.default_layout();
    dir_lease::grant(*child, session_id, dir_lease::now_ms(), opts_.dir_lease_ms);
    pa->set_nlink(pa->nlink() + 1);
  } else if (type == S_IFLNK) {
    child->set_symlink(symlink);
    a->set_size(symlink.size());
  }
  pa->set_mtime_ns(now);
  pa->set_ctime_ns(now);
  // Checked absent: the caller's find put that check into b too.
  const std::string dkey = keys::dentry(pa->ino(), name);
  b.check(Space::kDentries, dkey, std::nullopt);
  b.put(Space::kDentries, dkey, keys::encode_dentry({ino, type}));
  put_inode(b, *child);
  b.count(Space::kInodes, 1);  // a new number: absent until now
  put_inode(b, parent);
  return Status::OK();
}

Status Namespace::wait_out_lease(records::InodeRecord& dir, const dir_lease::AddVerdict& v,
                                 KvBatch& b, LockTable::Guard& g) {
  if (v.store_first) {
    put_inode(b, dir);
    Status st = kv_->commit(b, false);
    if (!st.ok() && !conflicted(st)) {
      return st.WithContext("recalling the lease on " + ino_str(dir.attr().ino()));
    }
  }
  g.release();
  dir_lease::wait_until(v.wait_until_ms);
  return Status::OK();
}

Result<std::optional<records::InodeRecord>> Namespace::made_by(uint64_t op_id, uint64_t ino) {
  if (op_id == 0) return std::optional<records::InodeRecord>();
  SURGE_ASSIGN_OR_RETURN(auto rec, load_existing(ino, "create"));
  if (rec.creator_op() != op_id) return std::optional<records::InodeRecord>();
  return std::optional<records::InodeRecord>(std::move(rec));
}

Status Namespace::make_node(const pb::Credentials& cred, uint64_t parent, const std::string& name,
                            uint32_t mode, uint64_t rdev, const std::string& symlink,
                            uint64_t op_id, uint64_t session_id, pb::EntryReply* out) {
  SURGE_RETURN_IF_ERROR(validate_name(name));
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    conflict_backoff(attempt);
    auto g = locks_.lock({parent});
    KvBatch b;
    SURGE_ASSIGN_OR_RETURN(auto p, load_dir(parent, "create", &b));
    SURGE_RETURN_IF_ERROR(check_access(cred, p.attr(), kMayWrite | kMayExec, "create"));
    SURGE_ASSIGN_OR_RETURN(auto existing, find(parent, name, &b));
    if (existing) {
      SURGE_ASSIGN_OR_RETURN(auto mine, made_by(op_id, existing->child));
      if (!mine) return Status::AlreadyExists(entry_str(parent, name) + " exists");
      to_wire(mine->attr(), out->mutable_attr());  // a resend: answer as the first time
      out->set_created(true);
      return Status::OK();
    }
    const dir_lease::AddVerdict lease =
        dir_lease::before_add(p, session_id, dir_lease::now_ms(), opts_.dir_lease_ms);
    if (lease.wait_until_ms != 0) {
      SURGE_RETURN_IF_ERROR(wait_out_lease(p, lease, b, g));
      continue;
    }
    records::InodeRecord child;
    SURGE_RETURN_IF_ERROR(
        add_child_locked(cred, p, name, mode, rdev, symlink, op_id, session_id, b, &child));
    Status st = commit_then_sync(b, g);
    if (conflicted(st)) continue;
    SURGE_RETURN_IF_ERROR(st);
    to_wire(child.attr(), out->mutable_attr());
    to_wire(p.attr(), out->mutable_parent_attr());
    out->set_created(true);
    out->set_parent_lease_ms(lease.lease_ms);
    if (child.has_lease()) out->set_lease_ms(opts_.dir_lease_ms);
    return Status::OK();
  }
  return Status::Busy("create: " + entry_str(parent, name) + " keeps changing");
}

Status Namespace::open_existing_locked(const pb::Credentials& cred, records::InodeRecord& rec,
                                       uint32_t flags, uint64_t session_id, LockTable::Guard& g,
                                       KvBatch& b) {
  const records::StoredAttr& a = rec.attr();
  const uint32_t acc = flags & O_ACCMODE;
  const bool write = acc == O_WRONLY || acc == O_RDWR || (flags & O_TRUNC);
  uint32_t mask = 0;
  if (acc == O_RDONLY || acc == O_RDWR) mask |= kMayRead;
  if (write) mask |= kMayWrite;
  if (S_ISDIR(a.mode()) && write) {
    return err::IsDirectory("open for writing: " + ino_str(a.ino()) + " is a directory");
  }
  if (S_ISLNK(a.mode())) {
    return Status(Code::kLoop, "open: " + ino_str(a.ino()) + " is a symlink");
  }
  SURGE_RETURN_IF_ERROR(check_access(cred, a, mask, "open"));
  if ((flags & O_TRUNC) && S_ISREG(a.mode())) {
    // b checks the record as read, so a change while a data server was
    // called with the inode unlocked fails the commit and the caller tries
    // again.
    SURGE_RETURN_IF_ERROR(resize_locked(rec, 0, b, g));
    const uint64_t now = now_ns();
    // As a truncate by a process without CAP_FSETID (namespace_attrs.cpp).
    if (cred.uid() != 0) rec.mutable_attr()->set_mode(without_suidgid(a.mode()));
    rec.mutable_attr()->set_mtime_ns(now);
    rec.mutable_attr()->set_ctime_ns(now);
    put_inode(b, rec);
    SURGE_RETURN_IF_ERROR(kv_->commit(b, false));  // Busy: changed since read, the caller retries
  }
  if (session_id != 0) SURGE_RETURN_IF_ERROR(sessions_->add_open(session_id, a.ino()));
  if (write && session_id != 0 && sessions_->survives_restart() && a.has_layout()) {
    // A truncate through another MDS may have committed after our read
    // and judged the file's opens before ours was stored: our writes must
    // then carry its generation (namespace_truncate.cpp).
    records::InodeRecord now;
    SURGE_ASSIGN_OR_RETURN(bool found, load(a.ino(), &now));
    if (found && now.attr().truncate_seq() != rec.attr().truncate_seq()) rec = std::move(now);
  }
  g.release();
  if (!(flags & O_TRUNC)) return Status::OK();
  SURGE_RETURN_IF_ERROR(kv_->make_durable());
  if (S_ISREG(rec.attr().mode())) settle_truncate(rec.attr(), session_id);
  return Status::OK();
}

Status Namespace::create(const pb::CreateRequest& req, pb::EntryReply* out) {
  SURGE_RETURN_IF_ERROR(validate_name(req.name()));
  const auto& cred = req.cred();
  // An unknown session fails the request before anything is created.
  if (req.session_id() != 0) SURGE_RETURN_IF_ERROR(sessions_->heartbeat(req.session_id()));
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    conflict_backoff(attempt);
    auto g = locks_.lock({req.parent()});
    KvBatch b;
    SURGE_ASSIGN_OR_RETURN(auto p, load_dir(req.parent(), "create", &b));
    SURGE_RETURN_IF_ERROR(check_access(cred, p.attr(), kMayExec, "create"));
    SURGE_ASSIGN_OR_RETURN(auto existing, find(req.parent(), req.name(), &b));
    if (existing) {
      SURGE_ASSIGN_OR_RETURN(auto mine, made_by(req.op_id(), existing->child));
      if (mine) {  // a resend of this create: answer as the first time
        if (req.session_id() != 0 && !sessions_->holds_open(req.session_id(), existing->child)) {
          (void)sessions_->add_open(req.session_id(), existing->child);
        }
        to_wire(mine->attr(), out->mutable_attr());
        out->set_created(true);
        return Status::OK();
      }
      if (req.exclusive()) {
        return Status::AlreadyExists(entry_str(req.parent(), req.name()) + " exists");
      }
      if (S_ISDIR(existing->type)) {
        return err::IsDirectory(entry_str(req.parent(), req.name()) + " is a directory");
      }
      // Opening the existing file needs its lock too; parent-then-child is
      // not stripe order, so take the pair again in order and re-check.
      g.release();
      auto g2 = locks_.lock({req.parent(), existing->child});
      SURGE_ASSIGN_OR_RETURN(auto again, find(req.parent(), req.name()));
      if (!again || again->child != existing->child) continue;
      KvBatch ob;
      SURGE_ASSIGN_OR_RETURN(auto rec, load_existing(existing->child, "create", &ob));
      Status st = open_existing_locked(cred, rec, req.flags(), req.session_id(), g2, ob);
      if (conflicted(st)) continue;
      SURGE_RETURN_IF_ERROR(st);
      to_wire(rec.attr(), out->mutable_attr());
      out->set_created(false);
      return Status::OK();
    }
    SURGE_RETURN_IF_ERROR(check_access(cred, p.attr(), kMayWrite | kMayExec, "create"));
    const dir_lease::AddVerdict lease =
        dir_lease::before_add(p, req.session_id(), dir_lease::now_ms(), opts_.dir_lease_ms);
    if (lease.wait_until_ms != 0) {
      SURGE_RETURN_IF_ERROR(wait_out_lease(p, lease, b, g));
      continue;
    }
    records::InodeRecord child;
    SURGE_RETURN_IF_ERROR(add_child_locked(cred, p, req.name(), S_IFREG | (req.mode() & 07777), 0,
                                           "", req.op_id(), req.session_id(), b, &child));
    // The open is recorded in the create's own commit: an unlink of the new
    // name must see it open, and a create costs one store round trip.
    if (req.session_id() != 0) sessions_->add_open_to(b, req.session_id(), child.attr().ino());
    Status st = kv_->commit(b, false);
    if (conflicted(st)) continue;
    SURGE_RETURN_IF_ERROR(st);
    if (req.session_id() != 0) sessions_->opened(req.session_id(), child.attr().ino());
    g.release();
    SURGE_RETURN_IF_ERROR(kv_->make_durable());
    to_wire(child.attr(), out->mutable_attr());
    to_wire(p.attr(), out->mutable_parent_attr());
    out->set_created(true);
    out->set_parent_lease_ms(lease.lease_ms);
    return Status::OK();
  }
  return Status::Busy("create: " + entry_str(req.parent(), req.name()) + " keeps changing");
}

Status Namespace::mknod(const pb::MknodRequest& req, pb::EntryReply* out) {
  uint32_t mode = req.mode();
  switch (mode & S_IFMT) {
    case 0:
      mode |= S_IFREG;
      break;
    case S_IFREG:
    case S_IFIFO:
    case S_IFSOCK:
      break;
    case S_IFCHR:
    case S_IFBLK:
      if (req.cred().uid() != 0) {
        return Status::NotPermitted("mknod: device nodes need uid 0, caller has uid " +
                                    std::to_string(req.cred().uid()));
      }
      break;
    case S_IFDIR:
      return Status::NotPermitted("mknod: use mkdir for directories");
    default:
      return Status::InvalidArgument("mknod: bad file type in mode " + std::to_string(mode));
  }
  return make_node(req.cred(), req.parent(), req.name(), mode, req.rdev(), "", req.op_id(),
                   req.session_id(), out);
}

Status Namespace::mkdir(const pb::MkdirRequest& req, pb::EntryReply* out) {
  return make_node(req.cred(), req.parent(), req.name(), S_IFDIR | (req.mode() & 07777), 0, "",
                   req.op_id(), req.session_id(), out);
}

Status Namespace::symlink(const pb::SymlinkRequest& req, pb::EntryReply* out) {
  if (req.target().empty()) return Status::NotFound("symlink: empty target");
  if (req.target().size() >= 4096) {
    return err::NameTooLong("symlink: target of " + std::to_string(req.target().size()) +
                            " bytes is longer than 4095");
  }
  if (req.target().find('\0') != std::string::npos) {
    return Status::InvalidArgument("symlink: target contains a NUL byte");
  }
  return make_node(req.cred(), req.parent(), req.name(), S_IFLNK | 0777, 0, req.target(),
                   req.op_id(), req.session_id(), out);
}

Status Namespace::lookup(const pb::LookupRequest& req, pb::EntryReply* out) {
  SURGE_RETURN_IF_ERROR(validate_name(req.name()));
  SURGE_ASSIGN_OR_RETURN(auto p, load_dir(req.parent(), "lookup"));
  SURGE_RETURN_IF_ERROR(check_access(req.cred(), p.attr(), kMayExec, "lookup"));
  SURGE_ASSIGN_OR_RETURN(auto d, find(req.parent(), req.name()));
  if (!d) return Status::NotFound("lookup: no " + entry_str(req.parent(), req.name()));
  records::InodeRecord c;
  SURGE_ASSIGN_OR_RETURN(bool found, load(d->child, &c));
  // Removed between the two reads: as if the lookup came after.
  if (!found) return Status::NotFound("lookup: no " + entry_str(req.parent(), req.name()));
  to_wire(c.attr(), out->mutable_attr());
  return Status::OK();
}

Status Namespace::getattr(const pb::GetAttrRequest& req, pb::EntryReply* out) {
  SURGE_ASSIGN_OR_RETURN(auto r, load_existing(req.ino(), "getattr"));
  to_wire(r.attr(), out->mutable_attr());
  return Status::OK();
}

Status Namespace::access(const pb::AccessRequest& req) {
  SURGE_ASSIGN_OR_RETURN(auto r, load_existing(req.ino(), "access"));
  return check_access(req.cred(), r.attr(), req.mask(), "access");
}

Status Namespace::readlink(const pb::ReadlinkRequest& req, pb::ReadlinkReply* out) {
  SURGE_ASSIGN_OR_RETURN(auto r, load_existing(req.ino(), "readlink"));
  if (!S_ISLNK(r.attr().mode())) {
    return Status::InvalidArgument("readlink: " + ino_str(req.ino()) + " is not a symlink");
  }
  out->set_target(r.symlink());
  return Status::OK();
}

Status Namespace::unlink(const pb::UnlinkRequest& req, pb::UnlinkReply* out) {
  return settle_resend(req.op_id(), unlink_unsettled(req, out));
}

Status Namespace::unlink_unsettled(const pb::UnlinkRequest& req, pb::UnlinkReply* out) {
  SURGE_RETURN_IF_ERROR(validate_name(req.name()));
  const auto& cred = req.cred();
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    conflict_backoff(attempt);
    // Again on each attempt: a conflict may have been this op's resend.
    SURGE_ASSIGN_OR_RETURN(bool resent, op_done(req.op_id()));
    if (resent) return Status::OK();  // it happened; its reply was lost
    SURGE_ASSIGN_OR_RETURN(auto p0, load_dir(req.parent(), "unlink"));
    SURGE_RETURN_IF_ERROR(check_access(cred, p0.attr(), kMayExec, "unlink"));
    SURGE_ASSIGN_OR_RETURN(auto d0, find(req.parent(), req.name()));
    if (!d0) return Status::NotFound("unlink: no " + entry_str(req.parent(), req.name()));
    auto g = locks_.lock({req.parent(), d0->child});
    KvBatch b;
    SURGE_ASSIGN_OR_RETURN(auto d, find(req.parent(), req.name(), &b));
    if (!d || d->child != d0->child) continue;  // changed before we locked
    SURGE_ASSIGN_OR_RETURN(auto p, load_dir(req.parent(), "unlink", &b));
    SURGE_RETURN_IF_ERROR(check_access(cred, p.attr(), kMayWrite | kMayExec, "unlink"));
    SURGE_ASSIGN_OR_RETURN(auto c, load_existing(d->child, "unlink", &b));
    if (S_ISDIR(c.attr().mode())) {
      return err::IsDirectory("unlink: " + entry_str(req.parent(), req.name()) + " is a directory");
    }
    SURGE_RETURN_IF_ERROR(check_sticky(cred, p.attr(), c.attr(), "unlink"));
    const uint64_t now = now_ns();
    b.del(Space::kDentries, keys::dentry(req.parent(), req.name()));
    p.mutable_attr()->set_mtime_ns(now);
    p.mutable_attr()->set_ctime_ns(now);
    put_inode(b, p);
    c.mutable_attr()->set_nlink(c.attr().nlink() - 1);
    c.mutable_attr()->set_ctime_ns(now);
    put_inode(b, c);
    if (c.attr().nlink() == 0) b.put(Space::kSystem, keys::orphan(c.attr().ino()), "");
    Status st = commit_done_op(b, g, req.op_id(), now);
    if (conflicted(st)) continue;
    SURGE_RETURN_IF_ERROR(st);
    if (out != nullptr) {
      to_wire(p.attr(), out->mutable_parent_attr());
      out->set_ino(c.attr().ino());
    }
    return Status::OK();
  }
  return Status::Busy("unlink: " + entry_str(req.parent(), req.name()) + " keeps changing");
}

Status Namespace::rmdir(const pb::UnlinkRequest& req, pb::UnlinkReply* out) {
  return settle_resend(req.op_id(), rmdir_unsettled(req, out));
}

Status Namespace::rmdir_unsettled(const pb::UnlinkRequest& req, pb::UnlinkReply* out) {
  SURGE_RETURN_IF_ERROR(validate_name(req.name()));
  const auto& cred = req.cred();
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    conflict_backoff(attempt);
    // Again on each attempt: a conflict may have been this op's resend.
    SURGE_ASSIGN_OR_RETURN(bool resent, op_done(req.op_id()));
    if (resent) return Status::OK();  // it happened; its reply was lost
    SURGE_ASSIGN_OR_RETURN(auto p0, load_dir(req.parent(), "rmdir"));
    SURGE_RETURN_IF_ERROR(check_access(cred, p0.attr(), kMayExec, "rmdir"));
    SURGE_ASSIGN_OR_RETURN(auto d0, find(req.parent(), req.name()));
    if (!d0) return Status::NotFound("rmdir: no " + entry_str(req.parent(), req.name()));
    auto g = locks_.lock({req.parent(), d0->child});
    KvBatch b;
    SURGE_ASSIGN_OR_RETURN(auto d, find(req.parent(), req.name(), &b));
    if (!d || d->child != d0->child) continue;
    SURGE_ASSIGN_OR_RETURN(auto p, load_dir(req.parent(), "rmdir", &b));
    SURGE_RETURN_IF_ERROR(check_access(cred, p.attr(), kMayWrite | kMayExec, "rmdir"));
    // The directory's record is checked too: every entry added to it
    // rewrites it, so an entry made since this emptiness scan (by another
    // MDS) fails the batch.
    SURGE_ASSIGN_OR_RETURN(auto c, load_existing(d->child, "rmdir", &b));
    if (!S_ISDIR(c.attr().mode())) {
      return err::NotDirectory("rmdir: " + entry_str(req.parent(), req.name()) +
                               " is not a directory");
    }
    SURGE_RETURN_IF_ERROR(check_sticky(cred, p.attr(), c.attr(), "rmdir"));
    SURGE_ASSIGN_OR_RETURN(bool empty, dir_empty(c.attr().ino()));
    if (!empty) {
      return err::NotEmpty("rmdir: " + entry_str(req.parent(), req.name()) + " is not empty");
    }
    const uint64_t now = now_ns();
    b.del(Space::kDentries, keys::dentry(req.parent(), req.name()));
    b.del(Space::kInodes, keys::inode(c.attr().ino()));
    b.count(Space::kInodes, -1);  // loaded with a check: present
    SURGE_RETURN_IF_ERROR(delete_xattrs(b, c.attr().ino()));
    p.mutable_attr()->set_nlink(p.attr().nlink() - 1);
    p.mutable_attr()->set_mtime_ns(now);
    p.mutable_attr()->set_ctime_ns(now);
    put_inode(b, p);
    Status st = commit_done_op(b, g, req.op_id(), now);
    if (conflicted(st)) continue;
    SURGE_RETURN_IF_ERROR(st);
    if (out != nullptr) {
      to_wire(p.attr(), out->mutable_parent_attr());
      out->set_ino(c.attr().ino());
    }
    return Status::OK();
  }
  return Status::Busy("rmdir: " + entry_str(req.parent(), req.name()) + " keeps changing");
}

Status Namespace::link(const pb::LinkRequest& req, pb::EntryReply* out) {
  return settle_resend(req.op_id(), link_unsettled(req, out));
}

Status Namespace::link_unsettled(const pb::LinkRequest& req, pb::EntryReply* out) {
  SURGE_RETURN_IF_ERROR(validate_name(req.new_name()));
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    conflict_backoff(attempt);
    auto g = locks_.lock({req.new_parent(), req.ino()});
    KvBatch b;
    SURGE_ASSIGN_OR_RETURN(auto c, load_existing(req.ino(), "link", &b));
    SURGE_ASSIGN_OR_RETURN(bool resent, op_done(req.op_id()));
    if (resent) {  // it happened; its reply was lost
      to_wire(c.attr(), out->mutable_attr());
      return Status::OK();
    }
    if (S_ISDIR(c.attr().mode())) {
      return Status::NotPermitted("link: " + ino_str(req.ino()) + " is a directory");
    }
    if (c.attr().nlink() == 0)
      return Status::NotFound("link: " + ino_str(req.ino()) + " was removed");
    if (c.attr().nlink() >= kMaxLinks) {
      return Status(Code::kTooManyLinks, "link: " + ino_str(req.ino()) + " has too many links");
    }
    SURGE_ASSIGN_OR_RETURN(auto p, load_dir(req.new_parent(), "link", &b));
    SURGE_RETURN_IF_ERROR(check_access(req.cred(), p.attr(), kMayWrite | kMayExec, "link"));
    SURGE_ASSIGN_OR_RETURN(auto existing, find(req.new_parent(), req.new_name(), &b));
    if (existing)
      return Status::AlreadyExists("link: " + entry_str(req.new_parent(), req.new_name()) +
                                   " exists");
    const dir_lease::AddVerdict lease =
        dir_lease::before_add(p, req.session_id(), dir_lease::now_ms(), opts_.dir_lease_ms);
    if (lease.wait_until_ms != 0) {
      SURGE_RETURN_IF_ERROR(wait_out_lease(p, lease, b, g));
      continue;
    }
    const uint64_t now = now_ns();
    b.put(Space::kDentries, keys::dentry(req.new_parent(), req.new_name()),
          keys::encode_dentry({req.ino(), c.attr().mode() & S_IFMT}));
    c.mutable_attr()->set_nlink(c.attr().nlink() + 1);
    c.mutable_attr()->set_ctime_ns(now);
    p.mutable_attr()->set_mtime_ns(now);
    p.mutable_attr()->set_ctime_ns(now);
    put_inode(b, c);
    put_inode(b, p);
    Status st = commit_done_op(b, g, req.op_id(), now);
    if (conflicted(st)) continue;
    SURGE_RETURN_IF_ERROR(st);
    to_wire(c.attr(), out->mutable_attr());
    to_wire(p.attr(), out->mutable_parent_attr());
    out->set_parent_lease_ms(lease.lease_ms);
    return Status::OK();
  }
  return Status::Busy("link: " + entry_str(req.new_parent(), req.new_name()) + " keeps changing");
}

Status Namespace::readdir(const pb::ReadDirRequest& req, pb::ReadDirReply* out) {
  SURGE_ASSIGN_OR_RETURN(auto dir, load_dir(req.ino(), "readdir"));
  SURGE_RETURN_IF_ERROR(check_access(req.cred(), dir.attr(), kMayRead, "readdir"));
  uint32_t max = req.max_entries() == 0 ? 1024 : req.max_entries();
  max = std::min(max, opts_.max_readdir_entries);
  const uint64_t start = req.cookie() == 0 ? 0 : req.cookie() + 1;
  if (req.cookie() >= (1ull << 63) - 1) {  // past the last possible cookie
    out->set_eof(true);
    return Status::OK();
  }
  Status bad;
  bool more = false;
  SURGE_RETURN_IF_ERROR(kv_->scan(
      Space::kDentries, keys::dentry_from(req.ino(), start), keys::dentry_end(req.ino()),
      [&](std::string_view k, std::string_view v) {
        if (static_cast<uint32_t>(out->entries_size()) == max) {
          more = true;
          return false;
        }
        uint64_t parent, cookie;
        std::string_view name;
        keys::DentryValue d;
        if (!keys::decode_dentry_key(k, &parent, &cookie, &name) || !keys::decode_dentry(v, &d)) {
          bad = Status::Corruption("unreadable entry in directory " + std::to_string(req.ino()));
          return false;
        }
        auto* e = out->add_entries();
        e->set_name(std::string(name));
        e->set_ino(d.child);
        e->set_type(d.type);
        e->set_cookie(cookie);
        return true;
      }));
  SURGE_RETURN_IF_ERROR(bad);
  if (req.plus()) {
    for (auto& e : *out->mutable_entries()) {
      records::InodeRecord c;
      SURGE_ASSIGN_OR_RETURN(bool found, load(e.ino(), &c));
      if (found) to_wire(c.attr(), e.mutable_attr());  // gone meanwhile: entry without attributes
    }
  }
  out->set_eof(!more);
  return Status::OK();
}

Status Namespace::statfs(const pb::StatFsRequest&, pb::StatFsReply* out) {
  uint64_t cap = 0, free = 0;
  map_->space(&cap, &free);
  out->set_capacity_bytes(cap);
  out->set_free_bytes(free);
  // Exact where the store can count (RocksDB follows every create and
  // final removal, etcd counts); a store that cannot gives its estimate.
  auto counted = kv_->count_keys(Space::kInodes);
  const uint64_t used =
      std::max<uint64_t>(1, counted.ok() ? *counted : kv_->estimate_keys(Space::kInodes));
  out->set_inodes_used(used);
  out->set_inodes_free(opts_.max_inodes > used ? opts_.max_inodes - used : 0);
  out->set_name_max(255);
  out->set_block_size(4096);
  return Status::OK();
}

Status Namespace::open(const pb::OpenRequest& req, pb::EntryReply* out) {
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    conflict_backoff(attempt);
    auto g = locks_.lock({req.ino()});
    // An unlinked but not yet collected inode (nlink 0) may be opened: a
    // client re-records the opens it holds after an MDS restart this way.
    // Nobody finds such an inode by name, so it is never a new open.
    KvBatch b;
    SURGE_ASSIGN_OR_RETURN(auto rec, load_existing(req.ino(), "open", &b));
    Status st = open_existing_locked(req.cred(), rec, req.flags(), req.session_id(), g, b);
    if (conflicted(st)) continue;
    SURGE_RETURN_IF_ERROR(st);
    to_wire(rec.attr(), out->mutable_attr());
    return Status::OK();
  }
  return Status::Busy("open: " + ino_str(req.ino()) + " keeps changing");
}

Status Namespace::close(const pb::CloseRequest& req) {
  sessions_->release_open(req.session_id(), req.ino());
  return Status::OK();
}

Status Namespace::close_many(const pb::CloseManyRequest& req) {
  for (uint64_t ino : req.inos()) sessions_->release_open(req.session_id(), ino);
  return Status::OK();
}

Result<std::vector<uint64_t>> Namespace::list_orphans(size_t max) {
  return list_orphans_after(0, max);
}

Result<std::vector<uint64_t>> Namespace::list_orphans_after(uint64_t after, size_t max) {
  std::vector<uint64_t> out;
  if (after == UINT64_MAX) return out;
  const std::string from = after == 0 ? std::string(keys::kOrphanPrefix) : keys::orphan(after + 1);
  SURGE_RETURN_IF_ERROR(kv_->scan(Space::kSystem, from, keys::kOrphanEnd,
                                  [&](std::string_view k, std::string_view) {
                                    if (k.size() == keys::kOrphanPrefix.size() + 8) {
                                      out.push_back(keys::get_be64(k.substr(2)));
                                    }
                                    return out.size() < max;
                                  }));
  return out;
}

Result<bool> Namespace::orphan_record(uint64_t ino, records::InodeRecord* out) {
  return load(ino, out);
}

Status Namespace::purge_orphan(uint64_t ino) {
  auto g = locks_.lock({ino});
  SURGE_ASSIGN_OR_RETURN(bool open, sessions_->is_open(ino));
  if (open) return Status::Busy("orphan " + ino_str(ino) + " is open again");
  // Busy (the collector tries again later) when another MDS wrote the
  // record since this read.
  KvBatch b;
  records::InodeRecord rec;
  SURGE_ASSIGN_OR_RETURN(bool found, load(ino, &rec, &b));
  b.del(Space::kSystem, keys::orphan(ino));
  if (found && rec.attr().nlink() == 0) {
    b.del(Space::kInodes, keys::inode(ino));
    b.count(Space::kInodes, -1);  // loaded with a check: present
    SURGE_RETURN_IF_ERROR(delete_xattrs(b, ino));
  }
  return kv_->commit(b);
}

}  // namespace surge::mds
