// Directory leases: a session that made a directory may answer lookups of
// names missing from it without asking the MDS, for as long as the MDS
// promises that no other session adds a name there. That takes the
// kernel's LOOKUP of every new name off the MDS for a client filling its
// own directory (a create through the mount, cp -a, tar), where it was one
// of the two MDS round trips of a create (docs/metadata-path.md,
// "Directory leases").
//
// The lease is kept in the directory's own record (records::DirLease), so
// every MDS on the store judges it inside the batch that adds the name:
//   * mkdir with a session grants the new directory to that session for
//     one term (NamespaceOptions::dir_lease_ms, default kTermMs);
//   * the holder's own additions renew it (the record is written anyway,
//     its mtime moves), and the reply tells the holder for how long; also
//     after it ran out, while the record still names the holder and no
//     recall: every other session's addition recalls or sheds it first, so
//     then nobody else has added a name since the grant;
//   * another session's addition first marks it recalled (no more
//     renewals), then waits, holding no lock, until kSkewMs past `until`,
//     and tries again; the holder stops answering alone by its own clock
//     before `until` (client/lib/dir_leases.h), so a name added after the
//     wait was never answered as missing while it existed.
// Removals need nothing: the holder answers only misses, and a name it
// knows goes to the MDS.
#pragma once

#include <cstdint>

#include "mds/namespace/records.pb.h"

namespace surge::mds::dir_lease {

// One grant or renewal lasts this long by default (NamespaceOptions::
// dir_lease_ms, the MDS's namespace.dir_lease_ms): the longest another
// session waits for a directory it starts adding to.
inline constexpr uint32_t kTermMs = 200;
// How long after `until` another session proceeds: the clocks of several
// MDS on one store may differ by this much.
inline constexpr uint32_t kSkewMs = 25;
// The longest term (namespace.dir_lease_ms is at most this). A lease that
// ends further ahead was stored before this MDS's clock stepped back: it
// is cut to this, or its directory would stay closed to others for as
// long as the step.
inline constexpr uint32_t kMaxTermMs = 10000;

// Wall-clock milliseconds (the lease is read by every MDS on the store).
uint64_t now_ms();

// A new directory, made by `session`, leased for term_ms (session or
// term 0: no lease).
void grant(records::InodeRecord& dir, uint64_t session, uint64_t now, uint32_t term_ms);

// What an addition of a name to `dir` by `session` must do; `dir` is
// changed in place (renewed, recalled or cleared) and is written with the
// addition, or alone when `recall` is set.
struct AddVerdict {
  uint64_t wait_until_ms = 0;  // another session holds it: wait until then, then retry
  bool store_first = false;    // the record changed (recalled, or cut): commit it before waiting
  uint32_t lease_ms = 0;       // the adder's own lease, renewed for this long
};
// A renewal lasts term_ms (0: none; the lease runs out).
AddVerdict before_add(records::InodeRecord& dir, uint64_t session, uint64_t now, uint32_t term_ms);

// Sleeps until wall-clock `until_ms`, at most a second (the caller reads
// the record again and waits again if it must).
void wait_until(uint64_t until_ms);

}  // namespace surge::mds::dir_lease
