// DataPath: the one way bytes travel between this client and the data
// servers. Write behind, read ahead, fallocate, the direct reads and
// writes of libsurge and, through them, every read and write of the mount
// go through it, so placement (which member of which chain a piece of a
// file goes to: chain_route.h, through StripeIo) and what a failed
// attempt means are decided here and only here (docs/redundancy.md, "What
// the client does").
//
// A piece whose attempt failed is tried again, alone, under this policy:
// * StaleChain, WrongTarget (our map is old): refetch the cluster map and
//   send it where the new map says.
// * ChunkDirty (a read of a chunk with an update in flight): to the
//   chain's last SERVING member. NotServing (a syncing member), or a read
//   whose bytes failed their checksum: to another serving member.
// * The target could not be reached (refused, dropped, timed out): report
//   it to the MDS (MdsReportTargetFailure, which probes it and takes it
//   out of its chains when the probe fails too), refetch the map and
//   retry on the new chain. Only a failure to reach a target is reported,
//   never an error it answered. A format 1 piece has no other copy: it
//   fails at once, as before chains.
// * Unavailable (an answer: try later): refetch and retry after a pause.
// * EC chunks (chain_route.h, ec_member): a read whose position's member
//   does not serve or failed is rebuilt from K others by StripeIo; a write
//   to such a position is Unavailable until it serves again (no degraded
//   writes yet).
// Anything else is the error. The application sees an error (EIO) only
// when a piece has no member left to try, or the io timeout has passed
// since the IO began; the error names the chunk, the target and address.
// Each attempt may take the attempt timeout (half the io timeout by
// default), a retry no more than what is left: a request stalled on a
// server that is being killed then still leaves time for a retry on the
// chain the MDS makes without it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "client/lib/cluster_map_cache.h"
#include "client/lib/stripe_io.h"
#include "common/file_layout.h"
#include "common/status.h"
#include "net/proto/mds.pb.h"
#include "net/rpc_channel.h"

namespace surge::client {

class DataPath {
 public:
  // Sends a report to the MDS; its reply says whether the target is still
  // up (the probe answered) and the map version.
  using ReportFailure = std::function<Result<proto::mds::ReportTargetFailureReply>(
      const proto::mds::ReportTargetFailureRequest&)>;

  DataPath(ClusterMapCache* map, net::ChannelPool* channels, StripeIo::Options options,
           ReportFailure report, std::string reporter)
      : map_(map),
        io_(map, channels, options),
        io_timeout_(options.io_timeout),
        report_(std::move(report)),
        reporter_(std::move(reporter)) {}

  // [offset, offset + len) of file ino from buf; returns when it is stored.
  Status write(uint64_t ino, const FileLayout& layout, const void* buf, size_t len,
               uint64_t offset);
  // The same, issued at once and not waited for (write behind): buf must
  // stay valid until the batch's wait() returns (which retries).
  std::unique_ptr<WriteBatch> start_write(uint64_t ino, const FileLayout& layout, const void* buf,
                                          size_t len, uint64_t offset);
  // [offset, offset + len) into buf (the caller clamps to the file size);
  // holes and short chunks read as zeros.
  Status read(uint64_t ino, const FileLayout& layout, void* buf, size_t len, uint64_t offset);
  // The same, issued at once and not waited for (read ahead).
  std::unique_ptr<ReadBatch> start_read(uint64_t ino, const FileLayout& layout, void* buf,
                                        size_t len, uint64_t offset);
  // fallocate of the file range [offset, offset + length) on every chunk
  // it touches (reserve, punch or zero; fallocate.cpp).
  Status fallocate(uint64_t ino, const FileLayout& layout, uint64_t offset, uint64_t length,
                   proto::ods::FallocateMode mode, bool keep_size);
  // Makes what was written to ino durable on every chunk of its layout.
  Status sync(uint64_t ino, const FileLayout& layout);

 private:
  using Clock = std::chrono::steady_clock;
  // Runs the pieces of the range (StripeIo::plan) and retries the failed
  // ones until done or the io timeout.
  Status run(const IoRequest& r, uint64_t offset, uint64_t len);
  // Retries failed pieces under the policy above, until deadline.
  Status recover(const IoRequest& r, std::vector<PieceFailure> failed, Clock::time_point deadline);
  // Reports a target that did not answer; true when the MDS still counts
  // it up (its probe answered): then the retry waits a little.
  bool report(const IoRequest& r, const PieceFailure& f);

  ClusterMapCache* map_;
  StripeIo io_;
  std::chrono::milliseconds io_timeout_;
  ReportFailure report_;
  std::string reporter_;
};

}  // namespace surge::client
