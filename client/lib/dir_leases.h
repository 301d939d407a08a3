// DirLeases: the directories this client's session holds a lease on
// (mds/namespace/dir_lease.h: granted by our own mkdir, renewed by each
// name we add there, and while it lasts no other session adds a name),
// each with every name we added since the grant. A lookup of any other
// name in such a directory is answered "missing" here, without the MDS:
// what takes the kernel's LOOKUP of each new name off a create through the
// mount (docs/metadata-path.md, "Directory leases").
//
// The lease ends here kMarginMs before it can end at the MDS: its term is
// counted from when the granting or renewing request was sent, earlier
// than the MDS counted it. One that ran out is kept with its names, as our
// next addition may renew it. A reply that says the lease is over, an
// addition whose outcome is unknown (a failed call), a change of session
// or a directory with more than kMaxNames names drop it; the lookups then
// go to the MDS as before.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "surge/client.h"

namespace surge::client {

class DirLeases {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kMarginMs{25};
  static constexpr size_t kMaxNames = 100000;  // per directory
  static constexpr size_t kMaxLeases = 4096;

  // Taken before a mkdir is sent, for grant().
  uint64_t generation() const;
  // A directory `session` made; `ms` from the mkdir's reply, sent when the
  // request was sent, gen what generation() said then. ms 0: no lease.
  // Refused when an addition renewed a lease this table does not hold
  // since gen: another thread of ours may have added a name to the new
  // directory before this reply came, which the table would not know.
  void grant(Ino dir, uint64_t session, uint32_t ms, Clock::time_point sent, uint64_t gen);
  // `session` added `name` to dir (create, mknod, mkdir, symlink, link,
  // rename). renews: the reply said how long the lease lasts now (ms; 0:
  // it is over); a rename's reply says nothing and keeps the term.
  void added(Ino dir, std::string_view name, uint64_t session, bool renews, uint32_t ms,
             Clock::time_point sent);
  // The name left dir through this client.
  void removed(Ino dir, std::string_view name);
  // An addition to dir whose outcome is not known: its names are not.
  void drop(Ino dir);
  // Whether `name` is known missing from dir, for `session`, now.
  bool known_missing(Ino dir, std::string_view name, uint64_t session);
  size_t size() const;

 private:
  struct Lease {
    uint64_t session = 0;
    Clock::time_point until;
    std::unordered_set<std::string> names;
  };
  void prune_locked(Clock::time_point now);

  mutable std::mutex mu_;
  std::unordered_map<Ino, Lease> leases_;
  uint64_t unheld_renewals_ = 0;  // additions the MDS renewed a lease for that we do not hold
};

}  // namespace surge::client
