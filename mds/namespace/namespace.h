// Namespace: the POSIX file system tree of one Surge file system, on a
// KvStore. Every operation checks the caller's credentials as Linux would
// and returns errno-exact Status codes.
//
// Invariants:
//  * every change that touches several keys commits as one KvBatch;
//  * every read a change depends on is a check in its batch (the records,
//    entries and xattrs read, present or absent; for a rename that moves a
//    directory, the ancestors walked), so the change commits only if none
//    of them changed since: correct for several MDS processes on one store,
//    and a failed check (Busy) makes the operation read again and retry;
//  * an operation holds the LockTable stripes of every inode whose record or
//    entries it changes, so concurrent operations on one directory of one
//    process serialize instead of failing each other's checks; renames that
//    move an entry to another directory also take the rename mutex (as
//    Linux's s_vfs_rename_mutex);
//  * a reply is sent only after the change is durable (make_durable after
//    the locks are released: waiting for the disk does not hold up the
//    directory, and the log orders every dependent change after it);
//  * nlink is exact: files count their entries, directories 2 + subdirs;
//  * a non-directory whose last link goes is kept with nlink 0 and listed in
//    the orphan list in the same batch; the collector removes it later.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "mds/cluster/cluster_map.h"
#include "mds/cluster/object_targets.h"
#include "mds/cluster/session_table.h"
#include "mds/kv/kv_store.h"
#include "mds/namespace/dir_lease.h"
#include "mds/namespace/keys.h"
#include "mds/namespace/lock_table.h"
#include "mds/namespace/records.pb.h"
#include "net/proto/mds.pb.h"

namespace surge::mds {

struct NamespaceOptions {
  uint32_t default_stripe_size = 1 << 20;
  uint32_t default_stripe_count = 4;
  // Replicas of files whose directory sets no scheme (docs/redundancy.md);
  // 0: format 1 layouts (one copy on targets, no chains).
  uint32_t default_replicas = 0;
  uint64_t inode_batch = 4096;          // inode numbers reserved per persisted step
  uint64_t max_inodes = 1ull << 32;     // reported by statfs
  uint32_t max_readdir_entries = 4096;  // per page
  // How long the op id of a finished unlink/rmdir/rename/link is kept, so
  // its resend answers OK again (see op_done).
  uint64_t done_op_ttl_ns = 600ull * 1000 * 1000 * 1000;
  // A directory lease's term (dir_lease.h); 0: none granted or renewed.
  uint32_t dir_lease_ms = dir_lease::kTermMs;
};

namespace pb = ::surge::proto::mds;

class Namespace {
 public:
  // Formats an empty store (fs id, root inode 1 mode 0755 uid 0) or checks
  // an existing one; returns the fs id. expect_fs_id 0: any.
  static Result<uint64_t> FormatOrLoad(KvStore* kv, uint64_t expect_fs_id);

  static Result<std::unique_ptr<Namespace>> Open(KvStore* kv, ClusterMap* map,
                                                 SessionTable* sessions, ObjectTargets* objects,
                                                 NamespaceOptions options);

  Status lookup(const pb::LookupRequest& req, pb::EntryReply* out);
  Status getattr(const pb::GetAttrRequest& req, pb::EntryReply* out);
  Status setattr(const pb::SetAttrRequest& req, pb::EntryReply* out);
  Status create(const pb::CreateRequest& req, pb::EntryReply* out);
  Status mknod(const pb::MknodRequest& req, pb::EntryReply* out);
  Status mkdir(const pb::MkdirRequest& req, pb::EntryReply* out);
  // out (optional) gets the parent's attributes after the removal.
  Status unlink(const pb::UnlinkRequest& req, pb::UnlinkReply* out = nullptr);
  Status rmdir(const pb::UnlinkRequest& req, pb::UnlinkReply* out = nullptr);
  Status rename(const pb::RenameRequest& req);
  Status link(const pb::LinkRequest& req, pb::EntryReply* out);
  Status symlink(const pb::SymlinkRequest& req, pb::EntryReply* out);
  Status readlink(const pb::ReadlinkRequest& req, pb::ReadlinkReply* out);
  Status readdir(const pb::ReadDirRequest& req, pb::ReadDirReply* out);
  Status statfs(const pb::StatFsRequest& req, pb::StatFsReply* out);
  Status setxattr(const pb::SetXattrRequest& req);
  Status getxattr(const pb::GetXattrRequest& req, pb::GetXattrReply* out);
  Status listxattr(const pb::ListXattrRequest& req, pb::ListXattrReply* out);
  Status removexattr(const pb::RemoveXattrRequest& req);
  Status set_layout(const pb::SetLayoutRequest& req, pb::SetLayoutReply* out);
  Status get_layout(const pb::GetLayoutRequest& req, pb::GetLayoutReply* out);
  Status report_size(const pb::ReportSizeRequest& req, pb::EntryReply* out);
  Status open(const pb::OpenRequest& req, pb::EntryReply* out);
  Status close(const pb::CloseRequest& req);
  Status close_many(const pb::CloseManyRequest& req);
  Status access(const pb::AccessRequest& req);

  // Orphan collection (see OrphanCollector).
  Result<std::vector<uint64_t>> list_orphans(size_t max);
  // Orphans with inode numbers above `after`, in order (a collector's cursor).
  Result<std::vector<uint64_t>> list_orphans_after(uint64_t after, size_t max);
  // The orphan's record into *out; false when it is already gone.
  Result<bool> orphan_record(uint64_t ino, records::InodeRecord* out);
  // Deletes the inode, its xattrs and its orphan entry, unless it is open
  // again (then Busy).
  Status purge_orphan(uint64_t ino);

  // Truncate intents (namespace_truncate.cpp; the leader's pass applies
  // them: cluster/truncate_intents.h). Up to max, in inode order.
  struct PendingTruncate {
    uint64_t ino = 0;
    records::TruncateIntent intent;
  };
  Result<std::vector<PendingTruncate>> list_truncate_intents(size_t max);
  // The inode's record into *out; false when it is gone.
  Result<bool> inode_record(uint64_t ino, records::InodeRecord* out) { return load(ino, out); }
  // Deletes the intent if it still is `applied` (a newer truncate's
  // replaced it: kept, Busy).
  Status finish_truncate_intent(uint64_t ino, const records::TruncateIntent& applied);

  KvStore* kv() { return kv_; }
  uint64_t fs_id() const { return fs_id_; }

  static uint64_t now_ns();
  // EINVAL / ENAMETOOLONG for names that can never be a directory entry.
  static Status validate_name(const std::string& name);

 private:
  Namespace(KvStore* kv, ClusterMap* map, SessionTable* sessions, ObjectTargets* objects,
            NamespaceOptions o)
      : kv_(kv), map_(map), sessions_(sessions), objects_(objects), opts_(o) {}

  Result<uint64_t> alloc_ino();
  Status claim_inode_block();  // under ino_mu_
  // Reads an inode record into *out; false when there is none. With
  // `reads`, the batch the change will commit in, what was read (the bytes
  // or their absence) becomes a check of that batch.
  Result<bool> load(uint64_t ino, records::InodeRecord* out, KvBatch* reads = nullptr);
  Result<records::InodeRecord> load_existing(uint64_t ino, const char* what,
                                             KvBatch* reads = nullptr);
  Result<records::InodeRecord> load_dir(uint64_t ino, const char* what, KvBatch* reads = nullptr);
  Result<std::optional<keys::DentryValue>> find(uint64_t parent, const std::string& name,
                                                KvBatch* reads = nullptr);
  // Stamps the record (format version, change count) and puts it into b.
  void put_inode(KvBatch& b, records::InodeRecord& r);
  // A change of one inode's record alone (setattr, size reports, xattrs,
  // setstripe): locks its stripe, loads it into *rec as a check of a fresh
  // batch, lets `change` decide and add to the batch (an error is the
  // answer, nothing committed), puts *rec back and commits; reads and
  // decides again when another writer changed it meanwhile. A `change`
  // that calls data servers takes the lock too, to release it for the
  // call (Guard::unlocked).
  Status change_inode(uint64_t ino, const char* what, records::InodeRecord* rec,
                      const std::function<Status(KvBatch&, LockTable::Guard&)>& change);
  Status change_inode(uint64_t ino, const char* what, records::InodeRecord* rec,
                      const std::function<Status(KvBatch&)>& change) {
    return change_inode(ino, what, rec, [&](KvBatch& b, LockTable::Guard&) { return change(b); });
  }
  Result<bool> dir_empty(uint64_t ino);
  Status delete_xattrs(KvBatch& b, uint64_t ino);
  Status commit_then_sync(KvBatch& b, LockTable::Guard& g);
  // The same for an unlink/rmdir/rename/link: its op id goes into the batch
  // (see op_done), and old ids expire now and then.
  Status commit_done_op(KvBatch& b, LockTable::Guard& g, uint64_t op_id, uint64_t now);
  // Sets rec's size for a truncate (setattr, O_TRUNC) into b, with the
  // inode locked by g: see namespace_truncate.cpp.
  Status resize_locked(records::InodeRecord& rec, uint64_t size, KvBatch& b, LockTable::Guard& g);
  // Gives an empty file layout l (setstripe): the old layout's data goes
  // through an intent too (a generation, so the new layout's writers are
  // never undone by it).
  Status relayout_locked(records::InodeRecord& rec, const records::StoredLayout& l, KvBatch& b,
                         LockTable::Guard& g);
  // What both record: the file's next truncate generation (to size) and
  // its intent, after applying one still pending (inode unlocked).
  Status intend_truncate_locked(records::StoredAttr& a, uint64_t size,
                                const records::StoredLayout* old_layout, KvBatch& b,
                                LockTable::Guard& g);
  // After a truncate's commit is durable, no lock held: applies it now when
  // a session other than session_id holds the file open (see
  // namespace_truncate.cpp). Never fails the truncate.
  void settle_truncate(const records::StoredAttr& a, uint64_t session_id);
  // Builds a new child of a locked, loaded directory into b (the dentry,
  // the child, the updated parent); the caller commits.
  Status add_child_locked(const pb::Credentials& cred, records::InodeRecord& parent,
                          const std::string& name, uint32_t mode, uint64_t rdev,
                          const std::string& symlink, uint64_t op_id, uint64_t session_id,
                          KvBatch& b, records::InodeRecord* child);
  // An addition to `dir` met another session's lease (dir_lease.h): stores
  // the record when it changed (a new recall, or a lease cut after a clock
  // step back), then waits the lease out with no stripe held. OK: the
  // caller tries the operation again.
  Status wait_out_lease(records::InodeRecord& dir, const dir_lease::AddVerdict& v, KvBatch& b,
                        LockTable::Guard& g);
  // create/mknod/mkdir/symlink without an existing-name special case.
  Status make_node(const pb::Credentials& cred, uint64_t parent, const std::string& name,
                   uint32_t mode, uint64_t rdev, const std::string& symlink, uint64_t op_id,
                   uint64_t session_id, pb::EntryReply* out);
  // The inode `existing` names when op_id (non-zero) made it: the resend of
  // a create whose first reply was lost. Nullopt otherwise.
  Result<std::optional<records::InodeRecord>> made_by(uint64_t op_id, uint64_t ino);
  // Removals and renames leave nothing behind that says who did them, so
  // their op ids are kept in the system space for done_op_ttl_ns:
  // op_done says whether op_id (non-zero) was committed.
  Result<bool> op_done(uint64_t op_id);
  // The answer to an unlink/rmdir/rename/link that failed as `st`: OK when
  // its op id is done after all (a resend that raced its original, on this
  // or another MDS, finds the entry already gone or made).
  Status settle_resend(uint64_t op_id, Status st);
  // b holds the check of rec as read; Busy when it changed since (retry).
  Status open_existing_locked(const pb::Credentials& cred, records::InodeRecord& rec,
                              uint32_t flags, uint64_t session_id, LockTable::Guard& g, KvBatch& b);
  Result<pb::Layout> effective_dir_layout(const records::InodeRecord& dir);
  // A new file layout as `want` (a directory default) asks: format 1 over
  // targets without a scheme, chains of the scheme otherwise.
  Result<pb::Layout> place(const pb::Layout& want, uint64_t ino);
  // Walks up from ino; each directory read is a check of `reads`.
  Result<bool> is_ancestor(uint64_t maybe_ancestor, uint64_t ino, KvBatch* reads);
  Status rename_unsettled(const pb::RenameRequest& req);
  Status unlink_unsettled(const pb::UnlinkRequest& req, pb::UnlinkReply* out);
  Status rmdir_unsettled(const pb::UnlinkRequest& req, pb::UnlinkReply* out);
  Status link_unsettled(const pb::LinkRequest& req, pb::EntryReply* out);

 public:
  // Forgets done op ids older than done_op_ttl_ns at `now` (at most
  // `limit` of them); returns how many. Runs by itself every 256 ops.
  Result<size_t> expire_done_ops(uint64_t now, size_t limit = 4096);

 private:
  KvStore* kv_;
  ClusterMap* map_;
  SessionTable* sessions_;
  ObjectTargets* objects_;
  NamespaceOptions opts_;
  uint64_t fs_id_ = 0;
  LockTable locks_;
  std::mutex rename_mu_;
  std::mutex ino_mu_;
  uint64_t next_ino_ = 0;  // guarded by ino_mu_
  uint64_t ino_hwm_ = 0;   // end of the block this process claimed
  std::atomic<uint64_t> done_ops_noted_{0};
};

}  // namespace surge::mds
