// CloseQueue (close_queue.h): the releases, gathered and sent in posting
// order by one thread.
#include "client/lib/close_queue.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "client/lib/mds_link.h"
#include "common/log.h"
#include "net/proto/mds_methods.h"

namespace surge::client {

namespace {

std::string ino_list(std::span<const uint64_t> inos) {
  std::string out;
  for (size_t i = 0; i < inos.size() && i < 8; ++i) {
    out += (i == 0 ? "" : ", ") + std::to_string(inos[i]);
  }
  if (inos.size() > 8) out += ", ... (" + std::to_string(inos.size()) + " in all)";
  return out;
}

}  // namespace

CloseQueue::CloseQueue(Send send, Options options) : send_(std::move(send)), opts_(options) {
  thread_ = std::thread([this] { run(); });
}

CloseQueue::~CloseQueue() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

void CloseQueue::post(uint64_t session, uint64_t ino) {
  bool wake;
  {
    std::lock_guard lk(mu_);
    queue_.push_back({session, ino, std::chrono::steady_clock::now()});
    ++posted_;
    // Only the first release of a batch and a full batch wake the thread:
    // waking it for each would cost the switch the gathering saves.
    wake = queue_.size() == 1 || queue_.size() == opts_.max_batch;
  }
  if (wake) work_cv_.notify_one();
}

void CloseQueue::drain() {
  std::unique_lock lk(mu_);
  const uint64_t target = posted_;
  if (sent_ >= target) return;
  drain_to_ = std::max(drain_to_, target);
  work_cv_.notify_one();
  sent_cv_.wait(lk, [&] { return sent_ >= target; });
}

void CloseQueue::drain_if_queued(uint64_t ino) {
  {
    std::lock_guard lk(mu_);
    auto queued = [&] {
      for (const Release& r : queue_) {
        if (r.ino == ino) return true;
      }
      return std::find(sending_.begin(), sending_.end(), ino) != sending_.end();
    };
    if (!queued()) return;
  }
  drain();
}

void CloseQueue::run() {
  std::unique_lock lk(mu_);
  for (;;) {
    work_cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything was sent
    work_cv_.wait_until(lk, queue_.front().posted + opts_.gather_window, [&] { return hurried(); });
    const uint64_t session = queue_.front().session;
    // sending_ changes only here, under mu_: reading it unlocked on this
    // thread is safe.
    while (!queue_.empty() && queue_.front().session == session &&
           sending_.size() < opts_.max_batch) {
      sending_.push_back(queue_.front().ino);
      queue_.pop_front();
    }
    lk.unlock();
    Status s = send_(session, sending_);
    // A session the MDS forgot (it restarted) holds no opens to release.
    if (!s.ok() && s.code() != Code::kNotFound) {
      SLOG_WARN("client: releasing the opens of inodes {} at the MDS: {}", ino_list(sending_),
                s.ToString());
    }
    lk.lock();
    sent_ += sending_.size();
    sending_.clear();
    sent_cv_.notify_all();
  }
}

CloseQueue::Send mds_close_sender(MdsLink* mds) {
  namespace pb = proto::mds;
  auto one_by_one = std::make_shared<std::atomic<bool>>(false);
  return [mds, one_by_one](uint64_t session, std::span<const uint64_t> inos) -> Status {
    if (inos.size() > 1 && !one_by_one->load(std::memory_order_relaxed)) {
      pb::CloseManyRequest req;
      req.set_session_id(session);
      req.mutable_inos()->Add(inos.begin(), inos.end());
      pb::CloseReply resp;
      Status st = mds->call<pb::MdsCloseMany>(req, &resp);
      if (st.code() != Code::kUnknownMethod) return st;
      one_by_one->store(true, std::memory_order_relaxed);
      SLOG_INFO("client: the MDS at {} takes no batched closes ({}); closing one by one",
                mds->address(), st.ToString());
    }
    Status first;
    for (uint64_t ino : inos) {
      pb::CloseRequest req;
      req.set_session_id(session);
      req.set_ino(ino);
      pb::CloseReply resp;
      Status st = mds->call<pb::MdsClose>(req, &resp);
      if (!st.ok() && first.ok()) first = st;
    }
    return first;
  };
}

}  // namespace surge::client
