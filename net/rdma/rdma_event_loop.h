// RdmaEventLoop: the one thread that drives a set of RDMA connections.
//
// It owns an rdma_cm event channel and an epoll set holding: that channel's
// fd, every connection's CQ completion-channel fd, an eventfd for tasks
// posted from other threads. It sleeps in epoll_wait (no busy thread) unless
// created in polling mode, where it spins over the CQs for latency.
//
// Invariants:
//  * every rdma_cm event is copied and acked before it is dispatched, so a
//    handler may destroy its id;
//  * ids on this loop's channel carry a CmEventTarget* as their context;
//  * everything registered here (fds, pollers, timers) is touched only on
//    the loop thread.
#pragma once

#include <rdma/rdma_cma.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace surge::net::rdma {

// A copy of one rdma_cm event (the original is acked at once).
struct CmEvent {
  rdma_cm_event_type type{};
  rdma_cm_id* id = nullptr;
  rdma_cm_id* listen_id = nullptr;
  int status = 0;
  std::string private_data;
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
};

class CmEventTarget {
 public:
  virtual ~CmEventTarget() = default;
  virtual void on_cm_event(const CmEvent& ev) = 0;
};

class RdmaEventLoop {
 public:
  // Fails (naming the reason) when this host has no rdma_cm (no device).
  static Result<std::unique_ptr<RdmaEventLoop>> Create(std::string name, bool polling = false);
  ~RdmaEventLoop();  // stops the thread
  RdmaEventLoop(const RdmaEventLoop&) = delete;
  RdmaEventLoop& operator=(const RdmaEventLoop&) = delete;

  rdma_event_channel* cm_channel() const { return cm_channel_; }
  bool polling() const { return polling_; }
  bool in_loop() const { return std::this_thread::get_id() == thread_.get_id(); }

  // Loop thread only.
  void add_fd(int fd, std::function<void()> on_readable);
  void remove_fd(int fd);
  // Any thread: stops / restarts epoll reporting a registered fd while
  // another thread waits on it itself (a caller reaping its own replies).
  void pause_fd(int fd);
  void resume_fd(int fd);
  void add_poller(const void* key, std::function<void()> poll);
  void remove_poller(const void* key);
  void run_after(std::chrono::milliseconds delay, std::function<void()> fn);

  // Any thread: runs fn on the loop thread soon (never, once the loop has
  // stopped).
  void post(std::function<void()> fn);
  // Any thread: runs fn on the loop thread and waits for it (inline when
  // already on the loop thread, or once the loop has stopped).
  void run_sync(const std::function<void()>& fn);

  // Stops and joins the thread (idempotent). Pending tasks run first.
  void stop();

 private:
  RdmaEventLoop() = default;
  void run();
  void drain_cm_events();
  void run_tasks();
  // Queues fn for the loop thread; false once the loop has stopped taking
  // tasks (its last drain is done).
  bool enqueue(std::function<void()> fn);

  std::string name_;
  bool polling_ = false;
  rdma_event_channel* cm_channel_ = nullptr;
  int epfd_ = -1;
  int wakefd_ = -1;
  std::thread thread_;
  std::atomic<bool> stopping_{false};

  std::unordered_map<int, std::function<void()>> fds_;
  std::map<const void*, std::function<void()>> pollers_;
  std::multimap<std::chrono::steady_clock::time_point, std::function<void()>> timers_;

  std::mutex task_mu_;
  std::vector<std::function<void()>> tasks_;
  bool drained_ = false;  // under task_mu_: the thread ran its last tasks
};

}  // namespace surge::net::rdma
