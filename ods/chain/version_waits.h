// VersionWaits: lets a chained update wait, without holding its chunk's
// update order, until some chunk record changed (a version applied or
// committed, a whole-chunk send ended). A head sends a chunk's updates one
// after another without waiting for replies (ChainedChunks::write), so a
// member can take update v + 1 before the thread holding v took the order;
// it waits here for v instead of calling it a gap at once. One generation
// for all chunks: a waiter re-reads its own record after every change
// and waits again, and waits are rare and short.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace surge::ods {

class VersionWaits {
 public:
  using Clock = std::chrono::steady_clock;

  // Read under the chunk's update order, before letting it go to wait.
  uint64_t generation() {
    std::lock_guard lk(mu_);
    return generation_;
  }
  // After a record changed (with its update order still held).
  void changed() {
    {
      std::lock_guard lk(mu_);
      ++generation_;
    }
    cv_.notify_all();
  }
  // Until the generation moved past `seen` (true) or the deadline (false).
  bool wait_past(uint64_t seen, Clock::time_point deadline) {
    std::unique_lock lk(mu_);
    return cv_.wait_until(lk, deadline, [&] { return generation_ != seen; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
};

}  // namespace surge::ods
