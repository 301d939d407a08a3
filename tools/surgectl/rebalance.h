// Rebalance: `surgectl rebalance [--dry-run] [--max-moves N] [--wait]`.
// Asks the MDS to move chain memberships from the fullest data servers to
// the emptiest (MdsRebalance; the MDS keeps at most N moves in flight,
// each synced like a drain's). With --wait it asks again as moves finish
// until the MDS starts none and none is left, printing each move started
// and the memberships per target at the end.
#pragma once

#include <cstdint>

#include "tools/surgectl/cluster_admin.h"

namespace surge::tools {

// 0 on success (balanced, with --wait); 1 on an error (printed).
int rebalance(ClusterAdmin& admin, bool dry_run, uint32_t max_moves, bool wait, bool json);

}  // namespace surge::tools
