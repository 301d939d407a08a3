#include "net/preauth_limits.h"

namespace surge::net {

Status PreauthLimits::admit(const std::string& host, Refusal* why) {
  std::lock_guard lk(mu_);
  if (total_ != 0 && count_ >= total_) {
    if (why != nullptr) *why = {false, total_};
    return Status::Unavailable("server has " + std::to_string(count_) +
                               " connections in the handshake, its limit (" +
                               std::to_string(total_) + " unauthenticated connections in total)");
  }
  uint32_t& mine = by_host_[host];
  if (per_address_ != 0 && mine >= per_address_) {
    if (why != nullptr) *why = {true, per_address_};
    return Status::Unavailable("server has " + std::to_string(mine) +
                               " connections from " + host +
                               " in the handshake, its limit per address (" +
                               std::to_string(per_address_) + ")");
  }
  ++mine;
  ++count_;
  return Status::OK();
}

void PreauthLimits::release(const std::string& host) {
  std::lock_guard lk(mu_);
  auto it = by_host_.find(host);
  if (it == by_host_.end() || it->second == 0) return;  // a programmer error; never negative
  if (--it->second == 0) by_host_.erase(it);
  --count_;
}

uint32_t PreauthLimits::in_handshake() const {
  std::lock_guard lk(mu_);
  return count_;
}

}  // namespace surge::net
