// RpcPeerOpens: PeerOpens over the network: the members from the
// leadership (etcd member keys), MdsHeldOpen to each other MDS through a
// reconnecting ChannelPool.
#pragma once

#include <chrono>
#include <mutex>
#include <set>
#include <string>

#include "mds/cluster/leadership.h"
#include "mds/cluster/peer_opens.h"
#include "net/rpc_channel.h"

namespace surge::mds {

class RpcPeerOpens : public PeerOpens {
 public:
  RpcPeerOpens(const Leadership* leadership, const std::string& cluster_key,
               std::chrono::milliseconds timeout);
  Result<bool> lost_a_member() override;
  Result<std::set<uint64_t>> held_elsewhere(const std::vector<uint64_t>& inos) override;

 private:
  const Leadership* leadership_;
  net::ChannelPool pool_;
  std::mutex mu_;
  std::set<std::string> last_members_;
};

}  // namespace surge::mds
