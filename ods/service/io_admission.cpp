// IoAdmission: FIFO admission over buffer units (see io_admission.h).
#include "ods/service/io_admission.h"

#include <algorithm>
#include <string>

namespace surge::ods {

IoAdmission::Grant& IoAdmission::Grant::operator=(Grant&& o) noexcept {
  if (this != &o) {
    release();
    owner_ = o.owner_;
    units_ = o.units_;
    o.owner_ = nullptr;
  }
  return *this;
}

void IoAdmission::Grant::release() {
  if (owner_ != nullptr) owner_->give_back(units_);
  owner_ = nullptr;
}

Result<IoAdmission::Grant> IoAdmission::acquire(size_t units, std::chrono::milliseconds wait) {
  if (units > capacity_) {
    return Status::InvalidArgument("IO needs " + std::to_string(units) + " buffers, the server has " +
                                   std::to_string(capacity_));
  }
  std::unique_lock lk(mu_);
  const uint64_t ticket = next_ticket_++;
  queue_.push_back(ticket);
  auto my_turn = [&] { return queue_.front() == ticket && free_ >= units; };
  if (!cv_.wait_for(lk, wait, my_turn)) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), ticket));
    cv_.notify_all();  // the next in line may be able to go now
    return Status::TimedOut("waited " + std::to_string(wait.count()) + " ms for " +
                            std::to_string(units) + " IO buffers");
  }
  queue_.pop_front();
  free_ -= units;
  cv_.notify_all();  // the next waiter may fit in what is left
  return Grant(this, units);
}

void IoAdmission::give_back(size_t units) {
  {
    std::lock_guard lk(mu_);
    free_ += units;
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

}  // namespace surge::ods
