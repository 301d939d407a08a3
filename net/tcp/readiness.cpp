// ReadinessService: see readiness.h.
#include "net/tcp/readiness.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <boost/asio/post.hpp>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/log.h"

namespace surge::net::tcp {

namespace asio = boost::asio;

ReadinessService::ReadinessService(asio::execution_context& ctx)
    : asio::execution_context::service(ctx), io_(static_cast<asio::io_context&>(ctx)), set_(io_) {
  epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epfd_ < 0) {
    // Out of descriptors at I/O thread start-up: nothing sensible to go on with.
    throw std::runtime_error(std::string("epoll_create1 for the TCP readiness set: ") +
                             std::strerror(errno));
  }
  set_.assign(epfd_);
}

ReadinessService::~ReadinessService() = default;

ReadinessService& ReadinessService::of(asio::io_context& io) {
  return asio::use_service<ReadinessService>(io);
}

uint64_t ReadinessService::add(int fd) {
  std::lock_guard lk(mu_);
  const uint64_t key = next_key_++;
  entries_[key].fd = fd;
  return key;
}

void ReadinessService::arm(uint64_t key, std::function<void()> on_ready) {
  std::unique_lock lk(mu_);
  if (shut_) return;
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  e.on_ready = std::move(on_ready);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
  ev.data.u64 = key;
  if (::epoll_ctl(epfd_, e.in_set ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, e.fd, &ev) != 0) {
    // Only a closed or foreign descriptor gets here; the callback then finds
    // the socket's state out for itself.
    SLOG_WARN("watching socket {} for reads: {}", e.fd, std::strerror(errno));
    auto fn = std::move(e.on_ready);
    lk.unlock();
    asio::post(io_, std::move(fn));
    return;
  }
  e.in_set = true;
  if (!waiting_) {
    waiting_ = true;
    lk.unlock();
    asio::post(io_, [this] { wait(); });
  }
}

void ReadinessService::remove(uint64_t key) {
  std::function<void()> dropped;  // destroyed outside the lock
  std::lock_guard lk(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  if (it->second.in_set) (void)::epoll_ctl(epfd_, EPOLL_CTL_DEL, it->second.fd, nullptr);
  dropped = std::move(it->second.on_ready);
  entries_.erase(it);
}

void ReadinessService::wait() {
  // Asio watches the set edge-triggered: an event that became ready before
  // this wait was queued raises no edge, so look once more after queueing.
  set_.async_wait(asio::posix::stream_descriptor::wait_read,
                  [this](const boost::system::error_code& ec) {
                    if (ec) return;  // shutting down
                    wait();
                  });
  drain();
}

void ReadinessService::drain() {
  epoll_event evs[64];
  for (;;) {
    int n = ::epoll_wait(epfd_, evs, 64, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    events_seen_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
    for (int i = 0; i < n; ++i) {
      std::function<void()> fn;
      {
        std::lock_guard lk(mu_);
        // epoll_event is packed: copy the key out rather than bind a
        // reference to a misaligned field.
        const uint64_t key = evs[i].data.u64;
        auto it = entries_.find(key);
        if (it != entries_.end()) fn = std::move(it->second.on_ready);
      }
      if (fn) fn();
    }
    if (n < 64) return;
  }
}

void ReadinessService::shutdown() {
  std::unordered_map<uint64_t, Entry> dropped;
  {
    std::lock_guard lk(mu_);
    shut_ = true;
    for (auto& [key, e] : entries_) dropped[key].on_ready = std::move(e.on_ready);
  }
  dropped.clear();  // may end the streams that owned them; they call remove()
  boost::system::error_code ec;
  set_.close(ec);
}

}  // namespace surge::net::tcp
