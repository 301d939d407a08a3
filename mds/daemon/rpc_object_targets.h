// RpcObjectTargets: ObjectTargets over the network, calling OdsTruncate and
// OdsRemove on the data servers through a reconnecting ChannelPool.
#pragma once

#include <chrono>
#include <string>

#include "mds/cluster/object_targets.h"
#include "net/rpc_channel.h"

namespace surge::mds {

class RpcObjectTargets : public ObjectTargets {
 public:
  // probe_timeout bounds probe(): connecting and one OdsStatFs.
  RpcObjectTargets(const std::string& cluster_key, std::chrono::milliseconds timeout,
                   std::chrono::milliseconds probe_timeout = std::chrono::milliseconds(500));
  Status truncate(uint32_t target_id, const std::string& address, uint64_t object_id, uint64_t size,
                  uint64_t truncate_seq) override;
  Status remove(uint32_t target_id, const std::string& address, uint64_t object_id,
                uint64_t truncate_seq) override;
  Status probe(const std::string& address) override;
  Status truncate_chunk(const ChunkAddress& chunk, uint64_t size, uint64_t truncate_seq) override;
  Status remove_chunk(const ChunkAddress& chunk, uint64_t truncate_seq) override;

 private:
  net::ChannelPool pool_;
  net::ChannelPool probe_pool_;  // its own short connect deadline
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds probe_timeout_;
};

}  // namespace surge::mds
