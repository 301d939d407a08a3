// The truncate intents' pass; see truncate_intents.h.
#include "mds/cluster/truncate_intents.h"

#include "common/log.h"
#include "mds/cluster/file_chunks.h"
#include "mds/namespace/record_wire.h"

namespace surge::mds {

Status apply_truncate_intent(const records::TruncateIntent& t, const records::StoredAttr& a,
                             ClusterMap& map, ObjectTargets& objects) {
  if (t.has_old_layout()) {
    SURGE_RETURN_IF_ERROR(
        remove_file_data(to_wire(t.old_layout()), a.ino(), map, objects, t.seq())
            .WithContext("removing the old layout of inode " + std::to_string(a.ino())));
  }
  if (!a.has_layout()) return Status::OK();
  return truncate_file_data(to_wire(a.layout()), a.ino(), t.size(), map, objects, t.seq());
}

Result<TruncateStats> apply_truncate_intents(Namespace& ns, ClusterMap& map, ObjectTargets& objects,
                                             size_t max) {
  TruncateStats st;
  SURGE_ASSIGN_OR_RETURN(auto pending, ns.list_truncate_intents(max));
  // An intent read before its commit was synced (one MDS on RocksDB syncs
  // in groups) is made durable before any data server applies it: a
  // generation applied and then lost would be handed out again.
  if (!pending.empty()) SURGE_RETURN_IF_ERROR(ns.kv()->make_durable());
  for (const Namespace::PendingTruncate& p : pending) {
    records::InodeRecord rec;
    SURGE_ASSIGN_OR_RETURN(bool found, ns.inode_record(p.ino, &rec));
    if (found) {
      Status s = apply_truncate_intent(p.intent, rec.attr(), map, objects);
      if (!s.ok()) {
        ++st.deferred;
        if (s.code() == Code::kUnavailable) {
          SLOG_DEBUG("truncate {} of inode {} to {} bytes: {}; retrying later", p.intent.seq(),
                     p.ino, p.intent.size(), s.ToString());
        } else {
          SLOG_WARN("truncate {} of inode {} to {} bytes: {}; retrying later", p.intent.seq(),
                    p.ino, p.intent.size(), s.ToString());
        }
        continue;
      }
    }
    Status done = ns.finish_truncate_intent(p.ino, p.intent);
    if (done.code() == Code::kBusy) continue;  // a newer truncate's intent: the next pass
    SURGE_RETURN_IF_ERROR_CTX(done, "deleting truncate intent " + std::to_string(p.intent.seq()) +
                                        " of inode " + std::to_string(p.ino));
    ++st.applied;
  }
  return st;
}

}  // namespace surge::mds
