// The memory libsurge lends its callers for IO without a copy
// (Client::register_buffer, Client::try_pool_buffer) and uses itself for
// reads that land outside the caller's memory: a buffer of the client's
// registered pool when one is free, else page-aligned heap memory, which the
// transport bounces through its pool over RDMA.
#pragma once

#include <cstddef>
#include <memory>

#include "common/status.h"
#include "net/buffer_pool.h"
#include "surge/client.h"

namespace surge::client {

// A pool buffer of at least size bytes, or ResourceExhausted when none is
// free (never waits).
Result<std::unique_ptr<RegisteredBuffer>> pool_buffer(net::BufferPool& pool, size_t size);
// A pool buffer when one is free, else heap memory. Never waits: write
// behind holds pool buffers for a while, and a reader is better served by
// plain memory (bounced over RDMA) than by a stall.
Result<std::unique_ptr<RegisteredBuffer>> any_buffer(net::BufferPool& pool, size_t size);

}  // namespace surge::client
