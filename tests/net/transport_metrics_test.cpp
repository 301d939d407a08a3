// The transport's series (net/transport_metrics.h) on the process's
// metrics page move with real traffic: calls and bytes on both sides of a
// connection, errors on each side, failed connects, a ChannelPool
// reconnect, and over RDMA the work completions. Each case reads the page
// (metrics::Registry::global().render(), what /metrics serves) before and
// after and checks the difference.
//
// Transport-agnostic like net_rpc_test: TCP on 127.0.0.1 by default; the
// RDMA VM suite runs it with SURGE_NET_TRANSPORT=rdma SURGE_NET_HOST=...
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/metrics/registry.h"
#include "net/proto/test_methods.h"
#include "tests/net/net_test_util.h"
#include "tests/net/test_service.h"

namespace surge::net::testing {
namespace {

namespace pt = surge::proto::test;

// The value of the sample `series` (name{labels}) on the page; -1 when
// the page has no such line.
double sample(const std::string& series) {
  const std::string page = metrics::Registry::global().render();
  const std::string key = "\n" + series + " ";
  auto at = page.find(key);
  if (at == std::string::npos) return -1;
  return std::stod(page.substr(at + key.size()));
}

std::string net_series(const std::string& name, const std::string& side) {
  return name + "{transport=\"" + transport_scheme() + "\",side=\"" + side + "\"}";
}

class TransportMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = start_test_server();
    ASSERT_NE(server_, nullptr);
    channel_ = connect_or_die(server_->address());
    ASSERT_NE(channel_, nullptr);
  }
  void TearDown() override {
    channel_.reset();
    if (server_) server_->stop();
  }

  std::unique_ptr<RpcServer> server_;
  std::shared_ptr<RpcChannel> channel_;
};

TEST_F(TransportMetricsTest, CallsAndBytesMoveOnBothSides) {
  const char* kNames[] = {"surge_net_calls_total", "surge_net_sent_bytes_total",
                          "surge_net_received_bytes_total"};
  std::vector<double> before;
  for (const char* side : {"client", "server"}) {
    for (const char* n : kNames) {
      before.push_back(sample(net_series(n, side)));
      ASSERT_GE(before.back(), 0) << net_series(n, side) << " is not on the page:\n"
                                  << metrics::Registry::global().render();
    }
  }
  // Ten echoes of 100 KB each way, and a 1 MiB push into client memory.
  constexpr size_t kEcho = 100000;
  pt::EchoRequest req;
  req.set_payload(std::string(kEcho, 'e'));
  pt::EchoReply resp;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(channel_->call<pt::TestEcho>(req, &resp).ok());
  std::vector<std::byte> dst(1 << 20);
  BulkRegion region{dst.data(), dst.size(), BulkAccess::kServerPush};
  pt::BulkRequest breq;
  pt::BulkReply bresp;
  Status st = channel_->call<pt::TestBulkSource>(breq, &bresp, {&region, 1});
  ASSERT_TRUE(st.ok()) << st.ToString();

  std::vector<double> d;
  size_t i = 0;
  for (const char* side : {"client", "server"}) {
    for (const char* n : kNames) d.push_back(sample(net_series(n, side)) - before[i++]);
  }
  // client: calls, sent, received; server: calls, sent, received. Over
  // RDMA the push is the server's WRITE: the client posts nothing for it,
  // so only the server counts its bytes.
  const double push_seen_by_client = transport_scheme() == "rdma" ? 0 : (1 << 20);
  EXPECT_EQ(d[0], 11);
  EXPECT_GE(d[1], 10 * kEcho);
  EXPECT_GE(d[2], 10 * kEcho + push_seen_by_client);
  EXPECT_EQ(d[3], 11);
  EXPECT_GE(d[4], 10 * kEcho + (1 << 20));
  EXPECT_GE(d[5], 10 * kEcho);
}

TEST_F(TransportMetricsTest, ARefusedRequestIsAServerSideError) {
  const std::string server_errors = net_series("surge_net_call_errors_total", "server");
  const std::string client_errors = net_series("surge_net_call_errors_total", "client");
  const double server_before = sample(server_errors);
  const double client_before = sample(client_errors);
  ASSERT_GE(server_before, 0);
  std::string resp;
  Status st = channel_->call_raw(proto::kServiceTest, pt::kTestUnregisteredMethod, "", &resp);
  ASSERT_EQ(st.code(), Code::kUnknownMethod) << st.ToString();
  EXPECT_EQ(sample(server_errors) - server_before, 1);
  // The client got its reply: not a transport error on its side.
  EXPECT_EQ(sample(client_errors) - client_before, 0);
}

TEST_F(TransportMetricsTest, ATimedOutCallIsOneClientSideErrorEvenWhenItsConnectionFailsLater) {
  const std::string errors = net_series("surge_net_call_errors_total", "client");
  const double before = sample(errors);
  ASSERT_GE(before, 0);
  pt::EchoRequest slow;
  slow.set_sleep_ms(2000);
  pt::EchoReply resp;
  Status st = channel_->call<pt::TestEcho>(slow, &resp, {}, std::chrono::milliseconds(100));
  ASSERT_EQ(st.code(), Code::kTimedOut) << st.ToString();
  EXPECT_EQ(sample(errors) - before, 1);
  // The abandoned call stays in the table for its credit; the connection
  // failing now must not count it again.
  channel_->close();
  EXPECT_EQ(sample(errors) - before, 1);
}

TEST(TransportMetricsProcess, ACallLostWithItsServerIsAClientSideError) {
  auto proc = ServerProcess::Start(listen_address());
  ASSERT_NE(proc, nullptr);
  auto ch = connect_or_die(proc->address());
  ASSERT_NE(ch, nullptr);
  const std::string errors = net_series("surge_net_call_errors_total", "client");
  const double before = sample(errors);
  ASSERT_GE(before, 0);
  pt::EchoRequest slow;
  slow.set_sleep_ms(20000);
  PendingCall call = call_async<pt::TestEcho>(*ch, slow);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  proc->kill_now();
  Status st = call.wait();
  ASSERT_EQ(st.code(), Code::kDisconnected) << st.ToString();
  EXPECT_EQ(sample(errors) - before, 1);
}

TEST(TransportMetricsProcess, FailedConnectsAndReconnectsAreCounted) {
  const std::string t = "{transport=\"" + transport_scheme() + "\"}";
  auto proc = ServerProcess::Start(listen_address());
  ASSERT_NE(proc, nullptr);
  const std::string addr = proc->address();
  ChannelOptions o;
  o.cluster_key = kTestKey;
  o.connect_timeout = std::chrono::milliseconds(2000);
  ChannelPool pool(o);
  auto ch = pool.get(addr);
  ASSERT_TRUE(ch.ok()) << ch.status().ToString();
  const double reconnects = sample("surge_net_reconnects_total" + t);
  const double connect_errors = sample("surge_net_connect_errors_total" + t);
  ASSERT_GE(reconnects, 0);
  ASSERT_GE(connect_errors, 0);
  pt::EchoRequest req;
  pt::EchoReply resp;
  proc->kill_now();
  EXPECT_FALSE((*ch)->call<pt::TestEcho>(req, &resp).ok());
  // Nobody listens: the connect fails.
  EXPECT_FALSE(pool.get(addr).ok());
  EXPECT_EQ(sample("surge_net_connect_errors_total" + t) - connect_errors, 1);
  EXPECT_EQ(sample("surge_net_reconnects_total" + t) - reconnects, 0);
  // Back at the same address: the pool replaces the dead channel.
  proc = ServerProcess::Start(addr);
  ASSERT_NE(proc, nullptr);
  auto again = pool.get(addr);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_TRUE((*again)->call<pt::TestEcho>(req, &resp).ok());
  EXPECT_EQ(sample("surge_net_reconnects_total" + t) - reconnects, 1);
}

TEST_F(TransportMetricsTest, RdmaCompletionsAreCountedOverRdma) {
  // Declared for every process that uses a transport (zero without RDMA),
  // so a dashboard finds them on any page.
  for (const char* side : {"client", "server"}) {
    for (const char* queue : {"send", "recv"}) {
      const std::string labels =
          std::string("{side=\"") + side + "\",queue=\"" + queue + "\"}";
      EXPECT_GE(sample("surge_net_rdma_completions_total" + labels), 0) << labels;
      EXPECT_GE(sample("surge_net_rdma_completion_errors_total" + labels), 0) << labels;
    }
  }
  const std::string recv = "surge_net_rdma_completions_total{side=\"server\",queue=\"recv\"}";
  const double before = sample(recv);
  pt::EchoRequest req;
  req.set_payload("count me");
  pt::EchoReply resp;
  ASSERT_TRUE(channel_->call<pt::TestEcho>(req, &resp).ok());
  // Over RDMA the request arrived as (at least) one receive completion on
  // the server; over TCP there are none.
  if (transport_scheme() == "rdma") {
    EXPECT_GE(sample(recv) - before, 1);
    // The open connection's state (RdmaConnection::counters()), summed
    // over the process's connections: both ends keep receives posted.
    for (const char* side : {"client", "server"}) {
      const std::string labels = std::string("{side=\"") + side + "\"}";
      EXPECT_GT(sample("surge_net_rdma_posted_receives" + labels), 0) << labels;
      EXPECT_GE(sample("surge_net_rdma_send_credits" + labels), 0) << labels;
      EXPECT_GE(sample("surge_net_rdma_queued_sends" + labels), 0) << labels;
    }
  } else {
    EXPECT_EQ(sample(recv) - before, 0);
  }
}

}  // namespace
}  // namespace surge::net::testing
