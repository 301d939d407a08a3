// RdmaEventLoop: epoll over the rdma_cm channel, CQ channels and an eventfd.
#include "net/rdma/rdma_event_loop.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <future>

#include "common/log.h"

namespace surge::net::rdma {

Result<std::unique_ptr<RdmaEventLoop>> RdmaEventLoop::Create(std::string name, bool polling) {
  std::unique_ptr<RdmaEventLoop> loop(new RdmaEventLoop());
  loop->name_ = std::move(name);
  loop->polling_ = polling;
  loop->cm_channel_ = rdma_create_event_channel();
  if (loop->cm_channel_ == nullptr) {
    int err = errno;
    return Status::Unavailable("rdma: no RDMA device on this host (rdma_create_event_channel: " +
                               std::string(strerror(err)) + "; is rdma_ucm loaded?)");
  }
  int fl = fcntl(loop->cm_channel_->fd, F_GETFL);
  if (fcntl(loop->cm_channel_->fd, F_SETFL, fl | O_NONBLOCK) != 0) {
    return Status::FromErrno(errno, "rdma: making the rdma_cm channel non-blocking");
  }
  loop->epfd_ = epoll_create1(EPOLL_CLOEXEC);
  if (loop->epfd_ < 0) return Status::FromErrno(errno, "rdma: epoll_create1");
  loop->wakefd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (loop->wakefd_ < 0) return Status::FromErrno(errno, "rdma: eventfd");
  RdmaEventLoop* self = loop.get();
  // Registered before the thread exists, so no race on fds_.
  self->add_fd(self->wakefd_, [self] {
    uint64_t v;
    while (::read(self->wakefd_, &v, sizeof v) > 0) {
    }
    self->run_tasks();
  });
  self->add_fd(self->cm_channel_->fd, [self] { self->drain_cm_events(); });
  loop->thread_ = std::thread([self] { self->run(); });
  // Named for ps, perf and gdb (and tests that look for it): 15 bytes at most.
  pthread_setname_np(loop->thread_.native_handle(), loop->name_.substr(0, 15).c_str());
  return loop;
}

RdmaEventLoop::~RdmaEventLoop() {
  stop();
  if (cm_channel_ != nullptr) rdma_destroy_event_channel(cm_channel_);
  if (epfd_ >= 0) ::close(epfd_);
  if (wakefd_ >= 0) ::close(wakefd_);
}

void RdmaEventLoop::stop() {
  if (!thread_.joinable()) return;
  post([this] { stopping_ = true; });
  if (in_loop()) {
    thread_.detach();  // never happens in practice: stop() is called by owners
    return;
  }
  thread_.join();
}

void RdmaEventLoop::add_fd(int fd, std::function<void()> on_readable) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    SLOG_ERROR("rdma loop {}: epoll_ctl ADD fd {} failed: {}", name_, fd, strerror(errno));
  }
  fds_[fd] = std::move(on_readable);
}

void RdmaEventLoop::remove_fd(int fd) {
  epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
  fds_.erase(fd);
}

void RdmaEventLoop::pause_fd(int fd) {
  epoll_event ev{};
  ev.data.fd = fd;
  epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev);  // epoll_ctl is thread-safe
}

void RdmaEventLoop::resume_fd(int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev);
}

void RdmaEventLoop::add_poller(const void* key, std::function<void()> poll) {
  pollers_[key] = std::move(poll);
}

void RdmaEventLoop::remove_poller(const void* key) {
  pollers_.erase(key);
}

void RdmaEventLoop::run_after(std::chrono::milliseconds delay, std::function<void()> fn) {
  timers_.emplace(std::chrono::steady_clock::now() + delay, std::move(fn));
}

bool RdmaEventLoop::enqueue(std::function<void()> fn) {
  {
    std::lock_guard lk(task_mu_);
    if (drained_) return false;
    tasks_.push_back(std::move(fn));
  }
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wakefd_, &one, sizeof one);
  return true;
}

void RdmaEventLoop::post(std::function<void()> fn) {
  (void)enqueue(std::move(fn));
}

void RdmaEventLoop::run_sync(const std::function<void()>& fn) {
  if (in_loop()) {
    fn();
    return;
  }
  std::promise<void> done;
  bool queued = enqueue([&] {
    fn();
    done.set_value();
  });
  // A stopped loop runs nothing: the caller is the only one left to.
  if (!queued) {
    fn();
    return;
  }
  done.get_future().wait();
}

void RdmaEventLoop::run_tasks() {
  std::vector<std::function<void()>> batch;
  {
    std::lock_guard lk(task_mu_);
    batch.swap(tasks_);
  }
  for (auto& t : batch) t();
}

void RdmaEventLoop::drain_cm_events() {
  for (;;) {
    rdma_cm_event* raw = nullptr;
    if (rdma_get_cm_event(cm_channel_, &raw) != 0) return;  // EAGAIN: drained
    CmEvent ev;
    ev.type = raw->event;
    ev.id = raw->id;
    ev.listen_id = raw->listen_id;
    ev.status = raw->status;
    if (raw->param.conn.private_data != nullptr && raw->param.conn.private_data_len > 0) {
      ev.private_data.assign(static_cast<const char*>(raw->param.conn.private_data),
                             raw->param.conn.private_data_len);
    }
    ev.responder_resources = raw->param.conn.responder_resources;
    ev.initiator_depth = raw->param.conn.initiator_depth;
    rdma_ack_cm_event(raw);
    // A connect request is for the listener; everything else for the id.
    rdma_cm_id* owner = ev.type == RDMA_CM_EVENT_CONNECT_REQUEST ? ev.listen_id : ev.id;
    auto* target = owner != nullptr ? static_cast<CmEventTarget*>(owner->context) : nullptr;
    if (target == nullptr) {
      SLOG_DEBUG("rdma loop {}: {} for an id without owner, ignored", name_,
                 rdma_event_str(ev.type));
      if (ev.type == RDMA_CM_EVENT_CONNECT_REQUEST) rdma_reject(ev.id, nullptr, 0);
      continue;
    }
    target->on_cm_event(ev);
  }
}

void RdmaEventLoop::run() {
  epoll_event events[32];
  while (!stopping_) {
    int timeout_ms = -1;
    if (polling_ && !pollers_.empty()) {
      timeout_ms = 0;
    } else if (!timers_.empty()) {
      auto until = timers_.begin()->first - std::chrono::steady_clock::now();
      timeout_ms = static_cast<int>(
          std::max<int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(until).count()));
    }
    int n = epoll_wait(epfd_, events, 32, timeout_ms);
    if (n < 0 && errno != EINTR) {
      SLOG_ERROR("rdma loop {}: epoll_wait failed: {}", name_, strerror(errno));
      break;
    }
    for (int i = 0; i < n; ++i) {
      auto it = fds_.find(events[i].data.fd);
      if (it == fds_.end()) continue;
      auto fn = it->second;  // a copy: the handler may remove itself
      fn();
    }
    if (polling_) {
      std::vector<std::function<void()>> ps;
      ps.reserve(pollers_.size());
      for (auto& [k, p] : pollers_) ps.push_back(p);
      for (auto& p : ps) p();
    }
    auto now = std::chrono::steady_clock::now();
    while (!timers_.empty() && timers_.begin()->first <= now) {
      auto fn = std::move(timers_.begin()->second);
      timers_.erase(timers_.begin());
      fn();
    }
  }
  // Tasks queued until now run; later ones are refused (run_sync runs them
  // inline), so no caller waits on a task nobody will run.
  std::vector<std::function<void()>> last;
  {
    std::lock_guard lk(task_mu_);
    drained_ = true;
    last.swap(tasks_);
  }
  for (auto& t : last) t();
}

}  // namespace surge::net::rdma
