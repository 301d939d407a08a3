// SessionTable: client sessions and the files they hold open, in memory.
// The orphan collector asks is_open() before it removes an unlinked file's
// objects. A session that stops heartbeating for longer than the timeout is
// expired and its opens released. Sessions do not survive an MDS restart:
// clients see NotFound on their next heartbeat/open, open a new session and
// report their open files again; the collector waits one session timeout
// after start before collecting, to give them the time.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <unordered_map>

#include "common/status.h"

namespace surge::mds {

struct SessionOptions {
  uint32_t heartbeat_interval_ms = 2000;
  uint32_t session_timeout_ms = 30000;
};

class SessionTable {
 public:
  using Clock = std::chrono::steady_clock;
  explicit SessionTable(SessionOptions o);

  uint64_t open_session(const std::string& client_name);
  Status heartbeat(uint64_t session_id);
  Status close_session(uint64_t session_id);

  // Counts one open of ino by the session; NotFound for an unknown session.
  Status add_open(uint64_t session_id, uint64_t ino);
  // Releases one open (no-op when not held).
  void release_open(uint64_t session_id, uint64_t ino);
  bool is_open(uint64_t ino) const;
  // Whether this session holds ino open at least once.
  bool holds_open(uint64_t session_id, uint64_t ino) const;

  // Drops sessions silent past the timeout at 'now'; returns how many.
  int expire(Clock::time_point now);

  const SessionOptions& options() const { return opts_; }
  size_t session_count() const;

 private:
  struct Session {
    std::string name;
    Clock::time_point last_seen;
    std::unordered_map<uint64_t, uint32_t> opens;  // ino -> count
  };
  void drop_locked(std::unordered_map<uint64_t, Session>::iterator it);

  SessionOptions opts_;
  mutable std::mutex mu_;
  std::mt19937_64 rng_;
  std::unordered_map<uint64_t, Session> sessions_;
  std::unordered_map<uint64_t, uint32_t> open_count_;  // ino -> opens over all sessions
};

}  // namespace surge::mds
