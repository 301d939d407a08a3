// ResyncSends (see resync_sends.h).
#include "ods/chain/resync_sends.h"

#include <algorithm>
#include <atomic>
#include <chrono>

namespace surge::ods {

ResyncSends::ResyncSends(std::function<uint64_t(uint32_t)> current_version, size_t prune_above)
    : current_version_(std::move(current_version)),
      prune_above_(prune_above),
      next_prune_(prune_above) {}

Status ResyncSends::admit(const ChunkKey& key, uint32_t chain_id, uint64_t chain_version,
                          uint64_t send_id, bool begin, const std::string& what) {
  if (send_id == 0) return Status::OK();
  std::lock_guard lk(mu_);
  auto it = sends_.find(key);
  const bool same_version = it != sends_.end() && it->second.chain_id == chain_id &&
                            it->second.chain_version == chain_version;
  if (same_version && send_id < it->second.send_id) {
    return Status::StaleChain(what + ": a piece of send " + std::to_string(send_id) +
                              ", cut short, arrived after send " +
                              std::to_string(it->second.send_id) +
                              " of the chunk began under the same chain version; dropped");
  }
  if (same_version && send_id == it->second.send_id) return Status::OK();
  if (!begin) {
    return Status::StaleChain(what + ": a piece of send " + std::to_string(send_id) +
                              " whose first piece this member never took; dropped");
  }
  if (it == sends_.end()) {
    if (sends_.size() >= next_prune_) prune_locked();
    sends_.emplace(key, Entry{chain_id, chain_version, send_id});
  } else {
    it->second = Entry{chain_id, chain_version, send_id};
  }
  return Status::OK();
}

size_t ResyncSends::size() const {
  std::lock_guard lk(mu_);
  return sends_.size();
}

void ResyncSends::prune_locked() {
  for (auto it = sends_.begin(); it != sends_.end();) {
    if (current_version_(it->second.chain_id) != it->second.chain_version) {
      it = sends_.erase(it);
    } else {
      ++it;
    }
  }
  // A resync of many chunks under one version keeps them all; the next
  // pass waits until the ledger doubled, so pruning stays linear overall.
  next_prune_ = std::max(prune_above_, 2 * sends_.size());
}

uint64_t next_resync_send_id() {
  static std::atomic<uint64_t> last{0};
  const uint64_t now =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
  uint64_t prev = last.load();
  uint64_t next;
  do {
    next = std::max(prev + 1, now);
  } while (!last.compare_exchange_weak(prev, next));
  return next;
}

}  // namespace surge::ods
