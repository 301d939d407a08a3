// ReadinessService: one-shot read readiness of raw sockets, for one
// io_context (one I/O thread).
//
// Why not Asio's own reactor: it registers a socket once, edge-triggered,
// for the socket's whole life, so every segment that arrives wakes the I/O
// thread, even while another thread owns the socket's read side (a handler
// pulling its payload, a client caller reading its own reply). A 1 MiB
// transfer on loopback arrives in ~16 segments: 16 useless wake-ups and
// context switches on the receiving side, competing for the cores that do
// the copying. Here a socket is watched only while armed
// (EPOLL_CTL_MOD with EPOLLONESHOT, which also reports bytes already
// queued), and a firing disarms it.
//
// The sockets sit in a private epoll set; that set's descriptor is what
// Asio watches. Callbacks run on the I/O thread.
#pragma once

#include <boost/asio/execution_context.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>

namespace surge::net::tcp {

class ReadinessService : public boost::asio::execution_context::service {
 public:
  using key_type = ReadinessService;
  static inline boost::asio::execution_context::id id;

  explicit ReadinessService(boost::asio::execution_context& ctx);
  ~ReadinessService() override;

  // The service of io (created on first use).
  static ReadinessService& of(boost::asio::io_context& io);

  // A socket to watch; returns its key. Not armed yet.
  uint64_t add(int fd);
  // Calls on_ready once (on the I/O thread) when fd is readable, hung up or
  // failed, then forgets it. The callback may own the socket's user: it is
  // dropped once run, or at shutdown.
  void arm(uint64_t key, std::function<void()> on_ready);
  // Stops watching (any thread; before the descriptor is closed).
  void remove(uint64_t key);
  // Readiness events taken from the set so far (each one woke the I/O
  // thread or came with a wake-up already under way).
  uint64_t events_seen() const { return events_seen_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    int fd = -1;
    bool in_set = false;
    std::function<void()> on_ready;
  };

  void shutdown() override;
  void wait();
  void drain();

  boost::asio::io_context& io_;
  boost::asio::posix::stream_descriptor set_;
  int epfd_ = -1;
  std::mutex mu_;
  uint64_t next_key_ = 1;
  std::unordered_map<uint64_t, Entry> entries_;
  bool waiting_ = false;  // an async_wait on set_ is pending (mu_)
  bool shut_ = false;
  std::atomic<uint64_t> events_seen_{0};
};

}  // namespace surge::net::tcp
