// RpcPeerOpens implementation; see rpc_peer_opens.h.
#include "mds/daemon/rpc_peer_opens.h"

#include "net/proto/mds_methods.h"

namespace surge::mds {

namespace {
net::ChannelOptions peer_channel_options(const std::string& key, std::chrono::milliseconds timeout) {
  net::ChannelOptions o;
  o.cluster_key = key;
  o.call_timeout = timeout;
  o.connect_timeout = timeout;
  return o;
}
}  // namespace

RpcPeerOpens::RpcPeerOpens(const Leadership* leadership, const std::string& cluster_key,
                           std::chrono::milliseconds timeout)
    : leadership_(leadership), pool_(peer_channel_options(cluster_key, timeout)) {}

Result<bool> RpcPeerOpens::lost_a_member() {
  SURGE_ASSIGN_OR_RETURN(auto listed, leadership_->members());
  std::set<std::string> now(listed.begin(), listed.end());
  std::lock_guard lk(mu_);
  bool lost = false;
  for (const auto& m : last_members_) lost = lost || now.count(m) == 0;
  last_members_ = std::move(now);
  return lost;
}

Result<std::set<uint64_t>> RpcPeerOpens::held_elsewhere(const std::vector<uint64_t>& inos) {
  std::set<uint64_t> held;
  if (inos.empty()) return held;
  SURGE_ASSIGN_OR_RETURN(auto members, leadership_->members());
  const std::string self = leadership_->self();
  proto::mds::HeldOpenRequest req;
  for (uint64_t ino : inos) req.add_inos(ino);
  for (const std::string& m : members) {
    if (m == self) continue;
    auto ch = pool_.get(m);
    if (!ch.ok()) {
      return ch.status().WithContext("asking the MDS at " + m + " which orphans it holds open");
    }
    proto::mds::HeldOpenReply resp;
    Status st = (*ch)->call<proto::mds::MdsHeldOpen>(req, &resp);
    if (!st.ok()) {
      if (!(*ch)->connected()) pool_.drop(m);
      return st.WithContext("asking the MDS at " + m + " which orphans it holds open");
    }
    held.insert(resp.open().begin(), resp.open().end());
  }
  return held;
}

}  // namespace surge::mds
