// MetricsEndpoint: a minimal HTTP server for Prometheus scrapes. Answers
// GET /metrics with whatever `render` returns (text exposition format),
// anything else with 404. One thread, one connection at a time, short
// timeouts: scrapes are rare and small, and a stuck scraper must not hold
// anything but this thread.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "common/status.h"

namespace surge {

class MetricsEndpoint {
 public:
  explicit MetricsEndpoint(std::function<std::string()> render) : render_(std::move(render)) {}
  ~MetricsEndpoint() { stop(); }
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // listen: "HOST:PORT" (IPv4; port 0 picks one).
  Status start(const std::string& listen);
  void stop();
  // "http://127.0.0.1:9101/metrics"
  std::string url() const { return url_; }

 private:
  void run();
  void serve(int fd);

  std::function<std::string()> render_;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::string url_;
};

}  // namespace surge
