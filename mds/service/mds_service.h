// MdsService: binds every MDS method (net/proto/mds_methods.h) to the
// namespace, the cluster map and the session table. Handlers only translate;
// the work and its locking live in those parts. They run on the RPC worker
// pool, except lock-free reads on a local store, which may run on the I/O
// thread (mds_service.cpp); a handler's Status reaches the client intact.
// With a MdsMetrics,
// every handler counts its request, its error and its time there.
#pragma once

#include "mds/cluster/cluster_map.h"
#include "mds/cluster/leadership.h"
#include "mds/cluster/object_targets.h"
#include "mds/cluster/session_table.h"
#include "mds/namespace/namespace.h"
#include "mds/service/mds_metrics.h"
#include "net/rpc_server.h"

namespace surge::mds {

// objects probes a data server a failure report names; leadership (may be
// nullptr) names the leader in the cluster map's reply.
void register_mds_handlers(net::RpcServer& server, Namespace& ns, ClusterMap& map,
                           SessionTable& sessions, ObjectTargets& objects,
                           MdsMetrics* metrics = nullptr, const Leadership* leadership = nullptr);

}  // namespace surge::mds
