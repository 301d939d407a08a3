// HandlerWatch names a handler that holds a transport thread past the
// threshold, once while it runs and once when it ends; a brief one is not
// logged.
#include "net/handler_watch.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>

#include <algorithm>
#include <thread>

#include "common/log.h"

namespace surge::net {
namespace {

class HandlerWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
    spdlog::default_logger()->sinks().push_back(log_);
  }
  void TearDown() override {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), log_), sinks.end());
  }
  std::string logged() {
    std::string all;
    for (const auto& line : log_->last_formatted()) all += line;
    return all;
  }
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> log_;
};

TEST_F(HandlerWatchTest, NamesALongRunWhileItRunsAndWhenItEnds) {
  const std::string peer = "tcp://127.0.0.1:4242";
  HandlerWatch watch("tcp://127.0.0.1:7000", std::chrono::milliseconds(100));
  HandlerWatch::Run run(3, 17, peer);
  watch.begin(run);
  std::this_thread::sleep_for(std::chrono::milliseconds(800));  // past one check
  const std::string during = logged();
  EXPECT_NE(during.find("handler 3.17 for tcp://127.0.0.1:4242 has run"), std::string::npos)
      << during;
  EXPECT_NE(during.find("server tcp://127.0.0.1:7000"), std::string::npos) << during;
  watch.end(run);
  EXPECT_NE(logged().find("handler 3.17 for tcp://127.0.0.1:4242 ended after"), std::string::npos)
      << logged();
}

TEST_F(HandlerWatchTest, ABriefRunIsNotLogged) {
  const std::string peer = "tcp://127.0.0.1:4243";
  HandlerWatch watch("tcp://127.0.0.1:7001", std::chrono::milliseconds(2000));
  for (int i = 0; i < 100; ++i) {
    HandlerWatch::Run brief(3, 18, peer);
    watch.begin(brief);
    watch.end(brief);
  }
  HandlerWatch::Run run(3, 19, peer);
  watch.begin(run);
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // a check passes, under threshold
  watch.end(run);
  EXPECT_EQ(logged().find("handler 3."), std::string::npos) << logged();
}

}  // namespace
}  // namespace surge::net
