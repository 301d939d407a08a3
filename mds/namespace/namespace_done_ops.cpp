// Op ids of finished unlink/rmdir/rename/link requests, so a resend after a
// lost reply answers OK again instead of ENOENT/EEXIST (see namespace.h).
//
// Two keys per op in the system space, written in the op's own batch (so
// the record exists exactly when the op does): r/<op id> -> when, for the
// lookup, and rt/<when><op id>, so expiry walks the oldest first and never
// more than it deletes.
#include <algorithm>
#include <string>

#include "common/log.h"
#include "mds/namespace/namespace.h"

namespace surge::mds {

Result<bool> Namespace::op_done(uint64_t op_id) {
  if (op_id == 0) return false;
  SURGE_ASSIGN_OR_RETURN(auto v, kv_->get(Space::kSystem, keys::done_op(op_id)));
  return v.has_value();
}

Status Namespace::settle_resend(uint64_t op_id, Status st) {
  if (st.ok() || op_id == 0) return st;
  auto done = op_done(op_id);
  if (done.ok() && *done) return Status::OK();
  return st;
}

Status Namespace::commit_done_op(KvBatch& b, LockTable::Guard& g, uint64_t op_id, uint64_t now) {
  if (op_id == 0) return commit_then_sync(b, g);
  std::string when;
  keys::put_be64(when, now);
  // Checked absent: of an op and its resend applied at once (by two MDS
  // processes), one commits and the other fails here and answers OK.
  b.check(Space::kSystem, keys::done_op(op_id), std::nullopt);
  b.put(Space::kSystem, keys::done_op(op_id), when);
  b.put(Space::kSystem, keys::done_op_by_time(now, op_id), "");
  SURGE_RETURN_IF_ERROR(commit_then_sync(b, g));
  if (done_ops_noted_.fetch_add(1, std::memory_order_relaxed) % 256 == 255) {
    auto n = expire_done_ops(now);
    if (!n.ok()) SLOG_WARN("expiring done op ids: {}", n.status().ToString());
  }
  return Status::OK();
}

Result<size_t> Namespace::expire_done_ops(uint64_t now, size_t limit) {
  if (now < opts_.done_op_ttl_ns) return size_t{0};
  std::string end(keys::kDoneOpByTimePrefix);
  keys::put_be64(end, now - opts_.done_op_ttl_ns);
  const size_t key_size = keys::kDoneOpByTimePrefix.size() + 16;
  // Two deletes per id; the ids need not go together, so a backlog goes in
  // batches the store accepts (etcd: --max-txn-ops) rather than in one
  // batch that would fail every time.
  const size_t per_batch = std::max<size_t>(1, std::min(limit, kv_->max_batch_ops() / 2));
  size_t total = 0;
  while (total < limit) {
    KvBatch b;
    size_t n = 0;
    const size_t want = std::min(per_batch, limit - total);
    SURGE_RETURN_IF_ERROR(kv_->scan(Space::kSystem, keys::kDoneOpByTimePrefix, end,
                                    [&](std::string_view k, std::string_view) {
                                      if (k.size() == key_size) {
                                        const uint64_t op = keys::get_be64(k.substr(key_size - 8));
                                        b.del(Space::kSystem, keys::done_op(op));
                                      }
                                      b.del(Space::kSystem, std::string(k));
                                      return ++n < want;
                                    }));
    if (n == 0) break;
    // Not synced: losing an expiry to a crash only keeps ids a little longer.
    SURGE_RETURN_IF_ERROR(kv_->commit(b, /*durable=*/false));
    total += n;
    if (n < want) break;
  }
  return total;
}

}  // namespace surge::mds
