// LockTable: per-inode mutual exclusion for namespace changes. Inodes hash
// onto a fixed set of mutex stripes; an operation locks every inode it will
// modify (directories whose entries change, inodes whose record changes)
// in ascending stripe order, so two operations can never wait on each other
// in a cycle (deadlock free). Unrelated inodes rarely share a stripe, so
// unrelated operations run in parallel.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <vector>

namespace surge::mds {

class LockTable {
 public:
  static constexpr size_t kStripes = 4096;

  // Holds the stripes of a set of inodes until destroyed.
  class Guard {
   public:
    Guard() = default;
    Guard(Guard&& o) noexcept : table_(o.table_), held_(std::move(o.held_)) { o.held_.clear(); }
    Guard& operator=(Guard&&) = delete;
    Guard(const Guard&) = delete;
    ~Guard() { release(); }
    void release() {
      for (auto it = held_.rbegin(); it != held_.rend(); ++it) table_->stripes_[*it].unlock();
      held_.clear();
    }
    // Runs fn with the stripes released and takes them again after (in
    // stripe order): for a call to a data server, which must not hold up
    // the other inodes of these stripes while it waits. What was read
    // under the lock may change meanwhile: the caller's batch checks it.
    template <typename Fn>
    auto unlocked(Fn&& fn) -> decltype(fn()) {
      std::vector<size_t> held = held_;
      release();
      auto result = fn();
      for (size_t s : held) table_->stripes_[s].lock();
      held_ = std::move(held);
      return result;
    }

   private:
    friend class LockTable;
    LockTable* table_ = nullptr;
    std::vector<size_t> held_;
  };

  // Inode 0 means "none" and is skipped.
  Guard lock(std::initializer_list<uint64_t> inos) {
    Guard g;
    g.table_ = this;
    for (uint64_t ino : inos) {
      if (ino != 0) g.held_.push_back(stripe_of(ino));
    }
    std::sort(g.held_.begin(), g.held_.end());
    g.held_.erase(std::unique(g.held_.begin(), g.held_.end()), g.held_.end());
    for (size_t s : g.held_) stripes_[s].lock();
    return g;
  }

 private:
  static size_t stripe_of(uint64_t ino) {
    uint64_t h = ino * 0x9e3779b97f4a7c15ull;
    return static_cast<size_t>(h >> 52) % kStripes;
  }
  std::array<std::mutex, kStripes> stripes_;
};

}  // namespace surge::mds
