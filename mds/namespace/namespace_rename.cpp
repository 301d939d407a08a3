// Namespace::rename: atomic, across directories, with RENAME_NOREPLACE and
// RENAME_EXCHANGE, as Linux's rename(2)/renameat2(2) behave. Its batch
// checks every entry and record it read, and, when a directory moves to
// another parent, every ancestor the "not into its own subtree" walk read:
// of two renames that would each make the other's walk wrong (a into b/x
// and b into a/y, through two MDS processes), one fails its checks, reads
// again and finds the loop. Moving an entry to another directory also takes
// the rename mutex (Linux's s_vfs_rename_mutex), so within one process such
// renames queue instead of failing each other; then the stripes of both
// parents and both entries' inodes, in stripe order.
#include <sys/stat.h>

#include <map>
#include <set>

#include "mds/namespace/errors.h"
#include "mds/namespace/namespace.h"
#include "mds/namespace/op_limits.h"
#include "mds/namespace/permissions.h"
#include "net/proto/mds_methods.h"

namespace surge::mds {

namespace {
constexpr uint32_t kRenameNoReplace = 1;
constexpr uint32_t kRenameExchange = 2;
}  // namespace

Result<bool> Namespace::is_ancestor(uint64_t maybe_ancestor, uint64_t ino, KvBatch* reads) {
  uint64_t cur = ino;
  for (int depth = 0; depth < 1 << 16; ++depth) {
    if (cur == maybe_ancestor) return true;
    if (cur == proto::mds::kRootIno) return false;
    records::InodeRecord r;
    SURGE_ASSIGN_OR_RETURN(bool found, load(cur, &r, reads));
    if (!found) return false;
    cur = r.parent();
  }
  return Status::Corruption("directory " + std::to_string(ino) + " has a parent cycle");
}

Status Namespace::rename(const pb::RenameRequest& req) {
  return settle_resend(req.op_id(), rename_unsettled(req));
}

Status Namespace::rename_unsettled(const pb::RenameRequest& req) {
  const uint32_t flags = req.flags();
  if ((flags & ~(kRenameNoReplace | kRenameExchange)) != 0) {
    return Status::InvalidArgument("rename: unknown flags " + std::to_string(flags));
  }
  if (flags == (kRenameNoReplace | kRenameExchange)) {
    return Status::InvalidArgument("rename: RENAME_NOREPLACE and RENAME_EXCHANGE together");
  }
  SURGE_RETURN_IF_ERROR(validate_name(req.old_name()));
  SURGE_RETURN_IF_ERROR(validate_name(req.new_name()));
  const bool noreplace = flags & kRenameNoReplace;
  const bool exchange = flags & kRenameExchange;
  const uint64_t oldp = req.old_parent(), newp = req.new_parent();
  const bool cross = oldp != newp;
  const auto& cred = req.cred();
  const std::string what = "rename '" + req.old_name() + "' in directory " + std::to_string(oldp) +
                           " to '" + req.new_name() + "' in directory " + std::to_string(newp);

  std::unique_lock<std::mutex> rl;
  if (cross) rl = std::unique_lock<std::mutex>(rename_mu_);

  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    conflict_backoff(attempt);
    // Again on each attempt: a conflict may have been this op's resend.
    SURGE_ASSIGN_OR_RETURN(bool resent, op_done(req.op_id()));
    if (resent) return Status::OK();  // it happened; its reply was lost
    {
      SURGE_ASSIGN_OR_RETURN(auto op0, load_dir(oldp, "rename"));
      SURGE_RETURN_IF_ERROR(check_access(cred, op0.attr(), kMayExec, "rename"));
      SURGE_ASSIGN_OR_RETURN(auto np0, load_dir(newp, "rename"));
      SURGE_RETURN_IF_ERROR(check_access(cred, np0.attr(), kMayExec, "rename"));
    }
    SURGE_ASSIGN_OR_RETURN(auto s0, find(oldp, req.old_name()));
    if (!s0) return Status::NotFound(what + ": no source");
    SURGE_ASSIGN_OR_RETURN(auto t0, find(newp, req.new_name()));
    auto g = locks_.lock({oldp, newp, s0->child, t0 ? t0->child : 0});
    KvBatch b;  // every read from here on is a check of it
    SURGE_ASSIGN_OR_RETURN(auto s, find(oldp, req.old_name(), &b));
    SURGE_ASSIGN_OR_RETURN(auto t, find(newp, req.new_name(), &b));
    if (!s || s->child != s0->child || t.has_value() != t0.has_value() ||
        (t && t->child != t0->child)) {
      continue;  // changed before we locked
    }

    std::map<uint64_t, records::InodeRecord> recs;
    auto rec = [&](uint64_t ino) -> Result<records::InodeRecord*> {
      auto it = recs.find(ino);
      if (it != recs.end()) return &it->second;
      SURGE_ASSIGN_OR_RETURN(auto r, load_existing(ino, "rename", &b));
      return &recs.emplace(ino, std::move(r)).first->second;
    };
    SURGE_ASSIGN_OR_RETURN(records::InodeRecord * OP, rec(oldp));
    SURGE_ASSIGN_OR_RETURN(records::InodeRecord * NP, rec(newp));
    if (!S_ISDIR(OP->attr().mode()) || !S_ISDIR(NP->attr().mode())) {
      return err::NotDirectory(what + ": a parent is not a directory");
    }
    SURGE_RETURN_IF_ERROR(check_access(cred, OP->attr(), kMayWrite | kMayExec, "rename"));
    SURGE_RETURN_IF_ERROR(check_access(cred, NP->attr(), kMayWrite | kMayExec, "rename"));
    if (noreplace && t) return Status::AlreadyExists(what + ": target exists");
    if (exchange && !t) return Status::NotFound(what + ": no target to exchange with");
    if (t && t->child == s->child) return Status::OK();  // same inode: nothing to do
    SURGE_ASSIGN_OR_RETURN(records::InodeRecord * S, rec(s->child));
    records::InodeRecord* T = nullptr;
    if (t) {
      SURGE_ASSIGN_OR_RETURN(T, rec(t->child));
    }
    SURGE_RETURN_IF_ERROR(check_sticky(cred, OP->attr(), S->attr(), "rename"));
    if (T) SURGE_RETURN_IF_ERROR(check_sticky(cred, NP->attr(), T->attr(), "rename"));
    const bool s_dir = S_ISDIR(S->attr().mode());
    const bool t_dir = T && S_ISDIR(T->attr().mode());
    if (T && !exchange) {
      if (s_dir && !t_dir) return err::NotDirectory(what + ": target is not a directory");
      if (!s_dir && t_dir) return err::IsDirectory(what + ": target is a directory");
      if (t_dir) {  // T's record is checked: an entry added since rewrites it
        SURGE_ASSIGN_OR_RETURN(bool empty, dir_empty(T->attr().ino()));
        if (!empty) return err::NotEmpty(what + ": target directory is not empty");
      }
    }
    // The walk reads the ancestors one by one: another MDS's rename between
    // two reads can show a loop that never existed at one instant. A loop
    // is refused only once the batch's checks alone (it has no ops yet)
    // commit: everything read was still so together.
    bool loop = false;
    if (cross && s_dir) {
      SURGE_ASSIGN_OR_RETURN(loop, is_ancestor(S->attr().ino(), newp, &b));
      if (!loop) {
        SURGE_RETURN_IF_ERROR(check_access(cred, S->attr(), kMayWrite, "rename (updating '..')"));
      }
    }
    if (!loop && cross && exchange && t_dir) {
      SURGE_ASSIGN_OR_RETURN(loop, is_ancestor(T->attr().ino(), oldp, &b));
      if (!loop) {
        SURGE_RETURN_IF_ERROR(check_access(cred, T->attr(), kMayWrite, "rename (updating '..')"));
      }
    }
    if (loop) {
      Status st = kv_->commit(b, false);
      if (conflicted(st)) continue;
      SURGE_RETURN_IF_ERROR(st.WithContext(what + ": confirming the ancestors read"));
      return Status::InvalidArgument(what + ": would move a directory into itself");
    }

    // A new name in newp (an exchange adds none): another session's lease
    // on it is recalled and waited out first (dir_lease.h).
    if (!exchange) {
      const dir_lease::AddVerdict lease =
          dir_lease::before_add(*NP, req.session_id(), dir_lease::now_ms(), opts_.dir_lease_ms);
      if (lease.wait_until_ms != 0) {
        if (rl.owns_lock()) rl.unlock();
        SURGE_RETURN_IF_ERROR(wait_out_lease(*NP, lease, b, g));
        if (cross) rl.lock();
        continue;
      }
    }
    const uint64_t now = now_ns();
    const std::string skey = keys::dentry(oldp, req.old_name());
    const std::string tkey = keys::dentry(newp, req.new_name());
    std::set<uint64_t> deleted;
    if (exchange) {
      b.put(Space::kDentries, skey, keys::encode_dentry(*t));
      b.put(Space::kDentries, tkey, keys::encode_dentry(*s));
      if (cross && s_dir) {
        S->set_parent(newp);
        OP->mutable_attr()->set_nlink(OP->attr().nlink() - 1);
        NP->mutable_attr()->set_nlink(NP->attr().nlink() + 1);
      }
      if (cross && t_dir) {
        T->set_parent(oldp);
        NP->mutable_attr()->set_nlink(NP->attr().nlink() - 1);
        OP->mutable_attr()->set_nlink(OP->attr().nlink() + 1);
      }
      T->mutable_attr()->set_ctime_ns(now);
    } else {
      b.del(Space::kDentries, skey);
      b.put(Space::kDentries, tkey, keys::encode_dentry(*s));
      if (T) {
        if (t_dir) {
          deleted.insert(T->attr().ino());
          b.del(Space::kInodes, keys::inode(T->attr().ino()));
          b.count(Space::kInodes, -1);  // loaded with a check: present
          SURGE_RETURN_IF_ERROR(delete_xattrs(b, T->attr().ino()));
          NP->mutable_attr()->set_nlink(NP->attr().nlink() - 1);
        } else {
          T->mutable_attr()->set_nlink(T->attr().nlink() - 1);
          T->mutable_attr()->set_ctime_ns(now);
          if (T->attr().nlink() == 0) b.put(Space::kSystem, keys::orphan(T->attr().ino()), "");
        }
      }
      if (cross && s_dir) {
        S->set_parent(newp);
        OP->mutable_attr()->set_nlink(OP->attr().nlink() - 1);
        NP->mutable_attr()->set_nlink(NP->attr().nlink() + 1);
      }
    }
    S->mutable_attr()->set_ctime_ns(now);
    for (auto* p : {OP, NP}) {
      p->mutable_attr()->set_mtime_ns(now);
      p->mutable_attr()->set_ctime_ns(now);
    }
    for (auto& [ino, r] : recs) {
      if (deleted.count(ino) == 0) put_inode(b, r);
    }
    Status st = commit_done_op(b, g, req.op_id(), now);
    if (conflicted(st)) continue;
    return st;
  }
  return Status::Busy(what + ": entries keep changing");
}

}  // namespace surge::mds
