// IoAdmission: a semaphore over the data server's IO buffer units, so
// in-flight work never asks the pool for more than it holds, shared fairly
// between the connections that want units at once.
//
// A request takes all the buffer units it needs at once: no request holds
// half its buffers while waiting for the rest (which is how two large
// writes could deadlock on the pool).
//
// Fairness: each connection busy right now (holding or waiting for units)
// has a share of the capacity, capacity / busy connections, never below
// one largest request (so any connection can always run one request of
// any size). A waiter is within its share when its connection's units plus
// its own fit in the share. Waiters within their share are served in
// arrival order, and a later one never overtakes an earlier one that does
// not fit yet (a big request is not starved by a stream of small ones);
// waiters over their share go, in arrival order, only when nobody within
// a share waits. So one connection with many requests, or one holding
// units it cannot use (a stalled peer), never keeps the others waiting for
// more than its share: those are cut off by the transport's stall timeout
// (ServerOptions::bulk_stall_timeout), which gives their units back.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "common/status.h"

namespace surge::ods {

class IoAdmission {
 public:
  // largest_request: the most units one request may need (the floor of a
  // connection's share); clamped to [1, capacity].
  explicit IoAdmission(size_t capacity, size_t largest_request = 1);

  // Units held until destroyed. Move-only.
  class Grant {
   public:
    Grant() = default;
    Grant(IoAdmission* owner, uint64_t connection, size_t units)
        : owner_(owner), connection_(connection), units_(units) {}
    Grant(Grant&& o) noexcept : owner_(o.owner_), connection_(o.connection_), units_(o.units_) {
      o.owner_ = nullptr;
    }
    Grant& operator=(Grant&& o) noexcept;
    Grant(const Grant&) = delete;
    Grant& operator=(const Grant&) = delete;
    ~Grant() { release(); }
    void release();

   private:
    IoAdmission* owner_ = nullptr;
    uint64_t connection_ = 0;
    size_t units_ = 0;
  };

  // Waits for `units` on behalf of `connection` (any id that names the
  // requester, e.g. net::RpcContext::connection_id()) until it is this
  // waiter's turn (see the top of the file) and they are free.
  // InvalidArgument when units exceed the capacity; TimedOut after `wait`.
  Result<Grant> acquire(uint64_t connection, size_t units, std::chrono::milliseconds wait);

  size_t capacity() const { return capacity_; }
  size_t in_use() const;
  size_t waiting() const;
  // Units one connection may hold while others wait, right now.
  size_t share() const;
  // Units `connection` holds right now.
  size_t held_by(uint64_t connection) const;

 private:
  struct Waiter {
    uint64_t ticket;
    uint64_t connection;
    size_t units;
  };
  struct Holder {
    size_t held = 0;
    size_t waiting = 0;  // waiters of this connection in queue_
  };
  void give_back(uint64_t connection, size_t units);
  size_t share_locked() const;
  // The ticket of the waiter to serve next (0 when none waits).
  uint64_t next_locked() const;
  void forget_if_idle(uint64_t connection);

  const size_t capacity_;
  const size_t largest_request_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  size_t free_;
  uint64_t next_ticket_ = 1;
  std::deque<Waiter> queue_;  // oldest first
  std::unordered_map<uint64_t, Holder> busy_;  // connections holding or waiting
};

}  // namespace surge::ods
