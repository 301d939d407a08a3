// MdsService: RPC handlers; see mds_service.h.
#include "mds/service/mds_service.h"

#include <chrono>

#include "common/log.h"
#include "net/proto/mds_methods.h"

namespace surge::mds {

using namespace surge::proto::mds;  // NOLINT: the method list reads better unqualified
using net::RpcContext;

namespace {

// Registers fn for method M, timed and counted in metrics (when given)
// under `name`.
template <typename M, typename F>
void bind(net::RpcServer& server, MdsMetrics* metrics, const char* name, F fn,
          net::HandlerMode mode = net::HandlerMode::kWorker) {
  if (metrics == nullptr) {
    server.add<M>(std::move(fn), mode);
    return;
  }
  metrics->name_method(M::kMethod, name);
  server.add<M>(
      [fn = std::move(fn), metrics](RpcContext& ctx, const typename M::Request& req,
                                    typename M::Response& resp) -> Status {
        const auto t0 = std::chrono::steady_clock::now();
        Status st = fn(ctx, req, resp);
        metrics->record(M::kMethod, st, std::chrono::steady_clock::now() - t0);
        return st;
      },
      mode);
}

}  // namespace

void register_mds_handlers(net::RpcServer& server, Namespace& ns, ClusterMap& map,
                           SessionTable& sessions, ObjectTargets& objects, MdsMetrics* metrics,
                           const Leadership* leadership) {
  // cluster map and data servers
  bind<MdsRegisterTarget>(
      server, metrics, "register_target",
      [&map](RpcContext&, const RegisterTargetRequest& req, RegisterTargetReply& resp) -> Status {
        SURGE_ASSIGN_OR_RETURN(resp, map.register_target(req));
        return Status::OK();
      });
  bind<MdsTargetHeartbeat>(
      server, metrics, "target_heartbeat",
      [&map](RpcContext&, const TargetHeartbeatRequest& req, TargetHeartbeatReply& resp) -> Status {
        SURGE_ASSIGN_OR_RETURN(resp, map.heartbeat(req));
        return Status::OK();
      });
  bind<MdsGetClusterMap>(server, metrics, "get_cluster_map",
                         [&map, leadership](RpcContext&, const GetClusterMapRequest&,
                                            GetClusterMapReply& resp) -> Status {
                           // Another MDS may have changed the map since this one last read it.
                           if (Status rs = map.refresh(); !rs.ok()) {
                             SLOG_WARN("handing out the cluster map as last read: {}",
                                       rs.ToString());
                           }
                           *resp.mutable_map() = map.snapshot();
                           if (leadership != nullptr) resp.set_mds_leader(leadership->leader());
                           return Status::OK();
                         });
  bind<MdsSetTargetDrain>(server, metrics, "set_target_drain",
                          [&map](RpcContext& ctx, const SetTargetDrainRequest& req,
                                 SetTargetDrainReply& resp) -> Status {
                            SURGE_ASSIGN_OR_RETURN(
                                *resp.mutable_target(),
                                map.set_draining(req.target_id(), req.draining()));
                            resp.set_map_version(map.version());
                            SLOG_INFO("target {} {} by {}", req.target_id(),
                                      req.draining() ? "drained" : "undrained", ctx.peer());
                            return Status::OK();
                          });

  // chains (docs/redundancy.md)
  bind<MdsReportTargetFailure>(
      server, metrics, "report_target_failure",
      [&map, &objects](RpcContext& ctx, const ReportTargetFailureRequest& req,
                       ReportTargetFailureReply& resp) -> Status {
        ReportTargetFailureRequest named = req;
        if (named.reporter().empty()) named.set_reporter(ctx.peer());
        SURGE_ASSIGN_OR_RETURN(resp, map.report_target_failure(named, [&objects](const std::string& a) {
                                 return objects.probe(a);
                               }));
        return Status::OK();
      });
  bind<MdsRebalance>(server, metrics, "rebalance",
                     [&map](RpcContext& ctx, const RebalanceRequest& req,
                            RebalanceReply& resp) -> Status {
                       SURGE_ASSIGN_OR_RETURN(resp, map.rebalance(req));
                       SLOG_INFO("rebalance{} by {}: {} moves started", req.dry_run() ? " (dry run)" : "",
                                 ctx.peer(), resp.moves_size());
                       return Status::OK();
                     });
  bind<MdsNoteStandIn>(server, metrics, "note_stand_in",
                       [&map](RpcContext&, const NoteStandInRequest& req,
                              NoteStandInReply&) -> Status { return map.note_stand_in(req); });
  bind<MdsReportChainSync>(
      server, metrics, "report_chain_sync",
      [&map](RpcContext&, const ReportChainSyncRequest& req, ReportChainSyncReply& resp) -> Status {
        SURGE_ASSIGN_OR_RETURN(resp, map.report_chain_sync(req));
        return Status::OK();
      });

  // sessions
  bind<MdsOpenSession>(server, metrics, "open_session",
                       [&sessions](RpcContext& ctx, const OpenSessionRequest& req,
                                   OpenSessionReply& resp) -> Status {
                         SURGE_ASSIGN_OR_RETURN(
                             uint64_t id,
                             sessions.open_session(req.client_name() + " from " + ctx.peer()));
                         resp.set_session_id(id);
                         resp.set_heartbeat_interval_ms(sessions.options().heartbeat_interval_ms);
                         resp.set_session_timeout_ms(sessions.options().session_timeout_ms);
                         resp.set_setattr_reports_size(true);
                         return Status::OK();
                       });
  bind<MdsSessionHeartbeat>(server, metrics, "session_heartbeat",
                            [&sessions, &map](RpcContext&, const SessionHeartbeatRequest& req,
                                              SessionHeartbeatReply& resp) -> Status {
                              SURGE_RETURN_IF_ERROR(sessions.heartbeat(req.session_id()));
                              resp.set_map_version(map.version());
                              return Status::OK();
                            });
  bind<MdsCloseSession>(
      server, metrics, "close_session",
      [&sessions](RpcContext&, const CloseSessionRequest& req, CloseSessionReply&) -> Status {
        return sessions.close_session(req.session_id());
      });
  // namespace
#define SURGE_MDS_BIND_MODE(Method, name, Req, Resp, call, mode) \
  bind<Method>(                                                  \
      server, metrics, name,                                     \
      [&ns](RpcContext&, const Req& req, Resp& resp) -> Status { \
        (void)resp;                                              \
        return call;                                             \
      },                                                         \
      mode)
#define SURGE_MDS_BIND(Method, name, Req, Resp, call) \
  SURGE_MDS_BIND_MODE(Method, name, Req, Resp, call, net::HandlerMode::kWorker)
  // Lock-free reads of a few keys: on a local store they run on the I/O
  // thread that received them when it is otherwise idle (kShortBlocking),
  // which saves the hand-off to a worker and back (docs/metadata-path.md).
  // On etcd a read is a network round trip: workers.
  const auto reads =
      ns.kv()->reads_are_local() ? net::HandlerMode::kShortBlocking : net::HandlerMode::kWorker;
  SURGE_MDS_BIND_MODE(MdsLookup, "lookup", LookupRequest, EntryReply, ns.lookup(req, &resp), reads);
  SURGE_MDS_BIND_MODE(MdsGetAttr, "getattr", GetAttrRequest, EntryReply, ns.getattr(req, &resp),
                      reads);
  SURGE_MDS_BIND(MdsSetAttr, "setattr", SetAttrRequest, EntryReply, ns.setattr(req, &resp));
  SURGE_MDS_BIND(MdsCreate, "create", CreateRequest, EntryReply, ns.create(req, &resp));
  SURGE_MDS_BIND(MdsMknod, "mknod", MknodRequest, EntryReply, ns.mknod(req, &resp));
  SURGE_MDS_BIND(MdsMkdir, "mkdir", MkdirRequest, EntryReply, ns.mkdir(req, &resp));
  SURGE_MDS_BIND(MdsUnlink, "unlink", UnlinkRequest, UnlinkReply, ns.unlink(req, &resp));
  SURGE_MDS_BIND(MdsRmdir, "rmdir", UnlinkRequest, UnlinkReply, ns.rmdir(req, &resp));
  SURGE_MDS_BIND(MdsRename, "rename", RenameRequest, RenameReply, ns.rename(req));
  SURGE_MDS_BIND(MdsLink, "link", LinkRequest, EntryReply, ns.link(req, &resp));
  SURGE_MDS_BIND(MdsSymlink, "symlink", SymlinkRequest, EntryReply, ns.symlink(req, &resp));
  SURGE_MDS_BIND_MODE(MdsReadlink, "readlink", ReadlinkRequest, ReadlinkReply,
                      ns.readlink(req, &resp), reads);
  SURGE_MDS_BIND(MdsReadDir, "readdir", ReadDirRequest, ReadDirReply, ns.readdir(req, &resp));
  SURGE_MDS_BIND(MdsStatFs, "statfs", StatFsRequest, StatFsReply, ns.statfs(req, &resp));
  SURGE_MDS_BIND(MdsSetXattr, "setxattr", SetXattrRequest, SetXattrReply, ns.setxattr(req));
  SURGE_MDS_BIND_MODE(MdsGetXattr, "getxattr", GetXattrRequest, GetXattrReply,
                      ns.getxattr(req, &resp), reads);
  SURGE_MDS_BIND(MdsListXattr, "listxattr", ListXattrRequest, ListXattrReply,
                 ns.listxattr(req, &resp));
  SURGE_MDS_BIND(MdsRemoveXattr, "removexattr", RemoveXattrRequest, RemoveXattrReply,
                 ns.removexattr(req));
  SURGE_MDS_BIND(MdsSetLayout, "set_layout", SetLayoutRequest, SetLayoutReply,
                 ns.set_layout(req, &resp));
  SURGE_MDS_BIND(MdsGetLayout, "get_layout", GetLayoutRequest, GetLayoutReply,
                 ns.get_layout(req, &resp));
  SURGE_MDS_BIND(MdsReportSize, "report_size", ReportSizeRequest, EntryReply,
                 ns.report_size(req, &resp));
  SURGE_MDS_BIND(MdsOpen, "open", OpenRequest, EntryReply, ns.open(req, &resp));
  SURGE_MDS_BIND(MdsClose, "close", CloseRequest, CloseReply, ns.close(req));
  SURGE_MDS_BIND(MdsCloseMany, "close_many", CloseManyRequest, CloseReply, ns.close_many(req));
  SURGE_MDS_BIND_MODE(MdsAccess, "access", AccessRequest, AccessReply, ns.access(req), reads);
#undef SURGE_MDS_BIND
#undef SURGE_MDS_BIND_MODE
}

}  // namespace surge::mds
