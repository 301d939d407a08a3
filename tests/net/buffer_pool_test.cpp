// BufferPool: size classes, exhaustion (fail now / wait / time out), wake-up
// on release, registrars, and many threads acquiring and releasing at once.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "net/buffer_pool.h"

namespace surge::net {
namespace {

BufferPoolOptions opts(std::vector<SizeClass> classes) {
  BufferPoolOptions o;
  o.name = "unit";
  o.classes = std::move(classes);
  o.huge_pages = true;  // falls back quietly where the system has none
  o.lock_memory = true;  // a failing mlock only warns
  return o;
}

TEST(BufferPool, PicksTheSmallestClassThatFits) {
  auto pool = BufferPool::Create(opts({{65536, 2}, {4096, 2}, {1 << 20, 1}}));
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto a = (*pool)->try_acquire(1);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->capacity(), 4096u);
  auto b = (*pool)->try_acquire(4097);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->capacity(), 65536u);
  auto c = (*pool)->try_acquire(1 << 20);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->capacity(), size_t{1} << 20);
  EXPECT_EQ((*pool)->max_buffer_size(), size_t{1} << 20);
  EXPECT_TRUE((*pool)->contains(c->data(), c->capacity()));
  EXPECT_FALSE((*pool)->contains(&c, 1));
}

TEST(BufferPool, TooLargeIsInvalidArgument) {
  auto pool = BufferPool::Create(opts({{4096, 1}}));
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ((*pool)->try_acquire(4097).status().code(), Code::kInvalidArgument);
}

TEST(BufferPool, BadOptionsAreRefused) {
  EXPECT_FALSE(BufferPool::Create(opts({})).ok());
  EXPECT_FALSE(BufferPool::Create(opts({{3000, 1}})).ok());
  EXPECT_FALSE(BufferPool::Create(opts({{4096, 0}})).ok());
  EXPECT_FALSE(BufferPool::Create(opts({{4096, 1}, {4096, 2}})).ok());
}

// A FUSE request buffer is 1 MiB of data plus a page of headers.
TEST(BufferPool, PageMultipleClassServesSizesAboveTheLastPowerOfTwo) {
  const size_t fuse_size = (1u << 20) + 4096;
  auto pool = BufferPool::Create(opts({{1u << 20, 1}, {fuse_size, 1}}));
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto b = (*pool)->try_acquire(fuse_size);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->capacity(), fuse_size);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % 4096, 0u);
  EXPECT_TRUE((*pool)->contains(b->data(), fuse_size));
}

TEST(BufferPool, ExhaustionFailsNowAndRecoversOnRelease) {
  auto pool = BufferPool::Create(opts({{4096, 3}}));
  ASSERT_TRUE(pool.ok());
  std::vector<PoolBuffer> held;
  std::set<std::byte*> seen;
  for (int i = 0; i < 3; ++i) {
    auto b = (*pool)->try_acquire(4096);
    ASSERT_TRUE(b.ok());
    seen.insert(b->data());
    held.push_back(std::move(*b));
  }
  EXPECT_EQ(seen.size(), 3u);  // distinct buffers
  auto none = (*pool)->try_acquire(100);
  EXPECT_EQ(none.status().code(), Code::kResourceExhausted);
  EXPECT_NE(none.status().message().find("unit"), std::string::npos);
  EXPECT_EQ((*pool)->stats()[0].free, 0u);
  held.pop_back();
  EXPECT_EQ((*pool)->stats()[0].free, 1u);
  EXPECT_TRUE((*pool)->try_acquire(100).ok());
}

TEST(BufferPool, EveryClassHasFreeLooksAtTheEmptiestClass) {
  auto pool = BufferPool::Create(opts({{4096, 3}, {65536, 2}}));
  ASSERT_TRUE(pool.ok());
  EXPECT_TRUE((*pool)->every_class_has_free(2));
  EXPECT_FALSE((*pool)->every_class_has_free(3)) << "the 64 KiB class has only 2";
  auto big = (*pool)->try_acquire(65536);
  ASSERT_TRUE(big.ok());
  EXPECT_TRUE((*pool)->every_class_has_free(1));
  EXPECT_FALSE((*pool)->every_class_has_free(2));
  big = PoolBuffer();
  EXPECT_TRUE((*pool)->every_class_has_free(2)) << "a released buffer counts again";
}

TEST(BufferPool, AcquireTimesOutWhenNothingComesBack) {
  auto pool = BufferPool::Create(opts({{4096, 1}}));
  ASSERT_TRUE(pool.ok());
  auto held = (*pool)->try_acquire(1);
  ASSERT_TRUE(held.ok());
  auto r = (*pool)->acquire(1, std::chrono::milliseconds(50));
  EXPECT_EQ(r.status().code(), Code::kTimedOut);
}

TEST(BufferPool, AcquireWakesWhenABufferReturns) {
  auto pool = BufferPool::Create(opts({{4096, 1}}));
  ASSERT_TRUE(pool.ok());
  auto held = (*pool)->try_acquire(1);
  ASSERT_TRUE(held.ok());
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    held->reset();
  });
  auto r = (*pool)->acquire(1, std::chrono::seconds(30));
  releaser.join();
  EXPECT_TRUE(r.ok()) << r.status().ToString();
}

TEST(BufferPool, MoveTransfersOwnership) {
  auto pool = BufferPool::Create(opts({{4096, 1}}));
  ASSERT_TRUE(pool.ok());
  PoolBuffer a = (*pool)->try_acquire(1).value();
  PoolBuffer b = std::move(a);
  EXPECT_FALSE(a);
  EXPECT_TRUE(b);
  EXPECT_EQ((*pool)->stats()[0].free, 0u);
  b = PoolBuffer();
  EXPECT_EQ((*pool)->stats()[0].free, 1u);
}

TEST(BufferPool, ConcurrentAcquireReleaseNeverHandsOutABufferTwice) {
  constexpr int kThreads = 8;
  constexpr int kRounds = 20000;
  auto pool = BufferPool::Create(opts({{4096, 4}}));
  ASSERT_TRUE(pool.ok());
  std::atomic<int> failures{0};
  std::atomic<int> got{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        auto b = (*pool)->acquire(64, std::chrono::seconds(30));
        if (!b.ok()) {
          failures++;
          continue;
        }
        got++;
        // Stamp the buffer; another holder of the same buffer would show.
        auto* p = reinterpret_cast<std::atomic<int>*>(b->data());
        int before = p->exchange(t + 1);
        if (before != 0) failures++;
        p->store(0);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(got.load(), kThreads * kRounds);
  EXPECT_EQ((*pool)->stats()[0].free, 4u);
}

class CountingRegistrar : public MemoryRegistrar {
 public:
  Status register_slab(void* base, size_t len) override {
    ++registered;
    bytes += len;
    return fail ? Status::IOError("register refused") : Status::OK();
  }
  void unregister_slab(void*, size_t) override { ++unregistered; }
  int registered = 0;
  int unregistered = 0;
  size_t bytes = 0;
  bool fail = false;
};

TEST(BufferPool, RegistrarSeesEverySlabOnce) {
  CountingRegistrar r;
  {
    auto pool = BufferPool::Create(opts({{4096, 4}, {65536, 2}}));
    ASSERT_TRUE(pool.ok());
    ASSERT_TRUE((*pool)->add_registrar(&r).ok());
    EXPECT_EQ(r.registered, 2);
    EXPECT_GE(r.bytes, 4u * 4096 + 2u * 65536);
    EXPECT_EQ(r.unregistered, 0);
  }
  EXPECT_EQ(r.unregistered, 2);  // the pool unregistered on destruction
}

TEST(BufferPool, RemovedRegistrarIsNotCalledAgain) {
  CountingRegistrar r;
  auto pool = BufferPool::Create(opts({{4096, 4}}));
  ASSERT_TRUE(pool.ok());
  ASSERT_TRUE((*pool)->add_registrar(&r).ok());
  (*pool)->remove_registrar(&r);
  EXPECT_EQ(r.unregistered, 1);
  pool->reset();
  EXPECT_EQ(r.unregistered, 1);
}

TEST(BufferPool, FailingRegistrarIsReported) {
  CountingRegistrar r;
  r.fail = true;
  auto pool = BufferPool::Create(opts({{4096, 4}}));
  ASSERT_TRUE(pool.ok());
  Status st = (*pool)->add_registrar(&r);
  EXPECT_EQ(st.code(), Code::kIOError);
  EXPECT_NE(st.message().find("unit"), std::string::npos);
}

// What the RDMA device relies on: an attached pool keeps the registrar's
// owner alive until it has unregistered every slab, whichever goes first.
TEST(BufferPool, APoolHoldsTheRegistrarsOwnerUntilItIsDestroyed) {
  auto r = std::make_shared<CountingRegistrar>();
  std::weak_ptr<CountingRegistrar> watch = r;
  auto pool = BufferPool::Create(opts({{4096, 4}, {65536, 2}}));
  ASSERT_TRUE(pool.ok());
  ASSERT_TRUE((*pool)->add_registrar(r.get(), r).ok());
  CountingRegistrar* raw = r.get();
  r.reset();  // the device's last connection went away
  ASSERT_FALSE(watch.expired());
  EXPECT_EQ(raw->unregistered, 0);
  pool->reset();
  EXPECT_TRUE(watch.expired());  // released after unregistering (no crash reading it)
}

TEST(BufferPool, RemoveRegistrarHandsTheOwnerBack) {
  auto r = std::make_shared<CountingRegistrar>();
  auto pool = BufferPool::Create(opts({{4096, 4}}));
  ASSERT_TRUE(pool.ok());
  ASSERT_TRUE((*pool)->add_registrar(r.get(), r).ok());
  std::shared_ptr<void> owner = (*pool)->remove_registrar(r.get());
  EXPECT_EQ(owner.get(), static_cast<void*>(r.get()));
  EXPECT_EQ(r->unregistered, 1);
  EXPECT_EQ((*pool)->remove_registrar(r.get()), nullptr);  // not added any more
}

// A registrar shaped like the RDMA device: it knows its pool until the
// pool has unregistered all its slabs, and detaches under its own lock.
class DeviceLikeRegistrar : public MemoryRegistrar {
 public:
  Status register_slab(void*, size_t) override {
    std::lock_guard lk(mu_);
    ++slabs_;
    return Status::OK();
  }
  void unregister_slab(void*, size_t) override {
    std::lock_guard lk(mu_);
    ++unregistered;
    if (--slabs_ == 0) pool_ = nullptr;
  }
  void attached_to(BufferPool* p) { pool_ = p; }
  void detach() {
    std::shared_ptr<void> hold;  // dropped after the lock
    std::lock_guard lk(mu_);
    if (pool_ != nullptr) hold = pool_->remove_registrar(this);
  }
  std::atomic<int> unregistered{0};

 private:
  std::recursive_mutex mu_;
  BufferPool* pool_ = nullptr;
  int slabs_ = 0;
};

// A device detaching on its event-loop thread while the client destroys the
// pool (the crash seen in client_native_test over RDMA: ~BufferPool walked
// the registrar list while the device erased itself from it). Every slab is
// unregistered exactly once, by one side or the other.
TEST(BufferPool, DestroyingThePoolWhileARegistrarDetachesUnregistersEachSlabOnce) {
  for (int round = 0; round < 300; ++round) {
    auto a = std::make_shared<DeviceLikeRegistrar>();
    auto b = std::make_shared<DeviceLikeRegistrar>();
    auto pool = BufferPool::Create(opts({{4096, 2}, {65536, 2}}));
    ASSERT_TRUE(pool.ok());
    ASSERT_TRUE((*pool)->add_registrar(a.get(), a).ok());
    ASSERT_TRUE((*pool)->add_registrar(b.get(), b).ok());
    a->attached_to(pool->get());
    std::unique_ptr<BufferPool> doomed = std::move(*pool);
    std::atomic<bool> go{false};
    std::thread detacher([&] {
      while (!go.load()) {
      }
      a->detach();
    });
    std::thread destroyer([&] {
      while (!go.load()) {
      }
      doomed.reset();
    });
    go = true;
    destroyer.join();
    detacher.join();
    EXPECT_EQ(a->unregistered.load(), 2) << "round " << round;
    EXPECT_EQ(b->unregistered.load(), 2) << "round " << round;
  }
}

}  // namespace
}  // namespace surge::net
