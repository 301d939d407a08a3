// BufferPool: one mmap'ed, mlock'ed slab per size class, carved into
// fixed-size buffers, with a lock-free tagged index stack per class.
//
// Free list: `head` packs (tag << 32 | index); `next[i]` links free buffers.
// Every successful CAS bumps the tag, so a pop that read a stale head can
// never succeed (no ABA). Waiters for an empty class sleep on one condvar
// per class; release() only touches the mutex when someone is waiting.
#include "net/buffer_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "common/log.h"

namespace surge::net {

namespace {
constexpr uint32_t kEmpty = 0xffffffffu;
constexpr size_t kHugePage = 2u << 20;

uint32_t idx_of(uint64_t head) { return static_cast<uint32_t>(head); }
uint64_t pack(uint64_t tag, uint32_t idx) { return (tag << 32) | idx; }

std::once_flag g_mlock_warned;
}  // namespace

struct BufferPool::Slab {
  size_t buffer_size = 0;
  size_t count = 0;
  std::byte* base = nullptr;
  size_t mapped = 0;  // bytes mmap'ed (rounded up for huge pages)
  bool huge = false;
  std::unique_ptr<std::atomic<uint32_t>[]> next;
  std::atomic<uint64_t> head{pack(0, kEmpty)};
  std::atomic<size_t> free{0};
  std::atomic<int> waiters{0};
  std::mutex mu;
  std::condition_variable cv;

  ~Slab() {
    if (base != nullptr) ::munmap(base, mapped);
  }

  bool pop(uint32_t* out) {
    uint64_t h = head.load(std::memory_order_acquire);
    for (;;) {
      uint32_t i = idx_of(h);
      if (i == kEmpty) return false;
      uint32_t n = next[i].load(std::memory_order_relaxed);
      if (head.compare_exchange_weak(h, pack((h >> 32) + 1, n), std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
        free.fetch_sub(1, std::memory_order_relaxed);
        *out = i;
        return true;
      }
    }
  }

  void push(uint32_t i) {
    uint64_t h = head.load(std::memory_order_relaxed);
    for (;;) {
      next[i].store(idx_of(h), std::memory_order_relaxed);
      if (head.compare_exchange_weak(h, pack((h >> 32) + 1, i), std::memory_order_seq_cst,
                                     std::memory_order_relaxed)) {
        break;
      }
    }
    free.fetch_add(1, std::memory_order_relaxed);
    // Pairs with the waiter's seq_cst increment before its last pop attempt.
    if (waiters.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard lk(mu);
      cv.notify_one();
    }
  }
};

PoolBuffer& PoolBuffer::operator=(PoolBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    pool_ = o.pool_;
    class_index_ = o.class_index_;
    buffer_index_ = o.buffer_index_;
    data_ = o.data_;
    capacity_ = o.capacity_;
    o.pool_ = nullptr;
    o.data_ = nullptr;
    o.capacity_ = 0;
  }
  return *this;
}

void PoolBuffer::reset() {
  if (pool_ != nullptr && data_ != nullptr) pool_->release(class_index_, buffer_index_);
  pool_ = nullptr;
  data_ = nullptr;
  capacity_ = 0;
}

BufferPool::BufferPool(BufferPoolOptions options) : options_(std::move(options)) {}

Result<std::unique_ptr<BufferPool>> BufferPool::Create(const BufferPoolOptions& options) {
  BufferPoolOptions opts = options;
  if (opts.classes.empty()) {
    return Status::InvalidArgument("buffer pool '" + opts.name + "' has no size classes");
  }
  std::sort(opts.classes.begin(), opts.classes.end(),
            [](const SizeClass& a, const SizeClass& b) { return a.buffer_size < b.buffer_size; });
  for (size_t i = 0; i < opts.classes.size(); ++i) {
    const SizeClass& c = opts.classes[i];
    // Page multiples keep every buffer page-aligned; small powers of two pack.
    const bool shape_ok = std::has_single_bit(c.buffer_size) || c.buffer_size % 4096 == 0;
    if (c.buffer_size == 0 || !shape_ok || c.count == 0 ||
        c.count >= kEmpty) {
      return Status::InvalidArgument("buffer pool '" + opts.name + "': bad size class " +
                                     std::to_string(c.buffer_size) + " x " +
                                     std::to_string(c.count) +
                                     " (size must be a power of two or a multiple of 4096, count > 0)");
    }
    if (i > 0 && opts.classes[i - 1].buffer_size == c.buffer_size) {
      return Status::InvalidArgument("buffer pool '" + opts.name + "': size class " +
                                     std::to_string(c.buffer_size) + " given twice");
    }
  }
  std::unique_ptr<BufferPool> pool(new BufferPool(opts));
  for (const SizeClass& c : pool->options_.classes) {
    auto slab = std::make_unique<Slab>();
    slab->buffer_size = c.buffer_size;
    slab->count = c.count;
    size_t bytes = c.buffer_size * c.count;
    void* p = MAP_FAILED;
    if (opts.huge_pages && bytes >= kHugePage) {
      size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
      p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
      if (p != MAP_FAILED) {
        slab->mapped = rounded;
        slab->huge = true;
      }
    }
    if (p == MAP_FAILED) {
      p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) {
        return Status::FromErrno(errno, "mmap " + std::to_string(bytes) + " bytes for pool '" +
                                            opts.name + "'");
      }
      slab->mapped = bytes;
      // Transparent huge pages still help when MAP_HUGETLB has no reserve.
      if (opts.huge_pages) ::madvise(p, bytes, MADV_HUGEPAGE);
    }
    slab->base = static_cast<std::byte*>(p);
    if (opts.lock_memory && ::mlock(p, slab->mapped) != 0) {
      int err = errno;
      std::call_once(g_mlock_warned, [&] {
        SLOG_WARN("buffer pool '{}': mlock of {} bytes failed ({}); running unpinned "
                  "(raise RLIMIT_MEMLOCK for RDMA)",
                  opts.name, slab->mapped, std::strerror(err));
      });
    }
    slab->next = std::make_unique<std::atomic<uint32_t>[]>(c.count);
    // Build the free list so that buffer 0 pops first.
    for (size_t i = 0; i < c.count; ++i) {
      slab->next[i].store(i + 1 < c.count ? static_cast<uint32_t>(i + 1) : kEmpty);
    }
    slab->head.store(pack(0, 0));
    slab->free.store(c.count);
    pool->slabs_.push_back(std::move(slab));
  }
  return pool;
}

BufferPool::~BufferPool() {
  // Taken out under the lock, so a registrar removing itself meanwhile (a
  // device closing its last connection on another thread) finds nothing
  // and leaves the list alone; the owners go last, after every slab.
  std::vector<Registration> regs;
  {
    std::lock_guard lk(registrars_mu_);
    regs.swap(registrars_);
  }
  for (const Registration& reg : regs) {
    for (auto& s : slabs_) reg.registrar->unregister_slab(s->base, s->mapped);
  }
  // A registrar that took itself out just before the swap may still be
  // walking slabs_ (remove_registrar): the slabs must outlive its walk.
  std::unique_lock lk(registrars_mu_);
  walkers_done_.wait(lk, [this] { return walkers_ == 0; });
}

Result<PoolBuffer> BufferPool::try_acquire(size_t min_size) {
  for (uint32_t c = 0; c < slabs_.size(); ++c) {
    Slab& s = *slabs_[c];
    if (s.buffer_size < min_size) continue;
    uint32_t i;
    if (!s.pop(&i)) {
      return Status::ResourceExhausted("buffer pool '" + options_.name + "': no free " +
                                       std::to_string(s.buffer_size) + "-byte buffer");
    }
    PoolBuffer b;
    b.pool_ = this;
    b.class_index_ = c;
    b.buffer_index_ = i;
    b.data_ = s.base + size_t{i} * s.buffer_size;
    b.capacity_ = s.buffer_size;
    return b;
  }
  return Status::InvalidArgument("buffer pool '" + options_.name + "': " +
                                 std::to_string(min_size) + " bytes exceeds the largest class " +
                                 std::to_string(max_buffer_size()));
}

Result<PoolBuffer> BufferPool::acquire(size_t min_size, std::chrono::milliseconds wait) {
  Result<PoolBuffer> r = try_acquire(min_size);
  if (r.ok() || r.status().code() != Code::kResourceExhausted) return r;
  uint32_t c = 0;
  while (slabs_[c]->buffer_size < min_size) ++c;
  Slab& s = *slabs_[c];
  auto deadline = std::chrono::steady_clock::now() + wait;
  std::unique_lock lk(s.mu);
  s.waiters.fetch_add(1, std::memory_order_seq_cst);
  for (;;) {
    r = try_acquire(min_size);
    if (r.ok()) break;
    if (s.cv.wait_until(lk, deadline) == std::cv_status::timeout) {
      r = try_acquire(min_size);
      if (!r.ok()) {
        r = Status::TimedOut("buffer pool '" + options_.name + "': no free " +
                             std::to_string(s.buffer_size) + "-byte buffer within " +
                             std::to_string(wait.count()) + " ms");
      }
      break;
    }
  }
  s.waiters.fetch_sub(1, std::memory_order_seq_cst);
  return r;
}

void BufferPool::release(uint32_t class_index, uint32_t buffer_index) {
  slabs_[class_index]->push(buffer_index);
}

Status BufferPool::add_registrar(MemoryRegistrar* r, std::shared_ptr<void> owner) {
  for (size_t i = 0; i < slabs_.size(); ++i) {
    Status st = r->register_slab(slabs_[i]->base, slabs_[i]->mapped);
    if (!st.ok()) {
      for (size_t j = 0; j < i; ++j) r->unregister_slab(slabs_[j]->base, slabs_[j]->mapped);
      return st.WithContext("registering pool '" + options_.name + "'");
    }
  }
  std::lock_guard lk(registrars_mu_);
  registrars_.push_back({r, std::move(owner)});
  return Status::OK();
}

std::shared_ptr<void> BufferPool::remove_registrar(MemoryRegistrar* r) {
  std::shared_ptr<void> owner;
  {
    std::lock_guard lk(registrars_mu_);
    auto it = std::find_if(registrars_.begin(), registrars_.end(),
                           [r](const Registration& reg) { return reg.registrar == r; });
    if (it == registrars_.end()) return nullptr;
    owner = std::move(it->owner);
    registrars_.erase(it);
    ++walkers_;
  }
  for (auto& s : slabs_) r->unregister_slab(s->base, s->mapped);
  {
    // Notified under the lock: once it is released the destructor may run
    // and take the condition variable with it.
    std::lock_guard lk(registrars_mu_);
    if (--walkers_ == 0) walkers_done_.notify_all();
  }
  return owner;
}

bool BufferPool::contains(const void* p, size_t len) const {
  auto* b = static_cast<const std::byte*>(p);
  for (const auto& s : slabs_) {
    if (b >= s->base && len <= s->mapped && b - s->base <= static_cast<ptrdiff_t>(s->mapped - len)) {
      return true;
    }
  }
  return false;
}

size_t BufferPool::max_buffer_size() const { return slabs_.back()->buffer_size; }

bool BufferPool::every_class_has_free(size_t n) const {
  for (const auto& s : slabs_) {
    if (s->free.load(std::memory_order_relaxed) < n) return false;
  }
  return true;
}

std::vector<BufferPool::ClassStats> BufferPool::stats() const {
  std::vector<ClassStats> out;
  for (const auto& s : slabs_) {
    out.push_back({s->buffer_size, s->count, s->free.load(std::memory_order_relaxed)});
  }
  return out;
}

}  // namespace surge::net
