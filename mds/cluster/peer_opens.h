// PeerOpens: what the other MDS serving this file system hold open. Each
// MDS keeps its clients' sessions and open files in memory (SessionTable);
// the orphan collector runs on the leader alone, so before it removes an
// unlinked file it asks every other MDS whether a session there holds it
// open (MdsHeldOpen). An MDS that serves but cannot be asked makes the
// collector wait: an orphan is never removed on a guess.
//
// When an MDS dies, its lease expires and it leaves the member list; its
// clients open new sessions with another MDS and report their open files
// again within a session timeout. The collector therefore waits its
// startup grace again after a member is lost, as it does after a restart.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "common/status.h"

namespace surge::mds {

class PeerOpens {
 public:
  virtual ~PeerOpens() = default;
  // Lists the members again; true when an MDS listed last time is gone.
  virtual Result<bool> lost_a_member() = 0;
  // Of inos, those a session of another MDS holds open; an error when an
  // MDS that serves could not be asked.
  virtual Result<std::set<uint64_t>> held_elsewhere(const std::vector<uint64_t>& inos) = 0;
};

}  // namespace surge::mds
