// ParityBuffers: see parity_buffers.h.
#include "client/lib/parity_buffers.h"

namespace surge::client {

std::unique_ptr<std::byte[]> ParityBuffers::take() {
  {
    std::lock_guard lk(mu_);
    if (!free_.empty()) {
      auto b = std::move(free_.back());
      free_.pop_back();
      return b;
    }
  }
  return std::unique_ptr<std::byte[]>(new std::byte[bytes_]);
}

void ParityBuffers::give(std::unique_ptr<std::byte[]> b) {
  if (!b) return;
  std::lock_guard lk(mu_);
  if (free_.size() < keep_) free_.push_back(std::move(b));
}

}  // namespace surge::client
