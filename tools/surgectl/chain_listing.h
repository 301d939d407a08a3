// What surgectl scrub's chain checks share: a connection to one chain
// member, the ChunkRef that names it, and the member's chunks of a chain
// listed page by page (OdsListChunks). replica_compare.h compares the
// replicas of replicated chains with it, ec_parity_check.h the parity of
// EC chains.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "net/proto/mds.pb.h"
#include "net/proto/ods.pb.h"
#include "net/rpc_channel.h"

namespace surge::tools {

struct MemberChannel {
  uint32_t target_id = 0;
  std::string address;
  std::shared_ptr<net::RpcChannel> channel;
  std::string who() const { return "target " + std::to_string(target_id) + " at " + address; }
};

// A ref naming member m of chain under the chain's version (no chunk id).
proto::ods::ChunkRef member_ref(const MemberChannel& m, const proto::mds::Chain& chain);

// Every chunk of chain that m holds, in key order, each given to fn;
// with_crc: each with the CRC32C of its bytes (m reads them all).
Status list_chain_chunks(const MemberChannel& m, const proto::mds::Chain& chain, bool with_crc,
                         const std::function<void(const proto::ods::ChunkState&)>& fn);

}  // namespace surge::tools
