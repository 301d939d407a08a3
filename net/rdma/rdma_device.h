// RdmaDevice: one verbs device as the transport uses it: its protection
// domain, its limits, and the memory registered with it.
//
// Invariants:
//  * one RdmaDevice (and one PD) per ibv_context; rdma_cm hands every id on
//    the same device the same ibv_context, so RdmaDevice::For() returns the
//    same object for all of them while anyone holds it;
//  * a BufferPool is registered with a device once (attach_pool), however
//    many connections use it: each slab becomes one MR with LOCAL_WRITE |
//    REMOTE_READ | REMOTE_WRITE (| MW_BIND where the device has type 2
//    memory windows). Nothing is registered on the hot path:
//    find_keys() is a map lookup under a shared lock;
//  * attach/detach are reference counted; the last detach deregisters;
//  * an attached pool holds the device (BufferPool::add_registrar's owner),
//    so a device is never destroyed while a pool may still call it: a pool
//    destroyed first unregisters its slabs itself, then lets go.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>

#include "common/status.h"
#include "net/buffer_pool.h"

namespace surge::net::rdma {

struct MemoryKeys {
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

// Memory allocated and registered for one use (a bounce buffer for a
// region outside every registered pool); deregistered and freed on
// destruction. Not for the hot path: pools are.
class RegisteredBuffer {
 public:
  RegisteredBuffer(std::byte* data, size_t len, ibv_mr* mr) : data_(data), len_(len), mr_(mr) {}
  ~RegisteredBuffer();
  RegisteredBuffer(const RegisteredBuffer&) = delete;
  RegisteredBuffer& operator=(const RegisteredBuffer&) = delete;
  std::byte* data() const { return data_; }
  size_t size() const { return len_; }
  uint32_t lkey() const { return mr_->lkey; }
  uint32_t rkey() const { return mr_->rkey; }

 private:
  std::byte* data_;
  size_t len_;
  ibv_mr* mr_;
};

class RdmaDevice final : public MemoryRegistrar, public std::enable_shared_from_this<RdmaDevice> {
 public:
  // The device of a verbs context (from an rdma_cm id), shared.
  static Result<std::shared_ptr<RdmaDevice>> For(ibv_context* verbs);
  ~RdmaDevice() override;
  RdmaDevice(const RdmaDevice&) = delete;
  RdmaDevice& operator=(const RdmaDevice&) = delete;

  ibv_context* context() const { return ctx_; }
  ibv_pd* pd() const { return pd_; }
  const std::string& name() const { return name_; }
  const ibv_device_attr& attr() const { return attr_; }
  // Type 2 memory windows (device_cap_flags has MEM_WINDOW_TYPE_2A/2B).
  bool supports_mw_type2() const { return mw_type2_; }
  // Largest single RDMA message the port accepts (max_msg_sz).
  uint64_t max_msg_size() const { return max_msg_size_; }

  // Registers every slab of pool (once per device; counted).
  Status attach_pool(BufferPool& pool);
  void detach_pool(BufferPool& pool);

  // A fresh registered buffer of len bytes (page aligned).
  Result<std::unique_ptr<RegisteredBuffer>> allocate_registered(size_t len);

  // Keys of the registered region holding all of [p, p+len), if any.
  std::optional<MemoryKeys> find_keys(const void* p, size_t len) const;
  // The MR holding all of [p, p+len) (to bind a memory window), or null.
  ibv_mr* find_mr(const void* p, size_t len) const;

  // MemoryRegistrar (called by BufferPool).
  Status register_slab(void* base, size_t len) override;
  void unregister_slab(void* base, size_t len) override;

 private:
  RdmaDevice() = default;

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  std::string name_;
  ibv_device_attr attr_{};
  bool mw_type2_ = false;
  uint64_t max_msg_size_ = 1u << 30;

  // Serializes attach/detach (BufferPool's registrar list is unguarded) and
  // the pool bookkeeping; recursive because detach -> remove_registrar ->
  // unregister_slab comes back here. Always taken before mr_mu_.
  std::recursive_mutex attach_mu_;
  std::map<BufferPool*, int> pools_;
  // Slab bases each attached pool registered. A pool destroyed while still
  // attached unregisters its slabs itself; when its last slab goes, its
  // entry goes too, so a new pool at the same address is registered afresh.
  std::map<BufferPool*, std::map<uintptr_t, size_t>> pool_slabs_;
  BufferPool* attaching_ = nullptr;  // set during pool.add_registrar(this)

  mutable std::shared_mutex mr_mu_;
  std::map<uintptr_t, ibv_mr*> mrs_;  // by start address
};

}  // namespace surge::net::rdma
