// ChainRoute: which member of a chain a request for one of its chunks goes
// to (docs/redundancy.md, "Writes" and "Reads (CRAQ)"). Pure functions over
// the chain as the cluster map shows it; DataPath picks, StripeIo sends.
//
// * Updates (write, truncate, remove, sync, fallocate) go to the head: the
//   first member of the write chain (SERVING or SYNCING members in list
//   order; OFFLINE ones are skipped wherever they sit).
// * Reads go to a member of the read set (the SERVING members), chosen by
//   a hash of the chunk and the stripe inside it, so sequential readers of
//   a chunk at rest spread over every replica. A read refused with
//   ChunkDirty goes to the last SERVING member (the only one that serves a
//   dirty chunk); one refused with NotServing, or whose member could not
//   be reached, goes to a member not tried yet.
// * EC chains: member i holds position i, so every request for a chunk of
//   position p goes to member p (ec_member); when it does not serve (or
//   was tried), a read is rebuilt from K other positions. A write goes to
//   it while it is being rebuilt too (ec_writer); while it is down, a
//   write of a data position goes to the chain's stand-in (ec_stand_in).
// Unavailable naming the chain when no member is left: the IO fails then.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "net/proto/mds.pb.h"

namespace surge::client {

// What earlier attempts of one piece learnt about where to send it next.
struct RouteHint {
  std::vector<uint32_t> avoid;  // members that refused (NotServing) or could not be reached
  bool last_serving = false;    // the chunk was dirty: only the last SERVING member serves it
};

// The head of chain's write chain.
Result<uint32_t> chain_head(const proto::mds::Chain& chain);

// The member a read of a chunk goes to; spread_key picks among the read
// set (a hash of ino, slot and stripe).
Result<uint32_t> chain_reader(const proto::mds::Chain& chain, uint64_t spread_key,
                              const RouteHint& hint);

// The member of an EC chain that holds `position`, when it is SERVING and
// not in hint.avoid; Unavailable naming the chain and position otherwise.
Result<uint32_t> ec_member(const proto::mds::Chain& chain, uint32_t position,
                           const RouteHint& hint);
// The same for a write or sync of a data position: SERVING or SYNCING (a
// member being rebuilt rebuilds a chunk before it writes it).
Result<uint32_t> ec_writer(const proto::mds::Chain& chain, uint32_t position,
                           const RouteHint& hint);

// A write of data position `position` whose member is down (neither
// SERVING nor SYNCING): the chain's first SERVING parity position, which
// stands in for it (docs/redundancy.md, "EC degraded writes"), when not in
// hint.avoid; Unavailable otherwise.
Result<uint32_t> ec_stand_in(const proto::mds::Chain& chain, uint32_t position,
                             const RouteHint& hint);

// The key chain_reader spreads by: one per stripe unit of one chunk.
uint64_t read_spread_key(uint64_t ino, uint32_t slot, uint64_t stripe);

}  // namespace surge::client
