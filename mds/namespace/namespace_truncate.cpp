// Truncates (setattr of the size, open with O_TRUNC) and their intents.
//
// A file's truncate is one commit and no data-server call: the
// inode's record takes the new size, a new truncate generation
// (truncate_seq + 1) and the size it set, and an intent record {seq, size}
// goes into the same batch. The leader's pass (cluster/truncate_intents.h)
// sends each intent's truncate to every chunk and then deletes it. Clients
// learn the pair with the reply or at open (close-to-open) and carry it in
// every chunk request, so the data servers order the truncate before every
// write that follows it, however late the pass comes (ods.proto, ChunkRef;
// docs/redundancy.md, "Truncate generations").
//
// One intent per file: a chunk that missed two truncates would need both
// sizes, and requests carry one. So a truncate that finds the previous one
// still pending applies it first, with the inode unlocked (as every
// data-server call is), then records its own.
//
// A writer in another session that opened the file before the truncate
// does not know the new generation (it learns it at its next open): were
// the truncate applied by the pass after that writer's next write, the
// write would be cut. So when another session holds the file open, the
// truncate is applied before the reply, as it always was (settle_truncate);
// the check comes after the commit, and an open for writing through
// another MDS reads the generation again once its open is stored
// (namespace.cpp, open_existing_locked), so neither can miss the other.
//
// Every layout format works so: chained chunks keep the generation they
// applied in the chunk index, legacy (format 1) objects in a record beside
// the object (ods/store/object_generation.cpp).
//
// A setstripe of a file (empty) is a generation as well, to size 0, whose
// intent also names the old layout: its chunks are removed by the pass,
// each removal carrying the generation, so a chunk of the same name the
// new layout's writers made meanwhile is spared (relayout_locked).
#include "common/file_layout.h"
#include "common/log.h"
#include "mds/cluster/file_chunks.h"
#include "mds/cluster/truncate_intents.h"
#include "mds/namespace/keys.h"
#include "mds/namespace/namespace.h"
#include "mds/namespace/op_limits.h"
#include "mds/namespace/record_wire.h"

namespace surge::mds {
namespace {

std::string encode(const records::TruncateIntent& t) {
  std::string s;
  t.SerializeToString(&s);
  return s;
}

}  // namespace

Status Namespace::resize_locked(records::InodeRecord& rec, uint64_t size, KvBatch& b,
                                LockTable::Guard& g) {
  records::StoredAttr* a = rec.mutable_attr();
  if (!a->has_layout()) {  // no data anywhere
    a->set_size(size);
    return Status::OK();
  }
  SURGE_RETURN_IF_ERROR(intend_truncate_locked(*a, size, nullptr, b, g));
  a->set_size(size);
  return Status::OK();
}

Status Namespace::relayout_locked(records::InodeRecord& rec, const records::StoredLayout& l,
                                  KvBatch& b, LockTable::Guard& g) {
  records::StoredAttr* a = rec.mutable_attr();
  if (a->has_layout()) {
    const records::StoredLayout old = a->layout();
    SURGE_RETURN_IF_ERROR(intend_truncate_locked(*a, a->size(), &old, b, g));
  }
  *a->mutable_layout() = l;
  return Status::OK();
}

Status Namespace::intend_truncate_locked(records::StoredAttr& a, uint64_t size,
                                         const records::StoredLayout* old_layout, KvBatch& b,
                                         LockTable::Guard& g) {
  const std::string key = keys::truncate_intent(a.ino());
  SURGE_ASSIGN_OR_RETURN(auto pending, kv_->get(Space::kSystem, key));
  if (pending) {
    records::TruncateIntent t;
    if (!t.ParseFromString(*pending)) {
      return Status::Corruption("truncate intent of " + ino_str(a.ino()) + " does not parse");
    }
    // Its commit may not be synced yet (a group commit after the lock
    // went): a generation a data server applied must never be lost, or a
    // later truncate would reuse its number.
    SURGE_RETURN_IF_ERROR(kv_->make_durable());
    SURGE_RETURN_IF_ERROR(g.unlocked([&] {
      return apply_truncate_intent(t, a, *map_, *objects_)
          .WithContext("applying truncate " + std::to_string(t.seq()) + " of " + ino_str(a.ino()) +
                       " before the next");
    }));
  }
  records::TruncateIntent next;
  next.set_seq(a.truncate_seq() + 1);
  next.set_size(size);
  if (old_layout != nullptr) *next.mutable_old_layout() = *old_layout;
  a.set_truncate_seq(next.seq());
  a.set_truncate_size(size);
  b.put(Space::kSystem, key, encode(next));
  return Status::OK();
}

void Namespace::settle_truncate(const records::StoredAttr& a, uint64_t session_id) {
  if (!a.has_layout()) return;
  auto others = sessions_->held_by_others(a.ino(), session_id);
  if (others.ok() && !*others) return;
  // The intent as committed (a setstripe's names the old layout too).
  auto stored = kv_->get(Space::kSystem, keys::truncate_intent(a.ino()));
  if (!stored.ok() || !*stored) return;  // the pass or a later truncate applies it
  records::TruncateIntent t;
  if (!t.ParseFromString(**stored) || t.seq() != a.truncate_seq()) return;
  Status st = apply_truncate_intent(t, a, *map_, *objects_);
  if (st.ok()) st = finish_truncate_intent(a.ino(), t);
  if (!st.ok() && st.code() != Code::kBusy) {
    SLOG_WARN(
        "truncate {} of {} to {} bytes, held open elsewhere: {}; the background pass "
        "applies it",
        t.seq(), ino_str(a.ino()), t.size(), st.ToString());
  }
}

Result<std::vector<Namespace::PendingTruncate>> Namespace::list_truncate_intents(size_t max) {
  std::vector<PendingTruncate> out;
  Status bad;
  SURGE_RETURN_IF_ERROR(kv_->scan(
      Space::kSystem, keys::kTruncateIntentPrefix, keys::kTruncateIntentEnd,
      [&](std::string_view k, std::string_view v) {
        if (k.size() != keys::kTruncateIntentPrefix.size() + 8) return true;
        PendingTruncate p;
        p.ino = keys::get_be64(k.substr(keys::kTruncateIntentPrefix.size()));
        if (!p.intent.ParseFromArray(v.data(), static_cast<int>(v.size()))) {
          bad = Status::Corruption("truncate intent of " + ino_str(p.ino) + " does not parse");
          return false;
        }
        out.push_back(std::move(p));
        return out.size() < max;
      }));
  SURGE_RETURN_IF_ERROR(bad);
  return out;
}

Status Namespace::finish_truncate_intent(uint64_t ino, const records::TruncateIntent& applied) {
  KvBatch b;
  const std::string key = keys::truncate_intent(ino);
  b.check(Space::kSystem, key, encode(applied));
  b.del(Space::kSystem, key);
  return kv_->commit(b);
}

}  // namespace surge::mds
