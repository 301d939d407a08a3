#include "client/lib/registered_buffers.h"

#include <cstdlib>
#include <string>

namespace surge::client {

namespace {

class PoolRegisteredBuffer : public RegisteredBuffer {
 public:
  explicit PoolRegisteredBuffer(net::PoolBuffer b, size_t size) : buf_(std::move(b)), size_(size) {}
  std::byte* data() override { return buf_.data(); }
  size_t size() const override { return size_; }

 private:
  net::PoolBuffer buf_;
  size_t size_;
};

// Larger than the pool's biggest class, or the pool is busy.
class HeapRegisteredBuffer : public RegisteredBuffer {
 public:
  explicit HeapRegisteredBuffer(size_t size) : size_(size) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, size) != 0) p = nullptr;
    data_ = static_cast<std::byte*>(p);
  }
  ~HeapRegisteredBuffer() override { free(data_); }
  std::byte* data() override { return data_; }
  size_t size() const override { return size_; }
  bool ok() const { return data_ != nullptr; }

 private:
  std::byte* data_ = nullptr;
  size_t size_;
};

}  // namespace

Result<std::unique_ptr<RegisteredBuffer>> pool_buffer(net::BufferPool& pool, size_t size) {
  SURGE_ASSIGN_OR_RETURN(net::PoolBuffer b, pool.try_acquire(size));
  return std::unique_ptr<RegisteredBuffer>(new PoolRegisteredBuffer(std::move(b), size));
}

Result<std::unique_ptr<RegisteredBuffer>> any_buffer(net::BufferPool& pool, size_t size) {
  if (auto b = pool_buffer(pool, size); b.ok()) return b;
  auto h = std::make_unique<HeapRegisteredBuffer>(size);
  if (!h->ok())
    return Status::ResourceExhausted("cannot allocate a " + std::to_string(size) + "-byte buffer");
  return std::unique_ptr<RegisteredBuffer>(std::move(h));
}

}  // namespace surge::client
