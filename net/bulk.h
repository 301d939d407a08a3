// Bulk transfer: client memory regions a request describes, and the
// server-side handle through which a handler moves them.
//
// Server-driven, as in Lustre, 3FS and Mercury: the client describes memory;
// the server pulls (client -> server, RDMA READ) or pushes (server -> client,
// RDMA WRITE) it. Over TCP the same calls stream the bytes on the
// connection. Handlers never know which transport they run on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"
#include "net/buffer_pool.h"

namespace surge::net {

enum class BulkAccess : uint8_t {
  kServerPull = 1,  // the server may read this region (write data)
  kServerPush = 2,  // the server may write this region (read data)
};

// Client side: one region of the caller's memory exposed for one call only.
// For zero copy over RDMA the memory should lie in a registered BufferPool
// buffer; other memory is bounced through the pool by the transport.
struct BulkRegion {
  void* addr = nullptr;
  uint64_t length = 0;
  BulkAccess access = BulkAccess::kServerPull;
};

// Server side view of a request's regions. Valid only inside the handler.
class BulkHandle {
 public:
  virtual ~BulkHandle() = default;
  virtual size_t count() const = 0;
  virtual uint64_t length(size_t region) const = 0;
  virtual BulkAccess access(size_t region) const = 0;

  // Copies [offset, offset + dst.size()) of the client's region into dst.
  // Over TCP the pulled bytes arrive in stream order: pull regions in
  // ascending order and each from offset 0 upwards without gaps (anything
  // not pulled is discarded after the handler returns). dst should lie in
  // the server's BufferPool (RDMA needs registered memory).
  // Errors: OutOfRange past the region, InvalidArgument for a region that is
  // not kServerPull or an out-of-order TCP pull, Disconnected, TimedOut.
  virtual Status pull(size_t region, uint64_t offset, std::span<std::byte> dst) = 0;

  // Writes src into the client's region at offset; done before this returns,
  // so the reply that follows is ordered after the data. Any order is fine.
  virtual Status push(size_t region, uint64_t offset, std::span<const std::byte> src) = 0;

  // push of the first len bytes of a server pool buffer the handler gives
  // up. A transport may keep the buffer until the bytes are out instead of
  // copying them or waiting (RDMA posts the WRITE and lets the reply follow
  // it on the queue pair); the reply is still ordered after the data. By
  // default: push, then the buffer goes back to its pool.
  virtual Status push_owned(size_t region, uint64_t offset, PoolBuffer buf, size_t len) {
    if (len > buf.capacity()) {
      return Status::InvalidArgument("push of " + std::to_string(len) + " bytes from a " +
                                     std::to_string(buf.capacity()) + "-byte buffer");
    }
    return push(region, offset, std::span<const std::byte>(buf.data(), len));
  }
};

}  // namespace surge::net
