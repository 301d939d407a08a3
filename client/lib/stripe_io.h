// StripeIo: the striped data path. A file range is split at stripe
// boundaries (common/stripe_map.h), and again into pieces no larger than
// kMaxPiece; the pieces go to their data servers in parallel (call_async on
// each), at most max_inflight_bytes outstanding at once, and an IO completes
// only when every piece it issued has completed (so no data server touches
// the caller's memory after we return, even on error).
//
// Checksums: writes carry the CRC32C of each piece, which the data server
// checks; reads verify the CRC32C the data server returns, and a mismatch is
// Corruption (EIO), never silent bad bytes. Failures of a data server (down,
// refused, timed out) are IOError naming the target and address, within the
// io timeout, and mark the cluster map stale so the next IO finds the server
// again if it came back elsewhere.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>

#include "client/lib/cluster_map_cache.h"
#include "common/status.h"
#include "net/proto/ods.pb.h"
#include "net/rpc_channel.h"
#include "surge/client.h"

namespace surge::client {

class StripeIo;

// A data server's refusal of a request made under an old map: the target
// id it names is not the server's own (its address now serves another
// target), or the chain version is stale. The map is marked stale; the
// IO is worth doing again under a fresh one.
bool is_refusal(Code c);

// The pieces of one write in flight (StripeIo::start_write). wait() blocks
// until every piece has completed and returns the first error; the data
// servers may read the source buffer until then.
class WriteBatch {
 public:
  // Called by wait() when a data server refused a piece (is_refusal): its
  // answer (the IO done again under a fresh map, DataPath) replaces the
  // refusal.
  using OnRefused = std::function<Status(const Status& refusal)>;
  Status wait();
  ~WriteBatch() { (void)wait(); }
  void set_on_refused(OnRefused f) { on_refused_ = std::move(f); }

 private:
  friend class StripeIo;
  void finish_calls();
  OnRefused on_refused_;
  struct Call {
    net::PendingCall call;
    uint32_t target;
    uint64_t object_offset;
    std::string addr;
  };
  StripeIo* io_ = nullptr;
  uint64_t object_id_ = 0;
  std::vector<Call> calls_;
  Status status_;
  bool done_ = false;
};

// The pieces of one read in flight (StripeIo::start_read). wait() blocks
// until every piece has landed and been checked (CRC32C; holes and short
// objects as zeros) and returns the first error; the data servers may
// write into the destination until then.
class ReadBatch {
 public:
  using OnRefused = std::function<Status(const Status& refusal)>;  // as WriteBatch's
  Status wait();
  ~ReadBatch() { (void)wait(); }
  void set_on_refused(OnRefused f) { on_refused_ = std::move(f); }

 private:
  friend class StripeIo;
  OnRefused on_refused_;
  struct Call {
    net::PendingCall call;
    uint32_t target;
    uint64_t object_offset;
    std::byte* dst;
    size_t length;
    std::string addr;
  };
  void finish_front();
  StripeIo* io_ = nullptr;
  uint64_t object_id_ = 0;
  std::deque<Call> calls_;
  uint64_t inflight_bytes_ = 0;
  Status status_;
  bool done_ = false;
};

class StripeIo {
 public:
  static constexpr uint64_t kMaxPiece = 1u << 20;

  struct Options {
    std::chrono::milliseconds io_timeout{10000};
    size_t max_inflight_bytes = 32u << 20;
  };
  StripeIo(ClusterMapCache* map, net::ChannelPool* channels, Options options)
      : map_(map), channels_(channels), options_(options) {}

  // Writes [offset, offset + len) of file object_id from buf.
  Status write(uint64_t object_id, const StripeLayout& layout, const void* buf, size_t len,
               uint64_t offset);
  // Issues the whole write at once and returns without waiting (write
  // behind): buf must stay valid until the batch's wait() returns. The
  // caller bounds how much it keeps in flight.
  std::unique_ptr<WriteBatch> start_write(uint64_t object_id, const StripeLayout& layout,
                                          const void* buf, size_t len, uint64_t offset);
  // Reads [offset, offset + len) into buf; the caller clamps to the file
  // size. Bytes no data server holds (holes, short objects) read as zeros.
  Status read(uint64_t object_id, const StripeLayout& layout, void* buf, size_t len,
              uint64_t offset);
  // Issues the whole read at once (read ahead) and returns without waiting:
  // buf must stay valid until the batch's wait() returns.
  std::unique_ptr<ReadBatch> start_read(uint64_t object_id, const StripeLayout& layout, void* buf,
                                        size_t len, uint64_t offset);
  // fallocate of the file range [offset, offset + length): one OdsFallocate
  // per target whose object the range touches, all at once (fallocate.cpp).
  Status fallocate(uint64_t object_id, const StripeLayout& layout, uint64_t offset,
                   uint64_t length, proto::ods::FallocateMode mode, bool keep_size);
  // Makes object_id durable on every target of the layout.
  Status sync(uint64_t object_id, const StripeLayout& layout);

 private:
  friend class WriteBatch;
  friend class ReadBatch;
  void issue_read(ReadBatch& b, uint64_t object_id, std::byte* dst, uint32_t target,
                  uint64_t object_offset, size_t length);
  Result<std::shared_ptr<net::RpcChannel>> channel_for(uint32_t target_id, std::string* addr);
  Status target_error(uint32_t target_id, const std::string& addr, const Status& st,
                      const char* what);

  ClusterMapCache* map_;
  net::ChannelPool* channels_;
  Options options_;
};

}  // namespace surge::client
