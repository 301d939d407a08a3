// Method ids of the object data server (service kServiceOds).
#pragma once

#include "net/method.h"
#include "net/proto/ods.pb.h"
#include "net/proto/services.h"

namespace surge::proto::ods {

using OdsWrite = net::MethodDef<kServiceOds, 1, WriteRequest, WriteReply>;
using OdsRead = net::MethodDef<kServiceOds, 2, ReadRequest, ReadReply>;
using OdsTruncate = net::MethodDef<kServiceOds, 3, TruncateRequest, TruncateReply>;
using OdsRemove = net::MethodDef<kServiceOds, 4, RemoveRequest, RemoveReply>;
using OdsStat = net::MethodDef<kServiceOds, 5, StatRequest, StatReply>;
using OdsSync = net::MethodDef<kServiceOds, 6, SyncRequest, SyncReply>;
using OdsStatFs = net::MethodDef<kServiceOds, 7, StatFsRequest, StatFsReply>;
using OdsScrub = net::MethodDef<kServiceOds, 8, ScrubRequest, ScrubReply>;

// between data servers (chain replication and resync, docs/redundancy.md)
using OdsChainForward = net::MethodDef<kServiceOds, 9, ChainForwardRequest, ChainForwardReply>;
using OdsListChunks = net::MethodDef<kServiceOds, 10, ListChunksRequest, ListChunksReply>;
using OdsResyncChunk = net::MethodDef<kServiceOds, 11, ResyncChunkRequest, ResyncChunkReply>;
using OdsFallocate = net::MethodDef<kServiceOds, 12, FallocateRequest, FallocateReply>;
using OdsEcCommit = net::MethodDef<kServiceOds, 13, EcCommitRequest, EcCommitReply>;

}  // namespace surge::proto::ods
