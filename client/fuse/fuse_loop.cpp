#include "client/fuse/fuse_loop.h"

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "common/log.h"

namespace surge::fuse {

namespace {

struct Worker {
  std::thread thread;
  std::atomic<bool> done{false};
  std::unique_ptr<RegisteredBuffer> pooled;  // registered; given away by take_receive_buffer
  std::unique_ptr<std::byte[]> heap;         // when the pool had nothing free
  std::byte* current = nullptr;              // what the request in hand was read into
  size_t current_len = 0;
};

thread_local Worker* tls_worker = nullptr;

// The signal handlers' only state: set before they are installed.
fuse_session* g_session = nullptr;
sem_t g_wake;  // posted by an exit signal and by a worker that saw the end
std::once_flag g_wake_once;

void init_wake() {
  std::call_once(g_wake_once, [] { sem_init(&g_wake, 0, 0); });
}

void on_exit_signal(int) {
  if (g_session != nullptr) fuse_session_exit(g_session);
  sem_post(&g_wake);  // async-signal-safe
}

void on_wake_signal(int) {}  // only interrupts a blocked read(2)

void set_handler(int sig, void (*fn)(int), int flags) {
  struct sigaction sa {};
  sa.sa_handler = fn;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = flags;
  sigaction(sig, &sa, nullptr);
}

void work(fuse_session* se, Client& client, Worker& w, const std::atomic<bool>& stopping,
          std::atomic<int>& error) {
  sigset_t exits;
  sigemptyset(&exits);
  sigaddset(&exits, SIGTERM);
  sigaddset(&exits, SIGINT);
  sigaddset(&exits, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &exits, nullptr);  // they go to the main thread
  tls_worker = &w;
  const size_t size = receive_buffer_size();
  while (!stopping.load(std::memory_order_acquire) && !fuse_session_exited(se)) {
    if (!w.pooled) {
      auto b = client.try_pool_buffer(size);
      if (b.ok()) w.pooled = std::move(*b);
    }
    std::byte* mem;
    if (w.pooled) {
      mem = w.pooled->data();
    } else {
      if (!w.heap) w.heap.reset(new std::byte[size]);
      mem = w.heap.get();
    }
    fuse_buf buf{};
    buf.mem = mem;
    buf.size = size;
    int res = fuse_session_receive_buf(se, &buf);
    if (res == -EINTR || res == -EAGAIN) continue;
    if (res <= 0) {  // 0: unmounted (or exiting); < 0: the device failed
      if (res < 0) {
        int none = 0;
        error.compare_exchange_strong(none, res);
        SLOG_ERROR("fuse: reading /dev/fuse: {}", std::strerror(-res));
      }
      fuse_session_exit(se);
      sem_post(&g_wake);
      break;
    }
    w.current = mem;
    w.current_len = static_cast<size_t>(res);
    fuse_session_process_buf(se, &buf);
    w.current = nullptr;
    w.current_len = 0;
  }
  tls_worker = nullptr;
  w.done.store(true, std::memory_order_release);
  // libfuse itself may have ended the session while processing a request
  // (a failed INIT does): the main thread must hear of it, or it waits on
  // with no worker left and the dead mount stays.
  sem_post(&g_wake);
}

}  // namespace

size_t receive_buffer_size() {
  return 256 * static_cast<size_t>(sysconf(_SC_PAGESIZE)) + 4096;
}

void install_exit_signals(fuse_session* se) {
  init_wake();
  g_session = se;
  set_handler(SIGTERM, on_exit_signal, SA_RESTART);
  set_handler(SIGINT, on_exit_signal, SA_RESTART);
  set_handler(SIGHUP, on_exit_signal, SA_RESTART);
  set_handler(SIGPIPE, SIG_IGN, 0);
}

void remove_exit_signals() {
  set_handler(SIGTERM, SIG_DFL, 0);
  set_handler(SIGINT, SIG_DFL, 0);
  set_handler(SIGHUP, SIG_DFL, 0);
  g_session = nullptr;
}

int run_fuse_loop(fuse_session* se, Client& client, unsigned threads) {
  init_wake();
  set_handler(SIGUSR1, on_wake_signal, 0);  // no SA_RESTART: read(2) returns EINTR
  std::atomic<bool> stopping{false};
  std::atomic<int> error{0};
  std::vector<std::unique_ptr<Worker>> workers;
  for (unsigned i = 0; i < std::max(threads, 1u); ++i) {
    auto w = std::make_unique<Worker>();
    Worker& wr = *w;
    wr.thread = std::thread([&, se] { work(se, client, wr, stopping, error); });
    pthread_setname_np(wr.thread.native_handle(), "surge-fuse-wk");
    workers.push_back(std::move(w));
  }
  while (!fuse_session_exited(se)) {
    if (sem_wait(&g_wake) != 0 && errno != EINTR) break;
  }
  stopping.store(true, std::memory_order_release);
  for (auto& w : workers) {
    // A worker blocked in read(2) wakes on SIGUSR1; one busy with a request
    // finishes it first. Repeat: the signal may land just before the read.
    while (!w->done.load(std::memory_order_acquire)) {
      pthread_kill(w->thread.native_handle(), SIGUSR1);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    w->thread.join();
  }
  return error.load();
}

std::unique_ptr<RegisteredBuffer> take_receive_buffer(const void* data, size_t len) {
  Worker* w = tls_worker;
  if (w == nullptr || !w->pooled || w->current != w->pooled->data()) return nullptr;
  const auto* p = static_cast<const std::byte*>(data);
  const std::byte* base = w->pooled->data();
  if (p < base || len > w->pooled->size() ||
      static_cast<size_t>(p - base) > w->pooled->size() - len) {
    return nullptr;
  }
  return std::move(w->pooled);
}

const std::byte* current_request(size_t* len) {
  Worker* w = tls_worker;
  if (w == nullptr || w->current == nullptr) return nullptr;
  *len = w->current_len;
  return w->current;
}

}  // namespace surge::fuse
