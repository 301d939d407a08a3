// ClusterAdmin: see cluster_admin.h.
#include "tools/surgectl/cluster_admin.h"

#include <cstdio>

#include "net/address_list.h"
#include "net/proto/mds_methods.h"

namespace surge::tools {

namespace pb = proto::mds;

Result<ClusterAdmin> ClusterAdmin::Connect(const std::string& mds_addresses,
                                           const std::string& cluster_key,
                                           std::chrono::milliseconds timeout) {
  SURGE_ASSIGN_OR_RETURN(auto addresses, net::parse_address_list(mds_addresses, "MDS address"));
  net::ChannelOptions o;
  o.cluster_key = cluster_key;
  o.connect_timeout = timeout;
  o.call_timeout = timeout;
  // Several MDS serve one file system from etcd: any that answers will do.
  Status last;
  std::string tried;
  for (const std::string& address : addresses) {
    auto ch = net::RpcChannel::Connect(address, o);
    if (ch.ok()) {
      ClusterAdmin a;
      a.address_ = address;
      a.channel_ = *ch;
      return a;
    }
    last = ch.status();
    tried += (tried.empty() ? "" : "; ") + address + ": " + ch.status().message();
  }
  return Status(last.code(), "connecting to the MDS at " + tried);
}

Result<pb::ClusterMap> ClusterAdmin::cluster_map() {
  pb::GetClusterMapRequest req;
  pb::GetClusterMapReply resp;
  Status st = channel_->call<pb::MdsGetClusterMap>(req, &resp);
  if (!st.ok())
    return Status(st.code(), "cluster map from the MDS at " + address_ + ": " + st.message());
  leader_ = resp.mds_leader();
  return resp.map();
}

Result<pb::SetTargetDrainReply> ClusterAdmin::set_draining(uint32_t target_id, bool draining) {
  pb::SetTargetDrainRequest req;
  req.set_target_id(target_id);
  req.set_draining(draining);
  pb::SetTargetDrainReply resp;
  Status st = channel_->call<pb::MdsSetTargetDrain>(req, &resp);
  if (!st.ok()) {
    return Status(st.code(), std::string(draining ? "drain" : "undrain") + " target " +
                                 std::to_string(target_id) + " at the MDS " + address_ + ": " +
                                 st.message());
  }
  return resp;
}

Result<pb::RebalanceReply> ClusterAdmin::rebalance(bool dry_run, uint32_t max_moves) {
  pb::RebalanceRequest req;
  req.set_dry_run(dry_run);
  req.set_max_moves(max_moves);
  pb::RebalanceReply resp;
  Status st = channel_->call<pb::MdsRebalance>(req, &resp);
  if (!st.ok()) {
    return Status(st.code(), "rebalance at the MDS " + address_ + ": " + st.message());
  }
  return resp;
}

Result<pb::GetLayoutReply> ClusterAdmin::get_layout(uint64_t ino, const pb::Credentials& cred) {
  pb::GetLayoutRequest req;
  *req.mutable_cred() = cred;
  req.set_ino(ino);
  pb::GetLayoutReply resp;
  Status st = channel_->call<pb::MdsGetLayout>(req, &resp);
  if (!st.ok()) {
    return Status(st.code(), "layout of inode " + std::to_string(ino) + " from the MDS at " +
                                 address_ + ": " + st.message());
  }
  return resp;
}

Result<pb::SetLayoutReply> ClusterAdmin::set_layout(uint64_t ino, const pb::Layout& layout,
                                                    const pb::Credentials& cred) {
  pb::SetLayoutRequest req;
  *req.mutable_cred() = cred;
  req.set_ino(ino);
  *req.mutable_layout() = layout;
  pb::SetLayoutReply resp;
  Status st = channel_->call<pb::MdsSetLayout>(req, &resp);
  if (!st.ok()) {
    return Status(st.code(), "setstripe on inode " + std::to_string(ino) + " at the MDS " +
                                 address_ + ": " + st.message());
  }
  return resp;
}

const char* member_state_name(pb::ChainMemberState s) {
  switch (s) {
    case pb::MEMBER_SERVING:
      return "serving";
    case pb::MEMBER_SYNCING:
      return "syncing";
    case pb::MEMBER_OFFLINE:
      return "offline";
    default:
      return "unknown";
  }
}

const char* health_name(pb::ChainHealth h) {
  switch (h) {
    case pb::CHAIN_HEALTHY:
      return "healthy";
    case pb::CHAIN_DEGRADED:
      return "degraded";
    case pb::CHAIN_RESYNCING:
      return "resyncing";
    case pb::CHAIN_REBUILDING:
      return "rebuilding";
    case pb::CHAIN_UNAVAILABLE:
      return "unavailable";
    default:
      return "unknown";
  }
}

const char* state_name(pb::TargetState s) {
  switch (s) {
    case pb::TARGET_UP:
      return "up";
    case pb::TARGET_DOWN:
      return "down";
    case pb::TARGET_DRAINING:
      return "draining";
    default:
      return "unknown";
  }
}

}  // namespace surge::tools
