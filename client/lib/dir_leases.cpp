#include "client/lib/dir_leases.h"

namespace surge::client {

uint64_t DirLeases::generation() const {
  std::lock_guard lk(mu_);
  return unheld_renewals_;
}

void DirLeases::grant(Ino dir, uint64_t session, uint32_t ms, Clock::time_point sent,
                      uint64_t gen) {
  if (ms == 0 || session == 0) return;
  std::lock_guard lk(mu_);
  if (unheld_renewals_ != gen) return;
  if (leases_.size() >= kMaxLeases) prune_locked(Clock::now());
  if (leases_.size() >= kMaxLeases) return;
  Lease& l = leases_[dir];
  l.session = session;
  l.until = sent + std::chrono::milliseconds(ms) - kMarginMs;
  l.names.clear();  // a new directory: empty
}

void DirLeases::added(Ino dir, std::string_view name, uint64_t session, bool renews, uint32_t ms,
                      Clock::time_point sent) {
  std::lock_guard lk(mu_);
  auto it = leases_.find(dir);
  if (it == leases_.end()) {
    if (renews && ms != 0) ++unheld_renewals_;
    return;
  }
  Lease& l = it->second;
  if (l.session != session || (renews && ms == 0) || l.names.size() >= kMaxNames) {
    leases_.erase(it);
    return;
  }
  l.names.emplace(name);
  if (renews) {
    const Clock::time_point until = sent + std::chrono::milliseconds(ms) - kMarginMs;
    if (until > l.until) l.until = until;
  }
}

void DirLeases::removed(Ino dir, std::string_view name) {
  std::lock_guard lk(mu_);
  auto it = leases_.find(dir);
  if (it != leases_.end()) it->second.names.erase(std::string(name));
}

void DirLeases::drop(Ino dir) {
  std::lock_guard lk(mu_);
  leases_.erase(dir);
}

bool DirLeases::known_missing(Ino dir, std::string_view name, uint64_t session) {
  std::lock_guard lk(mu_);
  auto it = leases_.find(dir);
  if (it == leases_.end()) return false;
  const Lease& l = it->second;
  if (l.session != session) {
    leases_.erase(it);
    return false;
  }
  // Run out: kept, since our next addition there may renew it (the MDS
  // renews a lease nobody recalled: no one else added a name meanwhile).
  if (Clock::now() >= l.until) return false;
  return l.names.count(std::string(name)) == 0;
}

size_t DirLeases::size() const {
  std::lock_guard lk(mu_);
  return leases_.size();
}

void DirLeases::prune_locked(Clock::time_point now) {
  for (auto it = leases_.begin(); it != leases_.end();) {
    it = now >= it->second.until ? leases_.erase(it) : std::next(it);
  }
}

}  // namespace surge::client
