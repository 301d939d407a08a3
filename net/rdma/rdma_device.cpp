// RdmaDevice: PD, limits and memory registration per verbs device.
#include "net/rdma/rdma_device.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/log.h"

namespace surge::net::rdma {

namespace {
std::mutex g_devices_mu;
std::unordered_map<ibv_context*, std::weak_ptr<RdmaDevice>> g_devices;
}  // namespace

Result<std::shared_ptr<RdmaDevice>> RdmaDevice::For(ibv_context* verbs) {
  if (verbs == nullptr) return Status::Unavailable("rdma: no verbs device behind the address");
  std::lock_guard lk(g_devices_mu);
  auto it = g_devices.find(verbs);
  if (it != g_devices.end()) {
    if (auto d = it->second.lock()) return d;
  }
  std::shared_ptr<RdmaDevice> d(new RdmaDevice());
  d->ctx_ = verbs;
  d->name_ = ibv_get_device_name(verbs->device);
  if (ibv_query_device(verbs, &d->attr_) != 0) {
    return Status::FromErrno(errno, "rdma: ibv_query_device on " + d->name_);
  }
  ibv_port_attr port{};
  if (ibv_query_port(verbs, 1, &port) == 0 && port.max_msg_sz != 0) {
    d->max_msg_size_ = port.max_msg_sz;
  }
  d->mw_type2_ = (d->attr_.device_cap_flags &
                  (IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B)) != 0;
  d->pd_ = ibv_alloc_pd(verbs);
  if (d->pd_ == nullptr) return Status::FromErrno(errno, "rdma: ibv_alloc_pd on " + d->name_);
  SLOG_INFO("rdma: device {} opened (max_sge {}, max_qp_rd_atom {}, max_msg_sz {}, mw type 2: {})",
            d->name_, d->attr_.max_sge, d->attr_.max_qp_rd_atom, d->max_msg_size_,
            d->mw_type2_ ? "yes" : "no");
  g_devices[verbs] = d;
  return d;
}

RdmaDevice::~RdmaDevice() {
  // No pool is attached here: each attached pool holds this device until
  // it detaches or unregisters itself (attach_pool), so only the MRs of
  // allocate_registered()'s buffers and the PD are left.
  {
    std::unique_lock lk(mr_mu_);
    for (auto& [base, mr] : mrs_) ibv_dereg_mr(mr);
    mrs_.clear();
  }
  if (pd_ != nullptr && ibv_dealloc_pd(pd_) != 0) {
    SLOG_ERROR("rdma: ibv_dealloc_pd on {} failed (a resource still uses it)", name_);
  }
  std::lock_guard lk(g_devices_mu);
  auto it = g_devices.find(ctx_);
  if (it != g_devices.end() && it->second.expired()) g_devices.erase(it);
}

Status RdmaDevice::attach_pool(BufferPool& pool) {
  std::lock_guard lk(attach_mu_);
  auto it = pools_.find(&pool);
  if (it != pools_.end()) {
    ++it->second;
    return Status::OK();
  }
  attaching_ = &pool;
  Status st = pool.add_registrar(this, shared_from_this());
  attaching_ = nullptr;
  if (!st.ok()) {
    pool_slabs_.erase(&pool);
    return st.WithContext("on rdma device " + name_);
  }
  pools_[&pool] = 1;
  return Status::OK();
}

void RdmaDevice::detach_pool(BufferPool& pool) {
  // The pool's hold on this device is dropped after the lock is released
  // (declared first, destroyed last): it may be the last one.
  std::shared_ptr<void> pool_hold;
  std::lock_guard lk(attach_mu_);
  auto it = pools_.find(&pool);
  if (it == pools_.end()) return;
  if (--it->second == 0) {
    pools_.erase(it);
    pool_slabs_.erase(&pool);
    pool_hold = pool.remove_registrar(this);
  }
}

Status RdmaDevice::register_slab(void* base, size_t len) {
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  if (mw_type2_) access |= IBV_ACCESS_MW_BIND;  // per-request windows (rdma_connection.h)
  ibv_mr* mr = ibv_reg_mr(pd_, base, len, access);
  if (mr == nullptr) {
    return Status::FromErrno(errno, "rdma: ibv_reg_mr of " + std::to_string(len) + " bytes on " +
                                        name_ + " (is `ulimit -l` large enough?)");
  }
  std::unique_lock lk(mr_mu_);
  mrs_[reinterpret_cast<uintptr_t>(base)] = mr;
  if (attaching_ != nullptr) pool_slabs_[attaching_][reinterpret_cast<uintptr_t>(base)] = len;
  return Status::OK();
}

void RdmaDevice::unregister_slab(void* base, size_t len) {
  std::lock_guard alk(attach_mu_);
  std::unique_lock lk(mr_mu_);
  // A pool going away while attached: forget it once all its slabs are gone.
  for (auto p = pool_slabs_.begin(); p != pool_slabs_.end(); ++p) {
    if (p->second.erase(reinterpret_cast<uintptr_t>(base)) > 0) {
      if (p->second.empty()) {
        pools_.erase(p->first);
        pool_slabs_.erase(p);
      }
      break;
    }
  }
  auto it = mrs_.find(reinterpret_cast<uintptr_t>(base));
  if (it == mrs_.end()) return;
  if (ibv_dereg_mr(it->second) != 0) {
    SLOG_ERROR("rdma: ibv_dereg_mr of {} bytes on {} failed", len, name_);
  }
  mrs_.erase(it);
}

RegisteredBuffer::~RegisteredBuffer() {
  if (mr_ != nullptr) ibv_dereg_mr(mr_);
  std::free(data_);
}

Result<std::unique_ptr<RegisteredBuffer>> RdmaDevice::allocate_registered(size_t len) {
  size_t rounded = (std::max<size_t>(len, 1) + 4095) / 4096 * 4096;
  auto* p = static_cast<std::byte*>(std::aligned_alloc(4096, rounded));
  if (p == nullptr) {
    return Status::ResourceExhausted("rdma: cannot allocate a " + std::to_string(len) +
                                     "-byte bounce buffer for " + name_);
  }
  ibv_mr* mr = ibv_reg_mr(
      pd_, p, rounded, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
  if (mr == nullptr) {
    int err = errno;
    std::free(p);
    return Status::FromErrno(
        err, "rdma: ibv_reg_mr of a " + std::to_string(len) + "-byte bounce buffer on " + name_);
  }
  return std::make_unique<RegisteredBuffer>(p, len, mr);
}

ibv_mr* RdmaDevice::find_mr(const void* p, size_t len) const {
  auto a = reinterpret_cast<uintptr_t>(p);
  std::shared_lock lk(mr_mu_);
  auto it = mrs_.upper_bound(a);
  if (it == mrs_.begin()) return nullptr;
  --it;
  ibv_mr* mr = it->second;
  if (a + len > it->first + mr->length || a + len < a) return nullptr;
  return mr;
}

std::optional<MemoryKeys> RdmaDevice::find_keys(const void* p, size_t len) const {
  const ibv_mr* mr = find_mr(p, len);
  if (mr == nullptr) return std::nullopt;
  return MemoryKeys{mr->lkey, mr->rkey};
}

}  // namespace surge::net::rdma
