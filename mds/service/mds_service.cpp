// MdsService: RPC handlers; see mds_service.h.
#include "mds/service/mds_service.h"

#include "net/proto/mds_methods.h"

namespace surge::mds {

using namespace surge::proto::mds;  // NOLINT: the method list reads better unqualified
using net::RpcContext;

void register_mds_handlers(net::RpcServer& server, Namespace& ns, ClusterMap& map,
                           SessionTable& sessions) {
  // cluster map and data servers
  server.add<MdsRegisterTarget>(
      [&map](RpcContext&, const RegisterTargetRequest& req, RegisterTargetReply& resp) -> Status {
        SURGE_ASSIGN_OR_RETURN(resp, map.register_target(req));
        return Status::OK();
      });
  server.add<MdsTargetHeartbeat>(
      [&map](RpcContext&, const TargetHeartbeatRequest& req, TargetHeartbeatReply& resp) -> Status {
        SURGE_ASSIGN_OR_RETURN(resp, map.heartbeat(req));
        return Status::OK();
      });
  server.add<MdsGetClusterMap>(
      [&map](RpcContext&, const GetClusterMapRequest&, GetClusterMapReply& resp) -> Status {
        *resp.mutable_map() = map.snapshot();
        return Status::OK();
      });

  // sessions
  server.add<MdsOpenSession>([&sessions](RpcContext& ctx, const OpenSessionRequest& req,
                                         OpenSessionReply& resp) -> Status {
    resp.set_session_id(sessions.open_session(req.client_name() + " from " + ctx.peer()));
    resp.set_heartbeat_interval_ms(sessions.options().heartbeat_interval_ms);
    resp.set_session_timeout_ms(sessions.options().session_timeout_ms);
    return Status::OK();
  });
  server.add<MdsSessionHeartbeat>([&sessions, &map](RpcContext&, const SessionHeartbeatRequest& req,
                                                    SessionHeartbeatReply& resp) -> Status {
    SURGE_RETURN_IF_ERROR(sessions.heartbeat(req.session_id()));
    resp.set_map_version(map.version());
    return Status::OK();
  });
  server.add<MdsCloseSession>(
      [&sessions](RpcContext&, const CloseSessionRequest& req, CloseSessionReply&) -> Status {
        return sessions.close_session(req.session_id());
      });

  // namespace
#define SURGE_MDS_BIND(Method, Req, Resp, call)                                 \
  server.add<Method>([&ns](RpcContext&, const Req& req, Resp& resp) -> Status { \
    (void)resp;                                                                 \
    return call;                                                                \
  })
  SURGE_MDS_BIND(MdsLookup, LookupRequest, EntryReply, ns.lookup(req, &resp));
  SURGE_MDS_BIND(MdsGetAttr, GetAttrRequest, EntryReply, ns.getattr(req, &resp));
  SURGE_MDS_BIND(MdsSetAttr, SetAttrRequest, EntryReply, ns.setattr(req, &resp));
  SURGE_MDS_BIND(MdsCreate, CreateRequest, EntryReply, ns.create(req, &resp));
  SURGE_MDS_BIND(MdsMknod, MknodRequest, EntryReply, ns.mknod(req, &resp));
  SURGE_MDS_BIND(MdsMkdir, MkdirRequest, EntryReply, ns.mkdir(req, &resp));
  SURGE_MDS_BIND(MdsUnlink, UnlinkRequest, UnlinkReply, ns.unlink(req));
  SURGE_MDS_BIND(MdsRmdir, UnlinkRequest, UnlinkReply, ns.rmdir(req));
  SURGE_MDS_BIND(MdsRename, RenameRequest, RenameReply, ns.rename(req));
  SURGE_MDS_BIND(MdsLink, LinkRequest, EntryReply, ns.link(req, &resp));
  SURGE_MDS_BIND(MdsSymlink, SymlinkRequest, EntryReply, ns.symlink(req, &resp));
  SURGE_MDS_BIND(MdsReadlink, ReadlinkRequest, ReadlinkReply, ns.readlink(req, &resp));
  SURGE_MDS_BIND(MdsReadDir, ReadDirRequest, ReadDirReply, ns.readdir(req, &resp));
  SURGE_MDS_BIND(MdsStatFs, StatFsRequest, StatFsReply, ns.statfs(req, &resp));
  SURGE_MDS_BIND(MdsSetXattr, SetXattrRequest, SetXattrReply, ns.setxattr(req));
  SURGE_MDS_BIND(MdsGetXattr, GetXattrRequest, GetXattrReply, ns.getxattr(req, &resp));
  SURGE_MDS_BIND(MdsListXattr, ListXattrRequest, ListXattrReply, ns.listxattr(req, &resp));
  SURGE_MDS_BIND(MdsRemoveXattr, RemoveXattrRequest, RemoveXattrReply, ns.removexattr(req));
  SURGE_MDS_BIND(MdsSetLayout, SetLayoutRequest, SetLayoutReply, ns.set_layout(req, &resp));
  SURGE_MDS_BIND(MdsGetLayout, GetLayoutRequest, GetLayoutReply, ns.get_layout(req, &resp));
  SURGE_MDS_BIND(MdsReportSize, ReportSizeRequest, EntryReply, ns.report_size(req, &resp));
  SURGE_MDS_BIND(MdsOpen, OpenRequest, EntryReply, ns.open(req, &resp));
  SURGE_MDS_BIND(MdsClose, CloseRequest, CloseReply, ns.close(req));
  SURGE_MDS_BIND(MdsAccess, AccessRequest, AccessReply, ns.access(req));
#undef SURGE_MDS_BIND
}

}  // namespace surge::mds
