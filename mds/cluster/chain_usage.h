// ChainUsage: roughly how many bytes each chain holds, from the file
// layouts in the namespace (a file of size S over c slots puts about S / c
// on each slot's chain). Rebalance weighs chain memberships by it, so a
// new target takes a fair share of existing data, not only of chains.
// One scan of the inode space, outside every lock: for an admin command,
// not a hot path.
#pragma once

#include <cstdint>
#include <map>

#include "common/status.h"
#include "mds/kv/kv_store.h"

namespace surge::mds {

// chain id -> estimated bytes (per replica) of the files whose layouts
// name it.
Result<std::map<uint32_t, uint64_t>> chain_bytes(KvStore* kv);

}  // namespace surge::mds
