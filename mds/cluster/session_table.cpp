// SessionTable implementation; see session_table.h.
#include "mds/cluster/session_table.h"

#include "common/log.h"

namespace surge::mds {

SessionTable::SessionTable(SessionOptions o) : opts_(o), rng_(std::random_device{}()) {}

uint64_t SessionTable::open_session(const std::string& client_name) {
  std::lock_guard lk(mu_);
  uint64_t id = 0;
  // Random ids: a session from before a restart can never be mistaken for a
  // new one.
  while (id == 0 || sessions_.count(id) != 0) id = rng_();
  sessions_[id] = Session{client_name, Clock::now(), {}};
  SLOG_INFO("session {:x} opened by {}", id, client_name);
  return id;
}

static Status unknown_session(uint64_t id) {
  return Status::NotFound("session " + std::to_string(id) +
                          " unknown (expired, or the MDS restarted): open a new session and "
                          "report open files again");
}

Status SessionTable::heartbeat(uint64_t session_id) {
  std::lock_guard lk(mu_);
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return unknown_session(session_id);
  it->second.last_seen = Clock::now();
  return Status::OK();
}

void SessionTable::drop_locked(std::unordered_map<uint64_t, Session>::iterator it) {
  for (const auto& [ino, n] : it->second.opens) {
    auto oc = open_count_.find(ino);
    if (oc == open_count_.end()) continue;
    if (oc->second <= n) {
      open_count_.erase(oc);
    } else {
      oc->second -= n;
    }
  }
  sessions_.erase(it);
}

Status SessionTable::close_session(uint64_t session_id) {
  std::lock_guard lk(mu_);
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return unknown_session(session_id);
  SLOG_INFO("session {:x} of {} closed", session_id, it->second.name);
  drop_locked(it);
  return Status::OK();
}

Status SessionTable::add_open(uint64_t session_id, uint64_t ino) {
  std::lock_guard lk(mu_);
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return unknown_session(session_id);
  it->second.last_seen = Clock::now();
  ++it->second.opens[ino];
  ++open_count_[ino];
  return Status::OK();
}

void SessionTable::release_open(uint64_t session_id, uint64_t ino) {
  std::lock_guard lk(mu_);
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return;
  auto o = it->second.opens.find(ino);
  if (o == it->second.opens.end()) return;
  if (--o->second == 0) it->second.opens.erase(o);
  auto oc = open_count_.find(ino);
  if (oc != open_count_.end() && --oc->second == 0) open_count_.erase(oc);
}

bool SessionTable::holds_open(uint64_t session_id, uint64_t ino) const {
  std::lock_guard lk(mu_);
  auto it = sessions_.find(session_id);
  return it != sessions_.end() && it->second.opens.count(ino) != 0;
}

bool SessionTable::is_open(uint64_t ino) const {
  std::lock_guard lk(mu_);
  return open_count_.count(ino) != 0;
}

int SessionTable::expire(Clock::time_point now) {
  std::lock_guard lk(mu_);
  int n = 0;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    auto next = std::next(it);
    if (now - it->second.last_seen > std::chrono::milliseconds(opts_.session_timeout_ms)) {
      SLOG_WARN("session {:x} of {} silent past {} ms: expired, {} open files released", it->first,
                it->second.name, opts_.session_timeout_ms, it->second.opens.size());
      drop_locked(it);
      ++n;
    }
    it = next;
  }
  return n;
}

size_t SessionTable::session_count() const {
  std::lock_guard lk(mu_);
  return sessions_.size();
}

}  // namespace surge::mds
