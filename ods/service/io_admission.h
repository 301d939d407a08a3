// IoAdmission: a first-come-first-served semaphore over the data server's
// IO buffers, so in-flight work never asks the pool for more than it holds.
//
// A request takes all the buffer units it needs at once, in arrival order:
// no request holds half its buffers while waiting for the rest (which is
// how two large writes could deadlock on the pool), and a big request is
// not starved by a stream of small ones overtaking it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>

#include "common/status.h"

namespace surge::ods {

class IoAdmission {
 public:
  explicit IoAdmission(size_t capacity) : capacity_(capacity), free_(capacity) {}

  // Units held until destroyed. Move-only.
  class Grant {
   public:
    Grant() = default;
    Grant(IoAdmission* owner, size_t units) : owner_(owner), units_(units) {}
    Grant(Grant&& o) noexcept : owner_(o.owner_), units_(o.units_) { o.owner_ = nullptr; }
    Grant& operator=(Grant&& o) noexcept;
    Grant(const Grant&) = delete;
    Grant& operator=(const Grant&) = delete;
    ~Grant() { release(); }
    void release();

   private:
    IoAdmission* owner_ = nullptr;
    size_t units_ = 0;
  };

  // Waits until every earlier caller was served and `units` are free.
  // InvalidArgument when units exceed the capacity; TimedOut after `wait`.
  Result<Grant> acquire(size_t units, std::chrono::milliseconds wait);

  size_t capacity() const { return capacity_; }
  size_t in_use() const;
  size_t waiting() const;

 private:
  void give_back(size_t units);

  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  size_t free_;
  uint64_t next_ticket_ = 0;
  std::deque<uint64_t> queue_;  // tickets of waiters, oldest first
};

}  // namespace surge::ods
