#include "client/lib/inode_table.h"

#include <fcntl.h>

namespace surge::client {

std::shared_ptr<InodeState> InodeTable::attach(const Attr& a, const FileLayout& layout, int flags,
                                               const Caller& c) {
  std::shared_ptr<InodeState> st;
  {
    std::lock_guard lk(mu_);
    auto& slot = inodes_[a.ino];
    if (!slot) {
      slot = std::make_shared<InodeState>();
      slot->ino = a.ino;
    }
    st = slot;
    std::lock_guard slk(st->mu);
    st->opens++;
  }
  std::lock_guard lk(st->mu);
  // An open's reply read before our own truncate committed must not take
  // its generation back: our writes after it would not cut the chunks.
  const uint64_t seq = st->layout.truncate_seq, cut = st->layout.truncate_size;
  st->layout = layout;
  if (seq > layout.truncate_seq) {
    st->layout.truncate_seq = seq;
    st->layout.truncate_size = cut;
  }
  st->mds_size = a.size;
  st->mode.store(a.mode, std::memory_order_relaxed);
  if (flags & O_TRUNC) {
    st->written_end = 0;
    st->reported_end = 0;
  }
  st->last_caller = c;
  st->last_flags = flags;
  return st;
}

void InodeTable::release(const std::shared_ptr<InodeState>& st) {
  bool last;
  {
    std::lock_guard lk(st->mu);
    last = --st->opens == 0;
  }
  if (!last) return;
  std::lock_guard lk(mu_);
  auto it = inodes_.find(st->ino);
  if (it != inodes_.end() && it->second == st) {
    std::lock_guard slk(st->mu);
    if (st->opens == 0) inodes_.erase(it);  // unless an open came meanwhile
  }
}

std::shared_ptr<InodeState> InodeTable::find(Ino ino) {
  std::lock_guard lk(mu_);
  auto it = inodes_.find(ino);
  return it == inodes_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<InodeState>> InodeTable::all() {
  std::vector<std::shared_ptr<InodeState>> out;
  std::lock_guard lk(mu_);
  out.reserve(inodes_.size());
  for (auto& [ino, st] : inodes_) out.push_back(st);
  return out;
}

Attr InodeTable::merge_local(Attr a) {
  std::shared_ptr<InodeState> st = find(a.ino);
  if (!st) return a;
  std::lock_guard lk(st->mu);
  st->mds_size = a.size;
  if (st->written_end > a.size) a.size = st->written_end;
  return a;
}

}  // namespace surge::client
