#include "net/tcp/io_pool.h"

#include <pthread.h>
#include <unistd.h>

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
    if (t.get_id() == std::this_thread::get_id()) {
      t.detach();  // stopped from one of its own threads (exit() in a handler)
    } else if (t.joinable()) {
      t.join();
    }
  }
  threads_.clear();
}

// Never destroyed (connections of static owners may outlive any point we
// could pick), but its threads are stopped at exit, as the RDMA client loop
// is (net/rdma/rdma_transport.cpp, client_loop): they would otherwise run
// on, closing and logging, while exit() destroys the statics they touch.
IoPool& IoPool::client_pool() {
  static IoPool* pool = [] {
    int n = 2;
    if (const char* env = std::getenv("SURGE_NET_CLIENT_IO_THREADS")) n = std::max(1, std::atoi(env));
    auto* p = new IoPool(n, "surge-cli");
    // Before the destructors of the statics made so far (made first: the
    // logger); not in a child forked later, which has none of the threads.
    static const pid_t owner = getpid();
    (void)spdlog::default_logger_raw();
    std::atexit([] {
      if (getpid() == owner) pool->stop();
    });
    return p;
  }();
  return *pool;
}

}  // namespace surge::net::tcp
