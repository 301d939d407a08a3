// DirAttrCache: the attributes of directories as this client's own changes
// left them. The MDS answers a create, mknod, mkdir, symlink, link, unlink
// and rmdir with the parent directory's attributes after the change, and a
// setattr with the inode's; they are kept here for a while, so surge-fuse
// can answer the kernel's getattr of a directory it just changed without a
// second MDS round trip. The kernel drops its attributes of a directory at
// each change of its entries, and with default_permissions it needs them
// again at the next path walk through it: without this, every create or
// unlink in a directory (cp -a, tar -x, rm -rf) was followed by an MDS
// getattr of that directory.
//
// Of two answers for one directory the newer (by ctime, which every change
// moves) is kept, so a reply that arrives late cannot replace a later one.
// Bounded: at most kMaxEntries directories, the oldest answer dropped first.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "surge/client.h"

namespace surge::client {

class DirAttrCache {
 public:
  static constexpr size_t kMaxEntries = 256;
  using Clock = std::chrono::steady_clock;

  // a: a directory's attributes as an MDS reply just gave them. Others are ignored.
  void note(const Attr& a);
  void drop(Ino dir);
  // The latest answer for dir, if it came less than max_age ago; *age (may
  // be null) is how long ago.
  std::optional<Attr> recent(Ino dir, Clock::duration max_age, Clock::duration* age) const;
  size_t size() const;

 private:
  struct Entry {
    Attr attr;
    Clock::time_point at;
  };
  mutable std::mutex mu_;
  std::unordered_map<Ino, Entry> entries_;
};

}  // namespace surge::client
