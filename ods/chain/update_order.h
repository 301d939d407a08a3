// UpdateOrder: one lock per chunk, held while an update of it is given its
// version, stored and forwarded down the chain (and while a resync sends
// it whole), so a chunk's updates reach every member in version order and
// nothing newer overtakes a chunk being resynced. Entries exist only while
// someone holds or waits for them. Per chunk, never striped: two chunks
// sharing a lock could wait on each other across data servers.
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "ods/store/chunk_index.h"

namespace surge::ods {

class UpdateOrder {
  struct Entry {
    std::mutex mu;
    int users = 0;
  };

 public:
  class Guard {
   public:
    Guard(UpdateOrder& o, const ChunkKey& k) : order_(o), key_(k) {
      {
        std::lock_guard lk(order_.mu_);
        auto& e = order_.entries_[key_];
        if (!e) e = std::make_unique<Entry>();
        ++e->users;
        entry_ = e.get();
      }
      entry_->mu.lock();
    }
    ~Guard() {
      entry_->mu.unlock();
      std::lock_guard lk(order_.mu_);
      if (--entry_->users == 0) order_.entries_.erase(key_);
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    UpdateOrder& order_;
    ChunkKey key_;
    Entry* entry_;
  };

  Guard lock(const ChunkKey& k) { return Guard(*this, k); }

 private:
  std::mutex mu_;
  std::map<ChunkKey, std::unique_ptr<Entry>> entries_;
};

}  // namespace surge::ods
