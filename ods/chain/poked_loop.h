// PokedLoop: the thread of a data server's background pass (resync source,
// roll-forward, EC rebuild): a round once a second and at once when poked
// (the map moved), until stopped.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace surge::ods {

class PokedLoop {
 public:
  // round(poked): one pass; poked says a poke woke it. Its result: whether
  // the next second's round runs without a poke.
  using Round = std::function<bool(bool poked)>;

  ~PokedLoop() { stop(); }

  // first_poked: the first round runs at once.
  void start(Round round, bool first_poked = false) {
    {
      std::lock_guard lk(mu_);
      poked_ = poked_ || first_poked;  // a poke before start counts too
    }
    thread_ = std::thread([this, round = std::move(round)] { run(round); });
  }
  void poke() {
    {
      std::lock_guard lk(mu_);
      poked_ = true;
    }
    cv_.notify_all();
  }
  // Ends the round under way at its next stopping() check, and the thread.
  void stop() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  // For a round to check between its chains.
  bool stopping() {
    std::lock_guard lk(mu_);
    return stop_;
  }

 private:
  void run(const Round& round) {
    std::unique_lock lk(mu_);
    bool every_second = true;
    while (!stop_) {
      cv_.wait_for(lk, std::chrono::seconds(1), [this] { return stop_ || poked_; });
      if (stop_) break;
      const bool poked = poked_;
      if (!poked && !every_second) continue;
      poked_ = false;
      lk.unlock();
      every_second = round(poked);
      lk.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool poked_ = false;
  std::thread thread_;
};

}  // namespace surge::ods
