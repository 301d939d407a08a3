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
  RpcObjectTargets(const std::string& cluster_key, std::chrono::milliseconds timeout);
  Status truncate(uint32_t target_id, const std::string& address, uint64_t object_id,
                  uint64_t size) override;
  Status remove(uint32_t target_id, const std::string& address, uint64_t object_id) override;

 private:
  net::ChannelPool pool_;
  std::chrono::milliseconds timeout_;
};

}  // namespace surge::mds
