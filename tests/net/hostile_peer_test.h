// HostilePeerTest: what every bad-input suite shares, whatever the
// transport its raw peer speaks. A test server with 4 credits per
// connection; a well-behaved client on the same server calling echo the
// whole time, which must see no failure and must still get answers after
// the last bad input (checked in TearDown); the server's log kept in a ring,
// so a test can check the server named the peer and the reason.
#pragma once

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "common/log.h"
#include "net/frame.h"
#include "net/proto/test_methods.h"
#include "tests/net/net_test_util.h"

namespace surge::net::testing {

// How patient a suite is: emulated RDMA is far slower than loopback TCP.
struct HostilePeerTiming {
  std::chrono::milliseconds handshake_timeout{500};
  std::chrono::milliseconds good_call_timeout{10000};
  std::chrono::milliseconds good_call_pause{2};
  int settle_polls = 500;  // x 10 ms for the good client after the last bad input
  int log_polls = 200;     // x 10 ms for the expected log line
};

class HostilePeerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    log_ = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(4096);
    spdlog::default_logger()->sinks().push_back(log_);
  }

  // Starts the server on `listen` ("tcp://127.0.0.1:0", "rdma://HOST:0")
  // and the well-behaved client. Call from SetUp.
  void start(const std::string& listen, HostilePeerTiming timing) {
    timing_ = timing;
    ServerOptions o = default_server_options();
    o.listen = listen;
    o.handshake_timeout = timing.handshake_timeout;
    o.credits_per_connection = 4;
    server_ = start_test_server(o);
    ASSERT_NE(server_, nullptr) << "no server on " << listen;
    good_ = connect_or_die(server_->address());
    ASSERT_NE(good_, nullptr);
    background_ = std::thread([this] {
      int i = 0;
      while (!stop_) {
        proto::test::EchoRequest req;
        req.set_payload("good " + std::to_string(i++));
        proto::test::EchoReply resp;
        Status st =
            good_->call<proto::test::TestEcho>(req, &resp, {}, timing_.good_call_timeout);
        if (st.ok() && resp.payload() == req.payload()) {
          good_ok_++;
        } else {
          good_bad_++;
          std::lock_guard lk(bad_mu_);
          bad_why_ = st.ToString();
        }
        std::this_thread::sleep_for(timing_.good_call_pause);
      }
    });
  }

  void TearDown() override {
    // Let the good client run a little past the last bad input.
    int before = good_ok_.load();
    for (int i = 0; i < timing_.settle_polls && good_ok_.load() < before + 3; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    stop_ = true;
    if (background_.joinable()) background_.join();
    EXPECT_EQ(good_bad_.load(), 0) << "the well-behaved client saw failures: " << bad_why_;
    EXPECT_GE(good_ok_.load(), before + 3) << "the well-behaved client stopped getting answers";
    good_.reset();
    if (server_) server_->stop();
  }

  // The server logged a line naming this peer and containing `reason`.
  bool logged(const std::string& peer, const std::string& reason) const {
    for (int i = 0; i < timing_.log_polls; ++i) {
      for (const std::string& line : log_->last_formatted()) {
        if (line.find(peer) != std::string::npos && line.find(reason) != std::string::npos) {
          return true;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  static FrameHeader request(uint16_t method = proto::test::TestEcho::kMethod, uint64_t id = 1) {
    FrameHeader h;
    h.type = FrameType::kRequest;
    h.service = proto::kServiceTest;
    h.method = method;
    h.request_id = id;
    return h;
  }

  inline static std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> log_;
  HostilePeerTiming timing_;
  std::unique_ptr<RpcServer> server_;
  std::shared_ptr<RpcChannel> good_;
  std::thread background_;
  std::atomic<bool> stop_{false};
  std::atomic<int> good_ok_{0};
  std::atomic<int> good_bad_{0};
  std::mutex bad_mu_;
  std::string bad_why_;
};

}  // namespace surge::net::testing
