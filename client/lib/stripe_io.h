// StripeIo: the striped data path. A file range is mapped to the chunks
// that hold it (common/chunk_map.h, the one mapping for every layout
// format) and cut again into pieces no larger than kMaxPiece; each piece
// goes to the member of its chain that the request wants (chain_route.h:
// updates to the head, reads spread over the serving members; an EC
// chunk's requests to the member of its position, a read whose position
// does not serve rebuilt from K others: ec_rebuild.cpp), or for a
// format 1 layout to the slot's target, all in parallel (call_async on
// each), at most max_inflight_bytes outstanding at once. An IO completes
// only when every piece it issued has completed (so no data server touches
// the caller's memory after we return, even on error).
//
// Every request carries a ChunkRef: the target it is meant for, and for a
// chained chunk its chain, the chain version this client used and the
// chunk id {ino, slot, position} (object_id 0). Format 1 pieces name their
// target and object_id = ino, as before chains.
//
// StripeIo makes one attempt per piece and hands back the pieces that
// failed, with what they failed of (PieceFailure); what to do about them
// (a fresh map, another member, a report to the MDS, giving up) is
// DataPath's. Checksums: writes carry the CRC32C of each piece, which the
// data server checks; reads verify the CRC32C the data server returns (a
// mismatch is a Corruption failure of that piece, never silent bad bytes).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "client/lib/chain_route.h"
#include "client/lib/cluster_map_cache.h"
#include "client/lib/parity_buffers.h"
#include "common/chunk_map.h"
#include "common/ec/rs_codec.h"
#include "common/file_layout.h"
#include "common/status.h"
#include "net/proto/ods.pb.h"
#include "net/rpc_channel.h"

namespace surge::client {

class StripeIo;
class EcGroupWrite;

// A data server's refusal of a request made under an old map: the target
// id it names is not the server's own (its address now serves another
// target), or the chain version is stale. The IO is worth doing again
// under a fresh map.
bool is_refusal(Code c);
// The request never got an answer from the target: connecting failed, the
// connection dropped, or the call timed out (not an error reply).
bool is_unreachable(Code c);

enum class IoOp { kWrite, kRead, kSync, kFallocate };

// What one IO does; copied into the batch, so it outlives the caller's
// frame (buf must stay valid until the batch's wait() returns).
struct IoRequest {
  IoOp op = IoOp::kRead;
  uint64_t ino = 0;
  FileLayout layout;
  std::byte* buf = nullptr;  // write: the source; read: the destination
  proto::ods::FallocateMode mode = proto::ods::FALLOCATE_RESERVE;  // kFallocate
  bool keep_size = false;                                          // kFallocate
};

// The ChunkRef of piece c of r sent to target under chain_version: the
// chunk id, and the file's last truncate in that chunk's terms.
void set_chunk_ref(proto::ods::ChunkRef* ref, const IoRequest& r, const ChunkPiece& c,
                   uint32_t target, uint64_t chain_version);

// buf: the source of a write, the destination of a read, null otherwise.
IoRequest make_request(IoOp op, uint64_t ino, const FileLayout& layout, const void* buf);

// One piece of an IO: a part of one chunk (the whole chunk for a sync).
struct IoPiece {
  ChunkPiece chunk;         // chunk id, chain or target, chunk and file offset, length
  uint64_t buf_offset = 0;  // from the start of the request's buffer
  RouteHint hint;           // what earlier attempts learnt
  Status previous;          // how the last attempt failed (for the final error)
};

// One attempt of a piece that failed.
struct PieceFailure {
  IoPiece piece;
  uint32_t target_id = 0;      // where it went (0: nowhere)
  uint64_t chain_version = 0;  // the chain version it carried
  bool ec_stand_in = false;    // an EC data position's write sent to its stand-in
  std::string addr;            // the target's address ("" when none was found)
  Status status;               // the raw outcome: an error reply or a transport error
  bool unreachable = false;    // is_unreachable: the target did not answer
  bool no_route = false;       // no member to send it to, or no map to tell
};

// The pieces of one IO in flight. wait() blocks until every piece has
// completed (the data servers may read or write the request's buffer until
// then) and returns OK, or what the on_failed hook made of the failed
// pieces (DataPath: another attempt), or without a hook the first failure
// as an error naming the chunk, the target and its address.
class IoBatch {
 public:
  using OnFailed = std::function<Status(std::vector<PieceFailure> failed)>;
  Status wait();
  IoBatch();
  ~IoBatch();
  void set_on_failed(OnFailed f) { on_failed_ = std::move(f); }
  // After wait(): the pieces that failed their attempt.
  const std::vector<PieceFailure>& failures() const { return failed_; }

 private:
  friend class StripeIo;
  friend class EcGroupWrite;
  struct Call {
    net::PendingCall call;
    PieceFailure attempt;  // piece, target, address; status filled on failure
  };
  // An EC read whose position does not serve, rebuilt once every other
  // piece of the batch is in flight.
  struct Rebuild {
    PieceFailure attempt;
    proto::mds::Chain chain;
  };
  void finish_front();
  void finish_rebuilds();
  // The EC full-group writes begun: their remaining steps, for all at once.
  void finish_groups();
  // a failed with st: into failed_ (an unreachable target's connection dropped).
  void record(PieceFailure a, Status st);

  StripeIo* io_ = nullptr;
  IoRequest req_;
  std::deque<Call> calls_;
  std::vector<Rebuild> rebuilds_;
  std::vector<std::unique_ptr<EcGroupWrite>> groups_;
  uint64_t inflight_bytes_ = 0;
  std::chrono::milliseconds timeout_{0};  // of each request it sends
  std::vector<PieceFailure> failed_;
  OnFailed on_failed_;
  bool done_ = false;
  Status result_;
};
using WriteBatch = IoBatch;
using ReadBatch = IoBatch;

class StripeIo {
 public:
  static constexpr uint64_t kMaxPiece = 1u << 20;
  // Parity buffers kept for the next full-group run (16 MiB at most).
  static constexpr size_t kKeptParityBuffers = 16;

  struct Options {
    std::chrono::milliseconds io_timeout{10000};       // an IO, retries included
    std::chrono::milliseconds attempt_timeout{10000};  // one request (<= io_timeout)
    size_t max_inflight_bytes = 32u << 20;
  };
  StripeIo(ClusterMapCache* map, net::ChannelPool* channels, Options options)
      : map_(map), channels_(channels), options_(options) {}

  // The pieces of an IO: for writes and reads [offset, offset + len) cut
  // at stripe units and kMaxPiece; for a fallocate the range of each chunk
  // the file range touches; for a sync every chunk of the file.
  static std::vector<IoPiece> plan(const IoRequest& r, uint64_t offset, uint64_t len);
  // InvalidArgument (EIO) naming the file for a layout StripeIo cannot use.
  static Status check(const IoRequest& r);

  // Issues every piece of [offset, offset + len) at once and returns
  // without waiting (write behind, read ahead): the caller bounds how much
  // it keeps in flight. A layout check() refuses fails the batch's wait().
  std::unique_ptr<IoBatch> start(const IoRequest& r, uint64_t offset, uint64_t len);
  // Issues the pieces with at most max_inflight_bytes outstanding and
  // waits for all; returns the ones that failed. Each request may take
  // timeout (the attempt timeout when not given).
  std::vector<PieceFailure> run(const IoRequest& r, std::vector<IoPiece> pieces);
  std::vector<PieceFailure> run(const IoRequest& r, std::vector<IoPiece> pieces,
                                std::chrono::milliseconds timeout);
  const Options& options() const { return options_; }

  // The error the application sees for a failed piece: its status with
  // what was done, to which chunk (or object), target and address.
  static Status describe(const IoRequest& r, const PieceFailure& f);

  // One attempt of a whole IO, the first failure as the error (no retry):
  // what tests of the engine alone use.
  Status write(uint64_t ino, const FileLayout& layout, const void* buf, size_t len,
               uint64_t offset);
  Status read(uint64_t ino, const FileLayout& layout, void* buf, size_t len, uint64_t offset);
  Status sync(uint64_t ino, const FileLayout& layout);

 private:
  friend class IoBatch;
  friend class EcGroupWrite;
  // Routes and sends one piece into b (a failure to route or connect is
  // recorded as failed at once).
  void issue(IoBatch& b, IoPiece piece);
  // Issues r's pieces into b: EC full groups as EcGroupWrite, the rest one
  // by one (issue). max_inflight: finish what is outstanding first when
  // it would pass this many bytes (0: no bound).
  void issue_all(IoBatch& b, std::vector<IoPiece> pieces, size_t max_inflight);
  // The address and a channel for a.target_id (a.addr set); on failure a
  // says whether the target was unreachable.
  Result<std::shared_ptr<net::RpcChannel>> connect(PieceFailure& a);
  // The codec of K+M, made once.
  Result<const ec::RsCodec*> codec(uint32_t k, uint32_t m);
  // A read of an EC piece whose position does not serve: rebuilt into the
  // request's buffer from K other positions of its group (ec_rebuild.cpp).
  // On failure, a names the position that failed (target, address).
  Status read_rebuilt(const IoRequest& r, PieceFailure& a, const proto::mds::Chain& chain,
                      std::chrono::milliseconds timeout);
  Status first_failure(const IoRequest& r, const std::vector<PieceFailure>& failed);

  ClusterMapCache* map_;
  net::ChannelPool* channels_;
  Options options_;
  std::mutex codecs_mu_;
  std::map<std::pair<uint32_t, uint32_t>, std::unique_ptr<ec::RsCodec>> codecs_;
  // Full-group runs' parity buffers: one window each, a few kept.
  ParityBuffers parity_{kMaxPiece, kKeptParityBuffers};
};

}  // namespace surge::client
