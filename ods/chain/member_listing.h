// Listing the chunks another member of a chain holds (OdsListChunks,
// paged, under one chain version): what a resync source compares with its
// SYNCING successor, and what an EC member being rebuilt rebuilds.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"
#include "net/proto/ods.pb.h"
#include "ods/chain/chain_forwarder.h"

namespace surge::ods {

// Calls fn for every chunk of chain chain_id that target `to` at `address`
// holds, in key order. A failure names the chain and target; one that did
// not reach it (peer_unreachable) comes back as is, its connection dropped,
// for the caller to report.
Status list_member_chunks(ChainForwarder& forwarder, uint32_t to, const std::string& address,
                          uint32_t chain_id, uint64_t chain_version,
                          const std::function<void(const proto::ods::ChunkState&)>& fn);

}  // namespace surge::ods
