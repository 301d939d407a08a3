// DrainWait: `surgectl drain ID --wait`. Watches the cluster map until the
// draining target is in no chain (it holds no chunk of any format 2 file),
// printing a line whenever the count of its chains or their sync progress
// changes, then says so. A target that is down while draining cannot hand
// its chains over itself: its members are replaced after the MDS's
// absence time (chains.replace_after_ms) instead, which the wait also sees.
#pragma once

#include <cstdint>

#include "tools/surgectl/cluster_admin.h"

namespace surge::tools {

// 0 when the target holds nothing; 1 on an error (printed), e.g. the MDS
// unreachable or the target no longer draining.
int wait_drained(ClusterAdmin& admin, uint32_t target_id, bool json);

}  // namespace surge::tools
