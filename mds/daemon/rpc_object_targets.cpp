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
                                   std::chrono::milliseconds timeout,
                                   std::chrono::milliseconds probe_timeout)
    : pool_(channel_options(cluster_key, timeout)),
      probe_pool_(channel_options(cluster_key, probe_timeout)),
      timeout_(timeout),
      probe_timeout_(probe_timeout) {}

namespace {
void set_ref(const ChunkAddress& a, proto::ods::ChunkRef* ref) {
  ref->set_target_id(a.target_id);
  ref->set_chain_id(a.chain_id);
  ref->set_chain_version(a.chain_version);
  ref->set_ino(a.ino);
  ref->set_slot(a.slot);
  ref->set_position(a.position);
}
}  // namespace

Status RpcObjectTargets::truncate_chunk(const ChunkAddress& a, uint64_t size,
                                        uint64_t truncate_seq) {
  SURGE_ASSIGN_OR_RETURN(auto ch, pool_.get(a.address));
  proto::ods::TruncateRequest req;
  set_ref(a, req.mutable_ref());
  req.mutable_ref()->set_truncate_seq(truncate_seq);
  req.mutable_ref()->set_truncate_size(size);
  req.set_size(size);
  proto::ods::TruncateReply resp;
  Status s = ch->call<proto::ods::OdsTruncate>(req, &resp, {}, timeout_);
  if (s.code() == Code::kDisconnected) pool_.drop(a.address);
  return s;
}

Status RpcObjectTargets::remove_chunk(const ChunkAddress& a, uint64_t truncate_seq) {
  SURGE_ASSIGN_OR_RETURN(auto ch, pool_.get(a.address));
  proto::ods::RemoveRequest req;
  set_ref(a, req.mutable_ref());
  req.mutable_ref()->set_truncate_seq(truncate_seq);
  proto::ods::RemoveReply resp;
  Status s = ch->call<proto::ods::OdsRemove>(req, &resp, {}, timeout_);
  if (s.code() == Code::kDisconnected) pool_.drop(a.address);
  return s;
}

Status RpcObjectTargets::probe(const std::string& address) {
  auto ch = probe_pool_.get(address);
  if (!ch.ok()) return ch.status().WithContext("probing data server " + address);
  proto::ods::StatFsRequest req;
  proto::ods::StatFsReply resp;
  Status s = (*ch)->call<proto::ods::OdsStatFs>(req, &resp, {}, probe_timeout_);
  if (!s.ok()) {
    probe_pool_.drop(address);
    return s.WithContext("probing data server " + address);
  }
  return Status::OK();
}

Status RpcObjectTargets::truncate(uint32_t target_id, const std::string& address,
                                  uint64_t object_id, uint64_t size, uint64_t truncate_seq) {
  SURGE_ASSIGN_OR_RETURN(auto ch, pool_.get(address));
  proto::ods::TruncateRequest req;
  req.set_object_id(object_id);
  req.set_size(size);
  req.mutable_ref()->set_truncate_seq(truncate_seq);
  proto::ods::TruncateReply resp;
  Status s = ch->call<proto::ods::OdsTruncate>(req, &resp, {}, timeout_);
  if (s.code() == Code::kDisconnected) pool_.drop(address);
  return s;
}

Status RpcObjectTargets::remove(uint32_t target_id, const std::string& address, uint64_t object_id,
                                uint64_t truncate_seq) {
  SURGE_ASSIGN_OR_RETURN(auto ch, pool_.get(address));
  proto::ods::RemoveRequest req;
  req.set_object_id(object_id);
  req.mutable_ref()->set_truncate_seq(truncate_seq);
  proto::ods::RemoveReply resp;
  Status s = ch->call<proto::ods::OdsRemove>(req, &resp, {}, timeout_);
  if (s.code() == Code::kDisconnected) pool_.drop(address);
  return s;
}

}  // namespace surge::mds
