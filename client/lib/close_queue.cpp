// CloseQueue (close_queue.h): the releases, sent in posting order by one
// thread.
#include "client/lib/close_queue.h"

#include "common/log.h"

namespace surge::client {

CloseQueue::CloseQueue(Send send) : send_(std::move(send)) {
  thread_ = std::thread([this] { run(); });
}

CloseQueue::~CloseQueue() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CloseQueue::post(uint64_t session, uint64_t ino) {
  {
    std::lock_guard lk(mu_);
    queue_.push_back({session, ino});
    ++posted_;
  }
  cv_.notify_all();
}

void CloseQueue::drain() {
  std::unique_lock lk(mu_);
  const uint64_t target = posted_;
  cv_.wait(lk, [&] { return sent_ >= target; });
}

void CloseQueue::run() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything was sent
    Release r = queue_.front();
    queue_.pop_front();
    lk.unlock();
    Status s = send_(r.session, r.ino);
    // A session the MDS forgot (it restarted) holds no opens to release.
    if (!s.ok() && s.code() != Code::kNotFound) {
      SLOG_WARN("client: releasing the open of inode {} at the MDS: {}", r.ino, s.ToString());
    }
    lk.lock();
    ++sent_;
    cv_.notify_all();
  }
}

}  // namespace surge::client
