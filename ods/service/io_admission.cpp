// IoAdmission: fair admission over buffer units (see io_admission.h).
#include "ods/service/io_admission.h"

#include <algorithm>
#include <string>

namespace surge::ods {

IoAdmission::IoAdmission(size_t capacity, size_t largest_request)
    : capacity_(capacity),
      largest_request_(std::clamp<size_t>(largest_request, 1, std::max<size_t>(capacity, 1))),
      free_(capacity) {}

IoAdmission::Grant& IoAdmission::Grant::operator=(Grant&& o) noexcept {
  if (this != &o) {
    release();
    owner_ = o.owner_;
    connection_ = o.connection_;
    units_ = o.units_;
    o.owner_ = nullptr;
  }
  return *this;
}

void IoAdmission::Grant::release() {
  if (owner_ != nullptr) owner_->give_back(connection_, units_);
  owner_ = nullptr;
}

size_t IoAdmission::share_locked() const {
  const size_t n = std::max<size_t>(busy_.size(), 1);
  return std::max(largest_request_, (capacity_ + n - 1) / n);
}

uint64_t IoAdmission::next_locked() const {
  if (queue_.empty()) return 0;
  const size_t share = share_locked();
  for (const Waiter& w : queue_) {
    const size_t held = busy_.at(w.connection).held;
    // A connection holding nothing is always within its share, whatever
    // the request's size: it must be able to run.
    if (held == 0 || held + w.units <= share) return w.ticket;
  }
  return queue_.front().ticket;  // everyone is over: the oldest goes
}

void IoAdmission::forget_if_idle(uint64_t connection) {
  auto it = busy_.find(connection);
  if (it != busy_.end() && it->second.held == 0 && it->second.waiting == 0) busy_.erase(it);
}

Result<IoAdmission::Grant> IoAdmission::acquire(uint64_t connection, size_t units,
                                                std::chrono::milliseconds wait) {
  if (units > capacity_) {
    return Status::InvalidArgument("IO needs " + std::to_string(units) + " buffers, the server has " +
                                   std::to_string(capacity_));
  }
  std::unique_lock lk(mu_);
  const uint64_t ticket = next_ticket_++;
  queue_.push_back({ticket, connection, units});
  busy_[connection].waiting++;
  auto my_turn = [&] { return free_ >= units && next_locked() == ticket; };
  const bool go = cv_.wait_for(lk, wait, my_turn);
  queue_.erase(std::find_if(queue_.begin(), queue_.end(),
                            [&](const Waiter& w) { return w.ticket == ticket; }));
  Holder& me = busy_[connection];
  me.waiting--;
  if (!go) {
    forget_if_idle(connection);
    cv_.notify_all();  // the next in line may be able to go now
    return Status::TimedOut("waited " + std::to_string(wait.count()) + " ms for " +
                            std::to_string(units) + " IO buffers (" + std::to_string(free_) +
                            " of " + std::to_string(capacity_) + " free, " +
                            std::to_string(queue_.size()) + " requests waiting)");
  }
  me.held += units;
  free_ -= units;
  cv_.notify_all();  // the next waiter may fit in what is left
  return Grant(this, connection, units);
}

void IoAdmission::give_back(uint64_t connection, size_t units) {
  {
    std::lock_guard lk(mu_);
    free_ += units;
    auto it = busy_.find(connection);
    if (it != busy_.end()) {
      it->second.held -= std::min(it->second.held, units);
      forget_if_idle(connection);
    }
  }
  cv_.notify_all();
}

size_t IoAdmission::in_use() const {
  std::lock_guard lk(mu_);
  return capacity_ - free_;
}

size_t IoAdmission::waiting() const {
  std::lock_guard lk(mu_);
  return queue_.size();
}

size_t IoAdmission::share() const {
  std::lock_guard lk(mu_);
  return share_locked();
}

size_t IoAdmission::held_by(uint64_t connection) const {
  std::lock_guard lk(mu_);
  auto it = busy_.find(connection);
  return it == busy_.end() ? 0 : it->second.held;
}

}  // namespace surge::ods
