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

#include <boost/intrusive/list.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace surge::net {

class HandlerWatch {
 public:
  // One handler's run, on the stack of the thread running it: watching
  // allocates nothing on the request path.
  struct Run : boost::intrusive::list_base_hook<> {
    Run(uint16_t s, uint16_t m, const std::string& p) : service(s), method(m), peer(&p) {}
    const uint16_t service;
    const uint16_t method;
    const std::string* const peer;  // outlives the run (its connection)
    std::chrono::steady_clock::time_point started;
    bool reported = false;  // under the watch's lock
  };

  HandlerWatch(std::string server, std::chrono::milliseconds threshold);
  ~HandlerWatch();  // joins the watching thread
  HandlerWatch(const HandlerWatch&) = delete;
  HandlerWatch& operator=(const HandlerWatch&) = delete;

  // Watches run from now until end(run).
  void begin(Run& run);
  void end(Run& run);

 private:
  void watch_loop();

  const std::string server_;
  const std::chrono::milliseconds threshold_;
  std::mutex mu_;
  std::condition_variable cv_;
  boost::intrusive::list<Run> running_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest is built
};

}  // namespace surge::net
