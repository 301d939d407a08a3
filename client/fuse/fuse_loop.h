// FuseLoop: surge-fuse's multi-threaded session loop, in place of libfuse's
// fuse_session_loop_mt. The difference is where requests land: each worker
// receives into a buffer of the client's registered pool, so a FUSE_WRITE's
// bytes go to the data servers straight from where the kernel put them
// (op_write takes the buffer with take_receive_buffer, and the worker gets
// another for its next request) instead of being copied once more into
// write-behind memory.
//
// Workers are a fixed set, blocked in read(2) on /dev/fuse, where the kernel
// wakes one per request. The loop ends on unmount (ENODEV) or on SIGTERM,
// SIGINT or SIGHUP (install_exit_signals); then each worker is woken out of
// its read with SIGUSR1 and joined, after finishing the request it has.
#pragma once

#include <fuse_lowlevel.h>

#include <cstddef>
#include <memory>

#include "surge/client.h"

namespace surge::fuse {

// What libfuse reads per request: 256 pages of data plus a page of headers
// (its FUSE_MAX_MAX_PAGES and FUSE_BUFFER_HEADER_SIZE).
size_t receive_buffer_size();

// SIGTERM/SIGINT/SIGHUP end the loop of se; SIGPIPE is ignored.
void install_exit_signals(fuse_session* se);
void remove_exit_signals();

// Runs `threads` workers until the session ends. 0, or a negative errno
// when reading /dev/fuse failed.
int run_fuse_loop(fuse_session* se, Client& client, unsigned threads);

// Called from an operation: when [data, data + len) lies inside the
// registered buffer the calling worker received its request into, hands
// that buffer over (the worker uses another for the next request). Null
// otherwise (plain memory, or not on a loop worker).
std::unique_ptr<RegisteredBuffer> take_receive_buffer(const void* data, size_t len);

// The raw request (kernel header first) the calling worker is processing,
// and its length; null off a loop worker.
const std::byte* current_request(size_t* len);

}  // namespace surge::fuse
