// What the namespace's operation files share: how often an operation retries
// a conflicted KV batch before it gives up, and how an inode is named in an
// error message.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <thread>

#include "common/status.h"

namespace surge::mds {

// A batch whose checks failed (another writer got there first) is rebuilt
// and retried at most this often.
inline constexpr int kMaxAttempts = 100;

// Whether a commit's status means its checks failed: the KvStore's Busy,
// never an answer for the client. The operation reads again and retries.
inline bool conflicted(const Status& st) {
  return st.code() == Code::kBusy;
}

// Before retry `attempt` (> 0) of an operation: a short random pause, so two
// MDS processes changing one directory do not keep failing each other in
// lockstep. Called with no lock held.
inline void conflict_backoff(int attempt) {
  if (attempt == 0) return;
  thread_local std::minstd_rand rng(std::random_device{}());
  const int cap_us = 50 * std::min(attempt, 20);
  std::this_thread::sleep_for(std::chrono::microseconds(rng() % static_cast<unsigned>(cap_us)));
}

inline std::string ino_str(uint64_t ino) {
  return "inode " + std::to_string(ino);
}

}  // namespace surge::mds
