// How much freed memory glibc's allocator may keep in a long-running
// daemon. By default glibc makes up to 8 arenas per core, one per thread
// that meets contention, and each returns memory to the system only from
// the top of its heap; and its mmap threshold rises to the largest block
// freed so far, so large blocks that were once mmapped (and returned on
// free) later come from the heaps and stay. Under many request threads the
// MDS's RSS then rose for 30 minutes with a flat live heap
// (docs/operations.md, "MDS memory"). Bounding both levels it.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace surge::daemon {

// Call in main before any thread exists. arena_max 0 and
// mmap_threshold_bytes 0 leave glibc's own policy. A refusal names the
// daemon and the value.
Status bound_malloc(const std::string& name, uint32_t arena_max, uint64_t mmap_threshold_bytes);

}  // namespace surge::daemon
