// RpcObjectTargets implementation; see rpc_object_targets.h.
#include "mds/daemon/rpc_object_targets.h"

#include "net/proto/ods_methods.h"

namespace surge::mds {

namespace {
net::ChannelOptions channel_options(const std::string& key, std::chrono::milliseconds timeout) {
  net::ChannelOptions o;
  o.cluster_key = key;
  o.call_timeout = timeout;
  o.connect_timeout = std::min(timeout, std::chrono::milliseconds(5000));
  return o;
}
}  // namespace

RpcObjectTargets::RpcObjectTargets(const std::string& cluster_key,
                                   std::chrono::milliseconds timeout)
    : pool_(channel_options(cluster_key, timeout)), timeout_(timeout) {}

Status RpcObjectTargets::truncate(uint32_t target_id, const std::string& address,
                                  uint64_t object_id, uint64_t size) {
  SURGE_ASSIGN_OR_RETURN(auto ch, pool_.get(address));
  proto::ods::TruncateRequest req;
  req.set_object_id(object_id);
  req.set_size(size);
  proto::ods::TruncateReply resp;
  Status s = ch->call<proto::ods::OdsTruncate>(req, &resp, {}, timeout_);
  if (s.code() == Code::kDisconnected) pool_.drop(address);
  return s;
}

Status RpcObjectTargets::remove(uint32_t target_id, const std::string& address,
                                uint64_t object_id) {
  SURGE_ASSIGN_OR_RETURN(auto ch, pool_.get(address));
  proto::ods::RemoveRequest req;
  req.set_object_id(object_id);
  proto::ods::RemoveReply resp;
  Status s = ch->call<proto::ods::OdsRemove>(req, &resp, {}, timeout_);
  if (s.code() == Code::kDisconnected) pool_.drop(address);
  return s;
}

}  // namespace surge::mds
