// BufferPool: pinned, registered memory for everything that moves bulk data.
//
// Large slabs (huge pages when the system has them, else normal pages) are
// mmap'ed once, mlock'ed, and carved into fixed-size buffers of a few size
// classes. Acquire and release are lock-free per class (a tagged index
// stack), so the hot path takes no global lock. Each slab is shown once to
// every MemoryRegistrar (the RDMA transport registers it with ibv_reg_mr);
// nothing is registered on the hot path. The pool never grows past what it
// was created with: exhaustion waits (bounded) or fails with
// ResourceExhausted / TimedOut.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace surge::net {

struct SizeClass {
  size_t buffer_size;  // bytes per buffer (a power of two or a multiple of 4096)
  size_t count;        // buffers of this class
};

struct BufferPoolOptions {
  std::string name = "pool";
  std::vector<SizeClass> classes = {{4096, 512}, {64 * 1024, 128}, {1024 * 1024, 32}};
  bool huge_pages = true;   // try MAP_HUGETLB first, fall back quietly
  bool lock_memory = true;  // mlock; a failure is logged once, not fatal
};

// Sees each slab once: the RDMA transport registers it with a device.
class MemoryRegistrar {
 public:
  virtual ~MemoryRegistrar() = default;
  virtual Status register_slab(void* base, size_t len) = 0;
  virtual void unregister_slab(void* base, size_t len) = 0;
};

class BufferPool;

// One buffer on loan from a pool; returns itself on destruction. Move-only.
class PoolBuffer {
 public:
  PoolBuffer() = default;
  PoolBuffer(PoolBuffer&& o) noexcept { *this = std::move(o); }
  PoolBuffer& operator=(PoolBuffer&& o) noexcept;
  PoolBuffer(const PoolBuffer&) = delete;
  PoolBuffer& operator=(const PoolBuffer&) = delete;
  ~PoolBuffer() { reset(); }

  std::byte* data() const { return data_; }
  size_t capacity() const { return capacity_; }
  std::span<std::byte> span() const { return {data_, capacity_}; }
  explicit operator bool() const { return data_ != nullptr; }
  void reset();  // give the buffer back now

 private:
  friend class BufferPool;
  BufferPool* pool_ = nullptr;
  uint32_t class_index_ = 0;
  uint32_t buffer_index_ = 0;
  std::byte* data_ = nullptr;
  size_t capacity_ = 0;
};

class BufferPool {
 public:
  static Result<std::unique_ptr<BufferPool>> Create(const BufferPoolOptions& options);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A buffer of at least min_size from the smallest class that fits, now.
  // ResourceExhausted when that class is empty, InvalidArgument when
  // min_size exceeds the largest class.
  Result<PoolBuffer> try_acquire(size_t min_size);
  // Same, waiting up to `wait` for a buffer to come back (TimedOut then).
  Result<PoolBuffer> acquire(size_t min_size, std::chrono::milliseconds wait);

  // Registers every slab with r now, and unregisters them when the pool
  // goes or remove_registrar(r) is called. The pool holds `owner` (the
  // object that owns r, e.g. the RDMA device) until then, so r outlives
  // every call the pool makes on it, whichever thread destroys what first.
  Status add_registrar(MemoryRegistrar* r, std::shared_ptr<void> owner = nullptr);
  // Unregisters r's slabs; returns the owner the pool held for r, for the
  // caller to drop once it holds no lock of r's (null when r was not added,
  // or the pool is being destroyed and unregisters it itself).
  std::shared_ptr<void> remove_registrar(MemoryRegistrar* r);

  // True when [p, p+len) lies inside one slab of this pool.
  bool contains(const void* p, size_t len) const;
  size_t max_buffer_size() const;
  const std::string& name() const { return options_.name; }

  struct ClassStats {
    size_t buffer_size;
    size_t total;
    size_t free;
  };
  std::vector<ClassStats> stats() const;
  // Whether every class has at least n free buffers right now (a snapshot:
  // for a decision that must not lead to a wait, such as running a handler
  // on a thread that alone can give buffers back). Lock-free.
  bool every_class_has_free(size_t n) const;

 private:
  struct Slab;
  explicit BufferPool(BufferPoolOptions options);
  void release(uint32_t class_index, uint32_t buffer_index);
  friend class PoolBuffer;

  BufferPoolOptions options_;
  std::vector<std::unique_ptr<Slab>> slabs_;  // one per size class
  struct Registration {
    MemoryRegistrar* registrar;
    std::shared_ptr<void> owner;
  };
  // Guards registrars_ only: nothing is called on a registrar under it, so
  // a registrar may call back into the pool (the RDMA device's teardown).
  std::mutex registrars_mu_;
  std::vector<Registration> registrars_;
  // remove_registrar() calls still walking the slabs after taking their
  // registrar out of the list: the destructor waits for them before the
  // slabs go (under registrars_mu_).
  int walkers_ = 0;
  std::condition_variable walkers_done_;
};

}  // namespace surge::net
