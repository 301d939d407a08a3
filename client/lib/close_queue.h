// CloseQueue: tells the MDS that this client no longer holds a file open,
// off the caller's path. A close has nothing to wait for once its size is
// reported: the MDS's open record only keeps an unlinked file's objects from
// being collected, so releasing it late is safe (the MDS counts each open,
// and an open is recorded before the close that ends it can be posted: its
// count there never drops below this client's). What it delays is only the
// collection of an unlinked file's objects (an unlink that finds the file
// still open leaves it to the orphan collector).
//
// One thread sends what was posted, in order, gathered: after the first
// release of a batch it waits up to the gather window for more, so a
// program closing files in a loop (cp -a, untar, mdtest) costs the MDS one
// call per window instead of one per close, and this client one wake-up
// of the thread. Each release is tagged with the session it was recorded
// in (a batch holds one session's), so a release posted before an MDS
// restart cannot take away an open re-recorded under the new session (the
// MDS answers NotFound for the old one, which is ignored).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "common/status.h"

namespace surge::client {

class MdsLink;

class CloseQueue {
 public:
  // send(session, inos): ends one open per ino at the MDS, synchronously.
  // Runs on the queue's thread.
  using Send = std::function<Status(uint64_t session, std::span<const uint64_t> inos)>;
  struct Options {
    // How long the first release of a batch may wait for company.
    std::chrono::milliseconds gather_window{2};
    size_t max_batch = 512;  // a full batch goes at once
  };
  CloseQueue(Send send, Options options);
  explicit CloseQueue(Send send) : CloseQueue(std::move(send), Options{}) {}
  ~CloseQueue();  // sends everything still queued, then stops
  CloseQueue(const CloseQueue&) = delete;
  CloseQueue& operator=(const CloseQueue&) = delete;

  void post(uint64_t session, uint64_t ino);
  // Returns once every release posted before the call has been sent (at
  // once: a drain does not wait out the gather window).
  void drain();
  // drain(), only when a release of ino is queued or being sent: for a
  // request whose outcome at the MDS depends on who holds ino open.
  void drain_if_queued(uint64_t ino);

 private:
  struct Release {
    uint64_t session;
    uint64_t ino;
    std::chrono::steady_clock::time_point posted;
  };
  void run();
  bool hurried() const {
    return stopping_ || drain_to_ > sent_ || queue_.size() >= opts_.max_batch;
  }

  Send send_;
  const Options opts_;
  std::mutex mu_;
  std::condition_variable work_cv_;  // the thread's: a first release, a full batch, a drain
  std::condition_variable sent_cv_;  // drains': a batch went out
  std::deque<Release> queue_;
  std::vector<uint64_t> sending_;  // the batch on its way (written by the thread, under mu_)
  uint64_t posted_ = 0;
  uint64_t sent_ = 0;
  uint64_t drain_to_ = 0;  // the highest posted_ a drain waits for
  bool stopping_ = false;
  std::thread thread_;
};

// The Send of a client: MdsCloseMany, or MdsClose per ino for an MDS that
// does not know it (UnknownMethod, remembered for the life of the link).
CloseQueue::Send mds_close_sender(MdsLink* mds);

}  // namespace surge::client
