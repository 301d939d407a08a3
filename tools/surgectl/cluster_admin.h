// ClusterAdmin: surgectl's direct line to the MDS for what the native
// client library does not carry: the whole cluster map (with each target's
// draining mark) and the drain / undrain admin call. One authenticated RPC
// channel; no client session is opened.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "net/proto/mds.pb.h"
#include "net/rpc_channel.h"

namespace surge::tools {

class ClusterAdmin {
 public:
  // mds_addresses: one, or several comma-separated (the first that answers).
  static Result<ClusterAdmin> Connect(const std::string& mds_addresses,
                                      const std::string& cluster_key,
                                      std::chrono::milliseconds timeout);

  Result<proto::mds::ClusterMap> cluster_map();
  // NotFound (naming the known ids) for a target the map does not hold.
  Result<proto::mds::SetTargetDrainReply> set_draining(uint32_t target_id, bool draining);
  // Starts moves of chain memberships onto the emptiest targets (at most
  // max_moves in flight; 0: the MDS's bound); dry_run only lists them.
  Result<proto::mds::RebalanceReply> rebalance(bool dry_run, uint32_t max_moves);
  // A file's or directory's layout (with the chains it names), and setting
  // a directory's default or an empty file's layout, as the caller cred.
  Result<proto::mds::GetLayoutReply> get_layout(uint64_t ino, const proto::mds::Credentials& cred);
  Result<proto::mds::SetLayoutReply> set_layout(uint64_t ino, const proto::mds::Layout& layout,
                                                const proto::mds::Credentials& cred);

  const std::string& mds_address() const { return address_; }
  // The MDS leader the last cluster_map() reply named ("" when none).
  const std::string& mds_leader() const { return leader_; }

 private:
  std::string address_;
  std::string leader_;
  std::shared_ptr<net::RpcChannel> channel_;
};

// "up", "down", "draining" or "unknown".
const char* state_name(proto::mds::TargetState s);
// "serving", "syncing", "offline" or "unknown".
const char* member_state_name(proto::mds::ChainMemberState s);
// "healthy", "degraded", "resyncing", "rebuilding", "unavailable" or "unknown".
const char* health_name(proto::mds::ChainHealth h);

}  // namespace surge::tools
