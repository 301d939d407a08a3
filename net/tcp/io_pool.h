// IoPool: N I/O threads, one io_context each (no cross-thread handler
// contention; a connection lives on one context for its whole life).
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace surge::net::tcp {

class IoPool {
 public:
  IoPool(int threads, std::string name);
  ~IoPool();  // stop() if still running
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  // Round-robin.
  boost::asio::io_context& next();
  size_t size() const { return contexts_.size(); }
  // Position of one of this pool's contexts (size() for a foreign one).
  size_t index_of(const boost::asio::io_context& io) const;
  // Stops every context and joins the threads (not from an I/O thread).
  void stop();

  // The process-wide pool client connections share. Never destroyed: client
  // connections may be released from any thread at any time, even at exit.
  static IoPool& client_pool();

 private:
  using Guard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;
  std::vector<std::unique_ptr<boost::asio::io_context>> contexts_;
  std::vector<Guard> guards_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> next_{0};
  const std::string name_;
};

}  // namespace surge::net::tcp
