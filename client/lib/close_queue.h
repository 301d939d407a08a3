// CloseQueue: tells the MDS that this client no longer holds a file open,
// off the caller's path. A close has nothing to wait for once its size is
// reported: the MDS's open record only keeps an unlinked file's objects from
// being collected, so releasing it late is safe (the MDS counts each open,
// and an open is recorded before the close that ends it can be posted: its
// count there never drops below this client's). What it delays is only the
// collection of an unlinked file's objects, by about one MDS round trip.
//
// One thread sends what was posted, in order; each release is tagged with
// the session it was recorded in, so a release posted before an MDS restart
// cannot take away an open re-recorded under the new session (the MDS
// answers NotFound for the old one, which is ignored).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "common/status.h"

namespace surge::client {

class CloseQueue {
 public:
  // send(session, ino): one MdsClose, synchronous. Runs on the queue's thread.
  using Send = std::function<Status(uint64_t session, uint64_t ino)>;
  explicit CloseQueue(Send send);
  ~CloseQueue();  // sends everything still queued, then stops
  CloseQueue(const CloseQueue&) = delete;
  CloseQueue& operator=(const CloseQueue&) = delete;

  void post(uint64_t session, uint64_t ino);
  // Returns once every release posted before the call has been sent.
  void drain();

 private:
  struct Release {
    uint64_t session;
    uint64_t ino;
  };
  void run();

  Send send_;
  std::mutex mu_;
  std::condition_variable cv_;       // work for the thread, or a drain finished
  std::deque<Release> queue_;
  uint64_t posted_ = 0;
  uint64_t sent_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace surge::client
