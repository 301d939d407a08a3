#include "common/daemon/malloc_bounds.h"

#include <malloc.h>

namespace surge::daemon {

Status bound_malloc(const std::string& name, uint32_t arena_max, uint64_t mmap_threshold_bytes) {
  if (arena_max != 0 && mallopt(M_ARENA_MAX, static_cast<int>(arena_max)) != 1) {
    return Status::InvalidArgument(name + ": the allocator refused M_ARENA_MAX " +
                                   std::to_string(arena_max));
  }
  // Setting the threshold also stops glibc from raising it (mallopt(3)).
  if (mmap_threshold_bytes != 0 &&
      mallopt(M_MMAP_THRESHOLD, static_cast<int>(mmap_threshold_bytes)) != 1) {
    return Status::InvalidArgument(name + ": the allocator refused M_MMAP_THRESHOLD " +
                                   std::to_string(mmap_threshold_bytes));
  }
  return Status::OK();
}

}  // namespace surge::daemon
