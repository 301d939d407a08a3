// HandlerWatch: names a handler that holds a transport thread too long.
//
// A kShortBlocking handler run in place occupies the I/O (or RDMA loop)
// thread that received it: while it runs, no other connection of that
// thread is read, answered or let through its handshake. Such a handler
// is meant to take microseconds; if one waits on something slow instead
// (a lock held across disk IO, a round trip to another server), the
// server looks dead to its peers while its own outbound calls (heartbeats)
// go on. The watch makes that visible: a thread checks twice a second and
// logs, once per run, any in-place handler running longer than the
// threshold, with its method, peer and age, and again when it ends.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <thread>

namespace surge::net {

class HandlerWatch {
 public:
  struct Run {
    uint16_t service = 0;
    uint16_t method = 0;
    const std::string* peer = nullptr;  // outlives the run (its connection)
    std::chrono::steady_clock::time_point started;
    bool reported = false;
  };
  using Token = std::list<Run>::iterator;

  HandlerWatch(std::string server, std::chrono::milliseconds threshold);
  ~HandlerWatch();  // joins the watching thread
  HandlerWatch(const HandlerWatch&) = delete;
  HandlerWatch& operator=(const HandlerWatch&) = delete;

  Token begin(uint16_t service, uint16_t method, const std::string& peer);
  void end(Token t);

 private:
  void watch_loop();

  const std::string server_;
  const std::chrono::milliseconds threshold_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::list<Run> running_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest is built
};

}  // namespace surge::net
