// ParityBuffers: the buffers a client's full-group EC writes encode their
// parity into (ec_group_write.h), kept for the next run instead of freed.
// A buffer of a run's size fresh from the heap is fresh pages from the
// kernel, each first touch a page fault and a zeroed page: 2 of them per
// 4 MiB of a 4+2 write, and on 16 MiB writes they were most of the
// client's page faults (75,000 per GiB written against 8,900 for replicas
// 1).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace surge::client {

class ParityBuffers {
 public:
  // Buffers of `bytes` each; at most `keep` of them kept while unused.
  ParityBuffers(size_t bytes, size_t keep) : bytes_(bytes), keep_(keep) {}

  size_t bytes() const { return bytes_; }
  // A kept buffer, or a new one (its bytes unset).
  std::unique_ptr<std::byte[]> take();
  // Back for the next run; freed when `keep` are kept already.
  void give(std::unique_ptr<std::byte[]> b);

 private:
  const size_t bytes_;
  const size_t keep_;
  std::mutex mu_;
  std::vector<std::unique_ptr<std::byte[]>> free_;
};

}  // namespace surge::client
