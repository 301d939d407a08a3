// ClientImpl's namespace operations: each is an MDS call, its request
// built from the caller's arguments and credentials and its reply converted
// (proto_convert.h). Sizes in the attributes returned are merged with this
// client's own unreported writes (InodeTable::merge_local); a truncate is
// ordered after this client's writes and size reports of the inode.

#include <fcntl.h>

#include "client/lib/client_impl.h"
#include "client/lib/proto_convert.h"
#include "net/proto/mds_methods.h"

namespace surge::client {

namespace mds = proto::mds;

namespace {

// The parent directory's attributes after a change of its entries, when the
// MDS sent them (not on a resend answered from the op id).
template <typename Reply>
void note_parent_of(DirAttrCache& cache, const Reply& resp) {
  if (resp.has_parent_attr()) cache.note(attr_from_proto(resp.parent_attr()));
}

// The MDS keeps no system.* xattrs (POSIX ACLs): it refuses a request
// naming one before looking at anything else (mds/namespace/
// namespace_attrs.cpp, validate_xattr_name). Such a request is answered
// here as the MDS would, without the round trip: cp -a and rsync -A set
// system.posix_acl_access on every file they copy, then fall back to chmod.
constexpr std::string_view kSystemNs = "system.";
bool refused_by_mds_unasked(std::string_view name) {
  return name.starts_with(kSystemNs) && name.size() <= 255 &&
         name.find('\0') == std::string_view::npos;
}
Status system_xattr_refusal(std::string_view name) {
  return Status::NotSupported("xattr '" + std::string(name) +
                              "': system.* (ACLs) is not supported");
}

// Search permission on a directory, from its attributes as this client
// last saw them (the MDS's check of a lookup, for one answered here).
bool may_search(const Attr& dir, const Caller& c) {
  if (c.uid == 0) return true;
  if (c.uid == dir.uid) return dir.mode & S_IXUSR;
  bool group = c.gid == dir.gid;
  for (uint32_t g : c.groups) group = group || g == dir.gid;
  return dir.mode & (group ? S_IXGRP : S_IXOTH);
}

// An MDS call that adds `name` to `dir` (mknod, mkdir, symlink, link),
// as session `sid`: our lease on dir learns the name and the reply's term,
// or ends when the outcome is unknown; a fetched entry of that name is
// stale either way.
template <typename Method>
Status add_name(MdsLink& link, DirLeases& leases, StatAhead& ahead, typename Method::Request& req,
                mds::EntryReply* resp, Ino dir, std::string_view name, uint64_t sid) {
  req.set_session_id(sid);
  const auto sent = DirLeases::Clock::now();
  Status st = link.call<Method>(req, resp);
  ahead.name_changed(dir, name);
  if (!st.ok()) {
    leases.drop(dir);
  } else {
    leases.added(dir, name, sid, /*renews=*/true, resp->parent_lease_ms(), sent);
  }
  return st;
}

}  // namespace

void ClientImpl::note_parent(const proto::mds::EntryReply& resp) {
  note_parent_of(dir_attrs_, resp);
}

void ClientImpl::note_parent(const proto::mds::UnlinkReply& resp) {
  note_parent_of(dir_attrs_, resp);
}

std::optional<Attr> ClientImpl::recent_dir_attr(Ino dir, std::chrono::nanoseconds max_age,
                                                std::chrono::nanoseconds* age) {
  DirAttrCache::Clock::duration a{};
  auto r = dir_attrs_.recent(dir, std::chrono::duration_cast<DirAttrCache::Clock::duration>(max_age), &a);
  if (r && age != nullptr) *age = std::chrono::duration_cast<std::chrono::nanoseconds>(a);
  return r;
}

Result<Attr> ClientImpl::lookup(Ino parent, std::string_view name, const Caller& c) {
  // A name missing from a directory only this session adds to: no MDS.
  // The caller's search permission is checked as the MDS would, on the
  // directory's attributes from our last change there.
  if (leases_.known_missing(parent, name, session_->id())) {
    // At most a second old: surge-fuse's default attr_timeout, the age of
    // the attributes the kernel itself checks permissions on.
    auto dir = dir_attrs_.recent(parent, std::chrono::seconds(1), nullptr);
    if (dir && may_search(*dir, c)) {
      return Status::NotFound("lookup: no '" + std::string(name) + "' in directory " +
                              std::to_string(parent) + " (this client's lease on it)");
    }
  }
  mds::LookupRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_parent(parent);
  req.set_name(std::string(name));
  mds::EntryReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsLookup>(req, &resp));
  return inodes_.merge_local(attr_from_proto(resp.attr()));
}

Result<Attr> ClientImpl::lookup_ahead(Ino parent, std::string_view name, const Caller& c,
                                      std::chrono::nanoseconds max_age,
                                      std::chrono::nanoseconds* age) {
  if (age != nullptr) *age = std::chrono::nanoseconds(0);
  if (!options_.stat_ahead) return lookup(parent, name, c);
  StatAhead::Clock::duration fetched_ago{};
  auto hit = ahead_.find(
      parent, name, std::chrono::duration_cast<StatAhead::Clock::duration>(max_age), &fetched_ago);
  // An inode we hold open changes with our writes; the MDS (and
  // merge_local) know it better than a fetch.
  if (hit && inodes_.find(hit->ino) == nullptr) {
    if (age != nullptr) *age = std::chrono::duration_cast<std::chrono::nanoseconds>(fetched_ago);
    return *hit;
  }
  Result<Attr> a = lookup(parent, name, c);
  if (a.ok()) {
    if (auto f = ahead_.note_lookup(parent)) fetch_ahead(*f, c);
  }
  return a;
}

void ClientImpl::fetch_ahead(const StatAhead::Fetch& f, const Caller& c) {
  std::vector<DirEntry> entries;
  uint64_t cookie = 0;
  for (;;) {
    auto page = readdir(f.dir, cookie, StatAhead::kPage, c);
    if (!page.ok()) {
      ahead_.abandon(f);  // no read permission, or the directory went
      return;
    }
    if (!page->entries.empty()) cookie = page->entries.back().cookie;
    for (DirEntry& e : page->entries) entries.push_back(std::move(e));
    if (page->eof || page->entries.empty() || entries.size() >= StatAhead::kMaxEntries) break;
  }
  ahead_.install(f, std::move(entries));
}

Result<Attr> ClientImpl::getattr(Ino ino, const Caller& c) {
  mds::GetAttrRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(ino);
  mds::EntryReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsGetAttr>(req, &resp));
  return inodes_.merge_local(attr_from_proto(resp.attr()));
}

Status ClientImpl::access(Ino ino, uint32_t mask, const Caller& c) {
  mds::AccessRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(ino);
  req.set_mask(mask);
  mds::AccessReply resp;
  return mds_->call<mds::MdsAccess>(req, &resp);
}

Result<Attr> ClientImpl::setattr(Ino ino, const SetAttr& sa, const Caller& c) {
  if (sa.file != nullptr &&
      ((sa.file->flags() & O_ACCMODE) == O_RDONLY || sa.file->ino() != ino)) {
    return Status::InvalidArgument("setattr of inode " + std::to_string(ino) +
                                   " through a file not open for writing it");
  }
  std::shared_ptr<InodeState> st = inodes_.find(ino);
  // Our own unreported writes first, so a truncate or a time set is ordered
  // after them, and no report of this inode runs until the change is done: a
  // report arriving later would grow a truncated file back or move the
  // times a utimens just set (tar -x, cp -p) to the time of the report.
  // The report goes in the setattr's own request (one MDS call and one
  // sync), applied there first, as if made just before; to an MDS that
  // does not take it there, on its own first.
  std::unique_lock<std::mutex> size_lock;
  std::optional<uint64_t> report;
  if (st) {
    size_lock = std::unique_lock(st->size_mu);
    if (session_->setattr_reports_size()) {
      report = sizes_->take_locked(*st);
    } else {
      SURGE_RETURN_IF_ERROR(sizes_->report_locked(*st, false));
    }
  }
  if (st) writes_->drain(*st);
  if (st) st->data_gen.fetch_add(1, std::memory_order_acq_rel);
  // A truncate by path carries no session, so the MDS counts every open of
  // the file as another client's and cuts the data before replying: a
  // release of this client's own, still gathering, must arrive first.
  if ((sa.mask & kSetSize) && sa.file == nullptr) closes_->drain_if_queued(ino);
  mds::SetAttrRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(ino);
  if (sa.file != nullptr) req.set_open_session_id(session_->id());
  uint32_t v = 0;
  if (sa.mask & kSetMode) v |= mds::SETATTR_MODE;
  if (sa.mask & kSetUid) v |= mds::SETATTR_UID;
  if (sa.mask & kSetGid) v |= mds::SETATTR_GID;
  if (sa.mask & kSetSize) v |= mds::SETATTR_SIZE;
  if (sa.mask & kSetAtime) v |= mds::SETATTR_ATIME;
  if (sa.mask & kSetMtime) v |= mds::SETATTR_MTIME;
  if (sa.mask & kSetCtime) v |= mds::SETATTR_CTIME;
  if (sa.mask & kSetAtimeNow) v |= mds::SETATTR_ATIME_NOW;
  if (sa.mask & kSetMtimeNow) v |= mds::SETATTR_MTIME_NOW;
  if (sa.mask & kKillSuidgid) v |= mds::SETATTR_KILL_SUIDGID;
  req.set_valid(v);
  req.set_mode(sa.mode & 07777);
  req.set_uid(sa.uid);
  req.set_gid(sa.gid);
  req.set_size(sa.size);
  req.set_atime_ns(ns_from_ts(sa.atime));
  req.set_mtime_ns(ns_from_ts(sa.mtime));
  req.set_ctime_ns(ns_from_ts(sa.ctime));
  if (report) {
    req.set_report_size(true);
    req.set_report_end(*report);
  }
  mds::EntryReply resp;
  Status called = mds_->call<mds::MdsSetAttr>(req, &resp);
  if (report) sizes_->settle_locked(*st, *report, called.ok(), resp.attr().size());
  ahead_.inode_changed(ino);  // done or not known: a fetch from before is stale
  SURGE_RETURN_IF_ERROR(called);
  dir_attrs_.note(attr_from_proto(resp.attr()));  // a directory's chmod, chown, utimens
  if (st) st->mode.store(resp.attr().mode(), std::memory_order_relaxed);
  if (st && (sa.mask & kSetSize)) {
    std::lock_guard lk(st->mu);
    st->mds_size = resp.attr().size();
    // Our own truncate: every request for the file's chunks carries it
    // from here (none was in flight: drained above).
    if (resp.attr().truncate_seq() > st->layout.truncate_seq) {
      st->layout.truncate_seq = resp.attr().truncate_seq();
      st->layout.truncate_size = resp.attr().truncate_size();
    }
    st->written_end = std::min(st->written_end, sa.size);
    st->reported_end = std::min(st->reported_end, sa.size);
    st->data_gen.fetch_add(1, std::memory_order_acq_rel);  // and what was read meanwhile
  }
  return inodes_.merge_local(attr_from_proto(resp.attr()));
}

Result<Attr> ClientImpl::mkdir(Ino parent, std::string_view name, uint32_t mode, const Caller& c) {
  mds::MkdirRequest req;
  req.set_op_id(next_op_id());  // a resend after a lost reply is not EEXIST
  *req.mutable_cred() = cred_to_proto(c);
  req.set_parent(parent);
  req.set_name(std::string(name));
  req.set_mode(mode);
  // The session id also asks for a lease on the new directory; without
  // leases (ClientOptions::dir_leases) this client holds none to renew.
  const uint64_t sid = options_.dir_leases ? session_->id() : 0;
  mds::EntryReply resp;
  const uint64_t gen = leases_.generation();
  const auto sent = DirLeases::Clock::now();
  SURGE_RETURN_IF_ERROR(
      add_name<mds::MdsMkdir>(*mds_, leases_, ahead_, req, &resp, parent, name, sid));
  note_parent(resp);
  Attr a = attr_from_proto(resp.attr());
  dir_attrs_.note(a);  // what a lookup answered by the lease checks permission on
  leases_.grant(a.ino, sid, resp.lease_ms(), sent, gen);
  return a;
}

Result<Attr> ClientImpl::mknod(Ino parent, std::string_view name, uint32_t mode, uint64_t rdev,
                               const Caller& c) {
  mds::MknodRequest req;
  req.set_op_id(next_op_id());  // a resend after a lost reply is not EEXIST
  *req.mutable_cred() = cred_to_proto(c);
  req.set_parent(parent);
  req.set_name(std::string(name));
  req.set_mode(mode);
  req.set_rdev(rdev);
  mds::EntryReply resp;
  SURGE_RETURN_IF_ERROR(
      add_name<mds::MdsMknod>(*mds_, leases_, ahead_, req, &resp, parent, name, session_->id()));
  note_parent(resp);
  return attr_from_proto(resp.attr());
}

Result<Attr> ClientImpl::symlink(Ino parent, std::string_view name, std::string_view target,
                                 const Caller& c) {
  mds::SymlinkRequest req;
  req.set_op_id(next_op_id());  // a resend after a lost reply is not EEXIST
  *req.mutable_cred() = cred_to_proto(c);
  req.set_parent(parent);
  req.set_name(std::string(name));
  req.set_target(std::string(target));
  mds::EntryReply resp;
  SURGE_RETURN_IF_ERROR(
      add_name<mds::MdsSymlink>(*mds_, leases_, ahead_, req, &resp, parent, name, session_->id()));
  note_parent(resp);
  return attr_from_proto(resp.attr());
}

Result<std::string> ClientImpl::readlink(Ino ino) {
  mds::ReadlinkRequest req;
  *req.mutable_cred() = cred_to_proto(Caller{});
  req.set_ino(ino);
  mds::ReadlinkReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsReadlink>(req, &resp));
  return resp.target();
}

Result<Attr> ClientImpl::link(Ino ino, Ino new_parent, std::string_view new_name, const Caller& c) {
  mds::LinkRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(ino);
  req.set_new_parent(new_parent);
  req.set_new_name(std::string(new_name));
  req.set_op_id(next_op_id());  // a resend after a lost reply is not EEXIST
  mds::EntryReply resp;
  Status st = add_name<mds::MdsLink>(*mds_, leases_, ahead_, req, &resp, new_parent, new_name,
                                     session_->id());
  ahead_.inode_changed(ino);  // one more link, or not known
  SURGE_RETURN_IF_ERROR(st);
  note_parent(resp);
  return inodes_.merge_local(attr_from_proto(resp.attr()));
}

Status ClientImpl::unlink(Ino parent, std::string_view name, const Caller& c) {
  mds::UnlinkRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_parent(parent);
  req.set_name(std::string(name));
  req.set_op_id(next_op_id());  // a resend after a lost reply is not ENOENT
  mds::UnlinkReply resp;
  Status st = mds_->call<mds::MdsUnlink>(req, &resp);
  ahead_.name_changed(parent, name);  // gone, or not known
  SURGE_RETURN_IF_ERROR(st);
  note_parent(resp);
  leases_.removed(parent, name);
  return Status::OK();
}

Status ClientImpl::rmdir(Ino parent, std::string_view name, const Caller& c) {
  mds::UnlinkRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_parent(parent);
  req.set_name(std::string(name));
  req.set_op_id(next_op_id());  // a resend after a lost reply is not ENOENT
  mds::UnlinkReply resp;
  Status st = mds_->call<mds::MdsRmdir>(req, &resp);
  ahead_.name_changed(parent, name);  // gone, or not known
  SURGE_RETURN_IF_ERROR(st);
  note_parent(resp);
  leases_.removed(parent, name);
  if (resp.ino() != 0) dir_attrs_.drop(resp.ino());  // gone: its next getattr says so
  return Status::OK();
}

Status ClientImpl::rename(Ino parent, std::string_view name, Ino new_parent,
                          std::string_view new_name, uint32_t flags, const Caller& c) {
  mds::RenameRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_old_parent(parent);
  req.set_old_name(std::string(name));
  req.set_new_parent(new_parent);
  req.set_new_name(std::string(new_name));
  req.set_flags(flags);
  req.set_op_id(next_op_id());  // a resend after a lost reply is not ENOENT
  const uint64_t sid = session_->id();
  req.set_session_id(sid);
  mds::RenameReply resp;
  // Both directories change; their next getattr asks the MDS.
  dir_attrs_.drop(parent);
  dir_attrs_.drop(new_parent);
  Status st = mds_->call<mds::MdsRename>(req, &resp);
  ahead_.name_changed(parent, name);  // moved, or not known
  ahead_.name_changed(new_parent, new_name);
  if (!st.ok()) {
    leases_.drop(new_parent);  // the new name may be there or not
    return st;
  }
  // An exchange moves names that were there already.
  leases_.added(new_parent, new_name, sid, /*renews=*/false, 0, {});
  if ((flags & kRenameExchange) == 0) leases_.removed(parent, name);
  return Status::OK();
}

Result<DirPage> ClientImpl::readdir(Ino dir, uint64_t cookie, size_t max_entries, const Caller& c) {
  mds::ReadDirRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(dir);
  req.set_cookie(cookie);
  req.set_max_entries(static_cast<uint32_t>(max_entries));
  req.set_plus(true);
  mds::ReadDirReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsReadDir>(req, &resp));
  DirPage page;
  page.eof = resp.eof();
  page.entries.reserve(resp.entries_size());
  for (const auto& e : resp.entries()) {
    DirEntry d;
    d.name = e.name();
    d.cookie = e.cookie();
    if (e.has_attr()) {
      d.attr = inodes_.merge_local(attr_from_proto(e.attr()));
    } else {
      d.attr.ino = e.ino();
      d.attr.mode = e.type();
    }
    page.entries.push_back(std::move(d));
  }
  return page;
}

Result<std::string> ClientImpl::getxattr(Ino ino, std::string_view name, const Caller& c) {
  if (refused_by_mds_unasked(name)) return system_xattr_refusal(name);
  mds::GetXattrRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(ino);
  req.set_name(std::string(name));
  req.set_size(1u << 20);  // larger than any value (64 KiB limit)
  mds::GetXattrReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsGetXattr>(req, &resp));
  return resp.value();
}

Status ClientImpl::setxattr(Ino ino, std::string_view name, std::string_view value, uint32_t flags,
                            const Caller& c) {
  if (refused_by_mds_unasked(name)) return system_xattr_refusal(name);
  mds::SetXattrRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(ino);
  req.set_name(std::string(name));
  req.set_value(std::string(value));
  req.set_flags(flags);
  mds::SetXattrReply resp;
  dir_attrs_.drop(ino);  // its ctime moves
  Status st = mds_->call<mds::MdsSetXattr>(req, &resp);
  ahead_.inode_changed(ino);
  return st;
}

Result<std::vector<std::string>> ClientImpl::listxattr(Ino ino, const Caller& c) {
  mds::ListXattrRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(ino);
  req.set_size(1u << 24);
  mds::ListXattrReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsListXattr>(req, &resp));
  return std::vector<std::string>(resp.names().begin(), resp.names().end());
}

Status ClientImpl::removexattr(Ino ino, std::string_view name, const Caller& c) {
  if (refused_by_mds_unasked(name)) return system_xattr_refusal(name);
  mds::RemoveXattrRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(ino);
  req.set_name(std::string(name));
  mds::RemoveXattrReply resp;
  dir_attrs_.drop(ino);  // its ctime moves
  Status st = mds_->call<mds::MdsRemoveXattr>(req, &resp);
  ahead_.inode_changed(ino);
  return st;
}

Result<FsStat> ClientImpl::statfs() {
  mds::StatFsRequest req;
  *req.mutable_cred() = cred_to_proto(Caller{});
  mds::StatFsReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsStatFs>(req, &resp));
  FsStat s;
  s.block_size = resp.block_size() ? resp.block_size() : 4096;
  s.total_bytes = resp.capacity_bytes();
  s.free_bytes = resp.free_bytes();
  s.total_inodes = resp.inodes_used() + resp.inodes_free();
  s.free_inodes = resp.inodes_free();
  s.max_name = resp.name_max() ? resp.name_max() : 255;
  return s;
}

Result<ClusterStatus> ClientImpl::cluster_status() {
  SURGE_RETURN_IF_ERROR(map_->refresh());
  mds::ClusterMap m = map_->snapshot();
  ClusterStatus cs;
  cs.map_version = m.version();
  cs.fs_id = m.fs_id();
  cs.mds_address = options_.mds_address;
  for (const auto& t : m.targets()) {
    TargetStatus ts;
    ts.id = t.target_id();
    ts.address = t.address();
    switch (t.state()) {
      case mds::TARGET_UP:
        ts.state = "up";
        break;
      case mds::TARGET_DOWN:
        ts.state = "down";
        break;
      case mds::TARGET_DRAINING:
        ts.state = "draining";
        break;
      default:
        ts.state = "unknown";
        break;
    }
    ts.capacity_bytes = t.capacity_bytes();
    ts.free_bytes = t.free_bytes();
    ts.last_heartbeat_ms = t.last_heartbeat_ms();
    cs.targets.push_back(std::move(ts));
  }
  return cs;
}

Result<StripeLayout> ClientImpl::get_layout(Ino ino, const Caller& c) {
  mds::GetLayoutRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(ino);
  mds::GetLayoutReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsGetLayout>(req, &resp));
  return layout_from_proto(resp.layout());
}

Status ClientImpl::set_dir_layout(Ino dir, uint32_t stripe_size, uint32_t stripe_count,
                                  const Caller& c) {
  mds::SetLayoutRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(dir);
  req.mutable_layout()->set_stripe_size(stripe_size);
  req.mutable_layout()->set_stripe_count(stripe_count);
  mds::SetLayoutReply resp;
  return mds_->call<mds::MdsSetLayout>(req, &resp);
}

}  // namespace surge::client
