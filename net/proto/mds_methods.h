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
// administration: drain / undrain a target (surgectl drain)
using MdsSetTargetDrain =
    net::MethodDef<kServiceMds, 4, SetTargetDrainRequest, SetTargetDrainReply>;
// chains (docs/redundancy.md): failure reports from clients and data
// servers, resync progress from a resync source, rebalance (surgectl)
using MdsReportTargetFailure =
    net::MethodDef<kServiceMds, 5, ReportTargetFailureRequest, ReportTargetFailureReply>;
using MdsReportChainSync =
    net::MethodDef<kServiceMds, 6, ReportChainSyncRequest, ReportChainSyncReply>;
using MdsNoteStandIn = net::MethodDef<kServiceMds, 45, NoteStandInRequest, NoteStandInReply>;
using MdsRebalance = net::MethodDef<kServiceMds, 7, RebalanceRequest, RebalanceReply>;

// client sessions
using MdsOpenSession = net::MethodDef<kServiceMds, 10, OpenSessionRequest, OpenSessionReply>;
using MdsSessionHeartbeat =
    net::MethodDef<kServiceMds, 11, SessionHeartbeatRequest, SessionHeartbeatReply>;
using MdsCloseSession = net::MethodDef<kServiceMds, 12, CloseSessionRequest, CloseSessionReply>;
// between MDS: the open files of this MDS's sessions (orphan collection)
// 13: MdsHeldOpen, retired (sessions and open files are in the store now).

// namespace operations. Every request carries Credentials; errors are
// errno-exact Status codes (common/status.h).
using MdsLookup = net::MethodDef<kServiceMds, 20, LookupRequest, EntryReply>;
using MdsGetAttr = net::MethodDef<kServiceMds, 21, GetAttrRequest, EntryReply>;
using MdsSetAttr = net::MethodDef<kServiceMds, 22, SetAttrRequest, EntryReply>;
using MdsCreate = net::MethodDef<kServiceMds, 23, CreateRequest, EntryReply>;
using MdsMknod = net::MethodDef<kServiceMds, 24, MknodRequest, EntryReply>;
using MdsMkdir = net::MethodDef<kServiceMds, 25, MkdirRequest, EntryReply>;
using MdsUnlink = net::MethodDef<kServiceMds, 26, UnlinkRequest, UnlinkReply>;
using MdsRmdir = net::MethodDef<kServiceMds, 27, UnlinkRequest, UnlinkReply>;
using MdsRename = net::MethodDef<kServiceMds, 28, RenameRequest, RenameReply>;
using MdsLink = net::MethodDef<kServiceMds, 29, LinkRequest, EntryReply>;
using MdsSymlink = net::MethodDef<kServiceMds, 30, SymlinkRequest, EntryReply>;
using MdsReadlink = net::MethodDef<kServiceMds, 31, ReadlinkRequest, ReadlinkReply>;
using MdsReadDir = net::MethodDef<kServiceMds, 32, ReadDirRequest, ReadDirReply>;
using MdsStatFs = net::MethodDef<kServiceMds, 33, StatFsRequest, StatFsReply>;
using MdsSetXattr = net::MethodDef<kServiceMds, 34, SetXattrRequest, SetXattrReply>;
using MdsGetXattr = net::MethodDef<kServiceMds, 35, GetXattrRequest, GetXattrReply>;
using MdsListXattr = net::MethodDef<kServiceMds, 36, ListXattrRequest, ListXattrReply>;
using MdsRemoveXattr = net::MethodDef<kServiceMds, 37, RemoveXattrRequest, RemoveXattrReply>;
using MdsSetLayout = net::MethodDef<kServiceMds, 38, SetLayoutRequest, SetLayoutReply>;
using MdsGetLayout = net::MethodDef<kServiceMds, 39, GetLayoutRequest, GetLayoutReply>;
using MdsReportSize = net::MethodDef<kServiceMds, 40, ReportSizeRequest, EntryReply>;
using MdsOpen = net::MethodDef<kServiceMds, 41, OpenRequest, EntryReply>;
using MdsClose = net::MethodDef<kServiceMds, 42, CloseRequest, CloseReply>;
using MdsAccess = net::MethodDef<kServiceMds, 43, AccessRequest, AccessReply>;
using MdsCloseMany = net::MethodDef<kServiceMds, 44, CloseManyRequest, CloseReply>;

// The root directory's inode number.
inline constexpr uint64_t kRootIno = 1;

}  // namespace surge::proto::mds
