#include "net/tcp/io_pool.h"

#include <pthread.h>

#include <cstdlib>

#include "common/log.h"

namespace surge::net::tcp {

IoPool::IoPool(int threads, std::string name) : name_(std::move(name)) {
  for (int i = 0; i < threads; ++i) {
    contexts_.push_back(std::make_unique<boost::asio::io_context>(1));
    guards_.push_back(boost::asio::make_work_guard(*contexts_.back()));
  }
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this, i] {
      std::string tname = (name_ + "-io" + std::to_string(i)).substr(0, 15);
      pthread_setname_np(pthread_self(), tname.c_str());
      contexts_[i]->run();
    });
  }
}

IoPool::~IoPool() { stop(); }

boost::asio::io_context& IoPool::next() {
  return *contexts_[next_.fetch_add(1, std::memory_order_relaxed) % contexts_.size()];
}

size_t IoPool::index_of(const boost::asio::io_context& io) const {
  for (size_t i = 0; i < contexts_.size(); ++i) {
    if (contexts_[i].get() == &io) return i;
  }
  return contexts_.size();
}

void IoPool::stop() {
  for (auto& g : guards_) g.reset();
  for (auto& c : contexts_) c->stop();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

IoPool& IoPool::client_pool() {
  static IoPool* pool = [] {
    int n = 2;
    if (const char* env = std::getenv("SURGE_NET_CLIENT_IO_THREADS")) n = std::max(1, std::atoi(env));
    return new IoPool(n, "surge-cli");
  }();
  return *pool;
}

}  // namespace surge::net::tcp
