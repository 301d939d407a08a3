#include "net/handler_watch.h"

#include "common/log.h"

namespace surge::net {

namespace {

long long ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t)
      .count();
}

}  // namespace

HandlerWatch::HandlerWatch(std::string server, std::chrono::milliseconds threshold)
    : server_(std::move(server)), threshold_(threshold), thread_([this] { watch_loop(); }) {}

HandlerWatch::~HandlerWatch() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void HandlerWatch::begin(Run& run) {
  run.started = std::chrono::steady_clock::now();
  std::lock_guard lk(mu_);
  running_.push_front(run);
}

void HandlerWatch::end(Run& run) {
  std::lock_guard lk(mu_);
  if (run.reported) {
    SLOG_WARN("server {}: handler {}.{} for {} ended after {} ms on its transport thread", server_,
              run.service, run.method, *run.peer, ms_since(run.started));
  }
  running_.erase(running_.iterator_to(run));
}

void HandlerWatch::watch_loop() {
  std::unique_lock lk(mu_);
  while (!stopping_) {
    cv_.wait_for(lk, std::chrono::milliseconds(500), [&] { return stopping_; });
    for (Run& r : running_) {
      if (r.reported || std::chrono::steady_clock::now() - r.started < threshold_) continue;
      r.reported = true;
      SLOG_WARN(
          "server {}: handler {}.{} for {} has run {} ms on its transport thread; that "
          "thread's other connections wait for it",
          server_, r.service, r.method, *r.peer, ms_since(r.started));
    }
  }
}

}  // namespace surge::net
