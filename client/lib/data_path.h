// DataPath: the one way bytes travel between this client and the data
// servers. Write behind, read ahead, the direct reads and writes of
// libsurge and, through them, every read and write of the mount go through
// it, so placement (which target a piece of a file goes to) and what
// happens when a target fails are decided here and only here. Today a
// piece goes to the single target its stripe names (StripeIo), and a
// failed target fails the IO with EIO after the io timeout; replicated
// chains and per-chain retry (docs/redundancy.md) replace that here.
//
// Every request names the target it is meant for; a data server that is
// another target (its address was reused, our map is old) refuses it
// (WrongTarget, is_refusal). Then the map is fetched again and the whole
// IO is done again, until it is served or the io timeout has passed since
// it began: a refusal never reaches the application while the map can
// still tell us where the target went.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "client/lib/cluster_map_cache.h"
#include "client/lib/stripe_io.h"
#include "common/status.h"
#include "net/rpc_channel.h"
#include "surge/client.h"

namespace surge::client {

class DataPath {
 public:
  DataPath(ClusterMapCache* map, net::ChannelPool* channels, StripeIo::Options options)
      : io_(map, channels, options), io_timeout_(options.io_timeout) {}

  // [offset, offset + len) of file ino from buf; returns when it is stored.
  Status write(Ino ino, const StripeLayout& layout, const void* buf, size_t len, uint64_t offset);
  // The same, issued at once and not waited for (write behind): buf must
  // stay valid until the batch's wait() returns.
  std::unique_ptr<WriteBatch> start_write(Ino ino, const StripeLayout& layout, const void* buf,
                                          size_t len, uint64_t offset);
  // [offset, offset + len) into buf (the caller clamps to the file size);
  // holes and short objects read as zeros.
  Status read(Ino ino, const StripeLayout& layout, void* buf, size_t len, uint64_t offset);
  // The same, issued at once and not waited for (read ahead).
  std::unique_ptr<ReadBatch> start_read(Ino ino, const StripeLayout& layout, void* buf, size_t len,
                                        uint64_t offset);
  // fallocate of the file range [offset, offset + length) on every target
  // it touches (reserve, punch or zero; fallocate.cpp).
  Status fallocate(Ino ino, const StripeLayout& layout, uint64_t offset, uint64_t length,
                   proto::ods::FallocateMode mode, bool keep_size);
  // Makes what was written to ino durable on every target of its layout.
  Status sync(Ino ino, const StripeLayout& layout);

 private:
  // Runs attempt() again while it is refused, until the io timeout.
  Status retry_refused(const std::function<Status()>& attempt, Status first);

  StripeIo io_;
  std::chrono::milliseconds io_timeout_;
};

}  // namespace surge::client
