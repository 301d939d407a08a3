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
  static Result<ClusterAdmin> Connect(const std::string& mds_address,
                                      const std::string& cluster_key,
                                      std::chrono::milliseconds timeout);

  Result<proto::mds::ClusterMap> cluster_map();
  // NotFound (naming the known ids) for a target the map does not hold.
  Result<proto::mds::SetTargetDrainReply> set_draining(uint32_t target_id, bool draining);

  const std::string& mds_address() const { return address_; }

 private:
  std::string address_;
  std::shared_ptr<net::RpcChannel> channel_;
};

// "up", "down", "draining" or "unknown".
const char* state_name(proto::mds::TargetState s);

std::string json_escape(const std::string& s);

}  // namespace surge::tools
