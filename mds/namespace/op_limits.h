// What the namespace's operation files share: how often an operation retries
// a conflicted KV batch before it gives up, and how an inode is named in an
// error message.
#pragma once

#include <cstdint>
#include <string>

namespace surge::mds {

// A batch whose checks failed (another writer got there first) is rebuilt
// and retried at most this often.
inline constexpr int kMaxAttempts = 100;

inline std::string ino_str(uint64_t ino) {
  return "inode " + std::to_string(ino);
}

}  // namespace surge::mds
