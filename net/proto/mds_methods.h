// Method ids of the metadata server (service kServiceMds).
#pragma once

#include "net/method.h"
#include "net/proto/mds.pb.h"
#include "net/proto/services.h"

namespace surge::proto::mds {

// cluster map and data-server registration
using MdsRegisterTarget = net::MethodDef<kServiceMds, 1, RegisterTargetRequest, RegisterTargetReply>;
using MdsTargetHeartbeat =
    net::MethodDef<kServiceMds, 2, TargetHeartbeatRequest, TargetHeartbeatReply>;
using MdsGetClusterMap = net::MethodDef<kServiceMds, 3, GetClusterMapRequest, GetClusterMapReply>;

// client sessions
using MdsOpenSession = net::MethodDef<kServiceMds, 10, OpenSessionRequest, OpenSessionReply>;
using MdsSessionHeartbeat =
    net::MethodDef<kServiceMds, 11, SessionHeartbeatRequest, SessionHeartbeatReply>;
using MdsCloseSession = net::MethodDef<kServiceMds, 12, CloseSessionRequest, CloseSessionReply>;

// namespace operations: ids 20 and up, defined by the MDS.

}  // namespace surge::proto::mds
