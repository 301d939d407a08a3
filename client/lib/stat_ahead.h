// StatAhead: the entries of a directory fetched in bulk (readdirplus pages)
// once lookups there come in a run, so the rest of the run is answered
// here instead of by one MDS round trip each. It is what a stat of every
// file in a directory the kernel has no names of (mdtest's stat phase, a
// `find -ls`, an `rm -rf` whose names have expired) costs through the mount:
// a page per thousand names, not a lookup per name. Lustre's statahead does
// the same job.
//
// Consistency: an entry is used for at most kMaxAge after the fetch began,
// and surge-fuse gives it to the kernel with its entry and attribute
// timeouts cut by that age, so a name another client changed is seen here
// no later than the kernel's own caches would show it (entry_timeout).
// This client's own changes are seen at once: a name it adds, removes or
// replaces leaves the fetched entries (also when the change lands while a
// fetch is on its way), and an inode it changed (setattr, link, a close
// after writes) is not answered from a fetch that began before the change.
//
// A run: kRun lookups in one directory that the MDS answered, none more
// than kRunGap apart. A fetch takes at most kMaxEntries names. One is
// repeated (the run going on past kMaxAge / 2) only when the last one
// answered at least one lookup for every kMinUse names it read: a run of
// lookups of names a fetch cannot serve (in a directory larger than
// kMaxEntries, or of names made after it) does not read the directory
// again for kBackoff, nor does one whose fetch failed (no read
// permission). At most kMaxDirs directories are kept, the oldest fetch
// dropped first; expire() drops those past kMaxAge.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "surge/client.h"

namespace surge::client {

class StatAhead {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kRun = 8;
  static constexpr Clock::duration kRunGap = std::chrono::seconds(1);
  static constexpr Clock::duration kMaxAge = std::chrono::seconds(1);
  static constexpr Clock::duration kBackoff = std::chrono::seconds(30);
  static constexpr size_t kMaxEntries = 131072;
  static constexpr uint64_t kMinUse = 8;
  static constexpr size_t kMaxDirs = 4;
  static constexpr size_t kPage = 1024;  // entries per readdir call of a fetch

  // A fetch the caller is to make now: readdirplus of dir, then install()
  // or abandon().
  struct Fetch {
    Ino dir = 0;
    Clock::time_point began;
  };

  // The fetched entry for name in dir, if the fetch began less than
  // min(max_age, kMaxAge) ago (*age: how long ago) and nothing of ours
  // changed the inode since.
  std::optional<Attr> find(Ino dir, std::string_view name, Clock::duration max_age,
                           Clock::duration* age);
  // The MDS answered a lookup in dir with a name: a fetch to make when that
  // completes a run and dir has no fetch on its way or fresh enough.
  std::optional<Fetch> note_lookup(Ino dir);
  // The entries a fetch read (at most kMaxEntries).
  void install(const Fetch& f, std::vector<DirEntry> entries);
  void abandon(const Fetch& f);
  // Drops the fetches older than kMaxAge (their memory; the client's
  // background thread calls it).
  void expire();

  // This client added, removed or replaced `name` in dir: called when the
  // reply came, and when the call failed with the outcome unknown.
  void name_changed(Ino dir, std::string_view name);
  // This client changed the inode's attributes (likewise).
  void inode_changed(Ino ino);

  size_t dirs() const;

 private:
  struct Run {
    int lookups = 0;
    Clock::time_point last;
    bool fetching = false;
    Clock::time_point fetch_began;
    std::vector<std::string> changed_while_fetching;
    Clock::time_point no_fetch_until;
    size_t last_fetch_entries = 0;  // what the last fetch read,
    uint64_t hits = 0;              // and how many lookups it answered
  };
  struct Fetched {
    Clock::time_point began;
    std::unordered_map<std::string, Attr> entries;
  };
  void changed_locked(Ino ino, Clock::time_point now);
  void prune_locked(Clock::time_point now);

  mutable std::mutex mu_;
  std::unordered_map<Ino, Run> runs_;
  std::unordered_map<Ino, Fetched> fetched_;
  std::unordered_map<Ino, Clock::time_point> changed_;  // inode -> our last change
  size_t in_flight_ = 0;                                // fetches begun, not installed
  static constexpr size_t kPruneAt = 4096;              // runs or changed inodes before a prune
  size_t prune_at_ = kPruneAt;
};

}  // namespace surge::client
