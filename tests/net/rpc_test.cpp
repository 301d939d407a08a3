// Transport conformance tests for RpcServer / RpcChannel: echo, error
// propagation, unknown methods, timeouts (late replies and late bulk data
// dropped), credits, 1,000 concurrent calls on one connection, many
// connections, bulk pull/push at every interesting size and unaligned
// offsets, a server process killed mid-request, reconnection, wrong key,
// the client's threads stopped at exit.
//
// Transport-agnostic on purpose: the same binary runs over RDMA.
//   default:                        TCP on 127.0.0.1
//   SURGE_NET_TRANSPORT=rdma SURGE_NET_HOST=10.99.0.1 ./net_rpc_test
// (inside the Soft-RoCE VM, tests/rdma/vm_run.sh). Raw-socket bad-input
// cases are TCP-only and live in bad_input_test.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "common/crc32c.h"
#include "net/proto/test_methods.h"
#include "tests/net/net_test_util.h"
#include "tests/net/test_service.h"

namespace surge::net::testing {
namespace {

namespace pt = surge::proto::test;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

class RpcTest : public ::testing::Test {
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

  Result<std::string> echo(RpcChannel& ch, const std::string& payload) {
    pt::EchoRequest req;
    req.set_payload(payload);
    pt::EchoReply resp;
    SURGE_RETURN_IF_ERROR(ch.call<pt::TestEcho>(req, &resp));
    return resp.payload();
  }

  std::unique_ptr<RpcServer> server_;
  std::shared_ptr<RpcChannel> channel_;
};

TEST_F(RpcTest, EchoReturnsThePayload) {
  auto r = echo(*channel_, "hello surge");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "hello surge");
}

TEST_F(RpcTest, EchoOfEmptyAndBinaryPayloads) {
  std::string binary(70000, '\0');
  for (size_t i = 0; i < binary.size(); ++i) binary[i] = static_cast<char>(i * 7);
  for (const std::string& p : {std::string(), binary}) {
    auto r = echo(*channel_, p);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, p);
  }
}

TEST_F(RpcTest, InlineHandlerEcho) {
  pt::EchoRequest req;
  req.set_payload("inline");
  pt::EchoReply resp;
  ASSERT_TRUE(channel_->call<pt::TestEchoInline>(req, &resp).ok());
  EXPECT_EQ(resp.payload(), "inline");
}

TEST_F(RpcTest, HandlerStatusReachesTheCallerIntact) {
  for (Code code : {Code::kNotFound, Code::kInvalidArgument, Code::kNoSpace, Code::kCorruption,
                    Code::kStale, Code::kPermissionDenied}) {
    pt::EchoRequest req;
    req.set_fail_code(static_cast<uint32_t>(code));
    req.set_fail_message("object 42 at offset 7: " + std::string(code_name(code)));
    pt::EchoReply resp;
    Status st = channel_->call<pt::TestEcho>(req, &resp);
    EXPECT_EQ(st.code(), code);
    EXPECT_EQ(st.message(), req.fail_message());
  }
  // The connection is fine afterwards.
  EXPECT_TRUE(echo(*channel_, "after errors").ok());
}

TEST_F(RpcTest, UnknownMethodIsReported) {
  std::string resp;
  Status st = channel_->call_raw(proto::kServiceTest, pt::kTestUnregisteredMethod, "", &resp);
  EXPECT_EQ(st.code(), Code::kUnknownMethod) << st.ToString();
  st = channel_->call_raw(4321, 1, "", &resp);
  EXPECT_EQ(st.code(), Code::kUnknownMethod) << st.ToString();
  EXPECT_TRUE(echo(*channel_, "still here").ok());
}

TEST_F(RpcTest, MalformedRequestBodyIsAProtocolErrorReply) {
  std::string resp;
  Status st = channel_->call_raw(proto::kServiceTest, pt::TestEcho::kMethod,
                                 std::string("\xff\xff\xff\xff", 4), &resp);
  EXPECT_EQ(st.code(), Code::kProtocolError) << st.ToString();
}

TEST_F(RpcTest, CallTimesOutAndTheLateReplyIsDropped) {
  pt::EchoRequest slow;
  slow.set_sleep_ms(1500);
  slow.set_payload("late");
  pt::EchoReply resp;
  auto start = Clock::now();
  Status st = channel_->call<pt::TestEcho>(slow, &resp, {}, milliseconds(100));
  EXPECT_EQ(st.code(), Code::kTimedOut) << st.ToString();
  EXPECT_LT(Clock::now() - start, milliseconds(1400));  // did not wait for the reply
  // Later calls work while and after the late reply arrives.
  for (int i = 0; i < 5; ++i) {
    auto r = echo(*channel_, "next " + std::to_string(i));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, "next " + std::to_string(i));
  }
  std::this_thread::sleep_for(milliseconds(1600));
  auto r = echo(*channel_, "after the late reply");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "after the late reply");
}

TEST_F(RpcTest, LateBulkDataNeverTouchesAnAbandonedRegion) {
  std::vector<std::byte> region(256 * 1024, std::byte{0});
  BulkRegion r{region.data(), region.size(), BulkAccess::kServerPush};
  pt::BulkRequest req;
  req.set_sleep_ms(600);
  req.set_seed(5);
  pt::BulkReply resp;
  Status st = channel_->call<pt::TestBulkSource>(req, &resp, {&r, 1}, milliseconds(100));
  EXPECT_EQ(st.code(), Code::kTimedOut) << st.ToString();
  std::this_thread::sleep_for(milliseconds(1000));  // the push has come and gone
  size_t touched = 0;
  for (std::byte b : region) touched += b != std::byte{0};
  EXPECT_EQ(touched, 0u);
  EXPECT_TRUE(echo(*channel_, "fine").ok());
}

TEST_F(RpcTest, ThousandConcurrentCallsOnOneConnection) {
  constexpr int kCalls = 1000;
  std::vector<PendingCall> calls;
  calls.reserve(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    pt::EchoRequest req;
    req.set_payload("call-" + std::to_string(i));
    calls.push_back(call_async<pt::TestEcho>(*channel_, req));
  }
  for (int i = 0; i < kCalls; ++i) {
    pt::EchoReply resp;
    Status st = finish_call<pt::TestEcho>(calls[i], &resp);
    ASSERT_TRUE(st.ok()) << i << ": " << st.ToString();
    ASSERT_EQ(resp.payload(), "call-" + std::to_string(i));
  }
}

TEST_F(RpcTest, PipelinedLargeRepliesDoNotStall) {
  // Requests and replies both far larger than the socket buffers, all sent
  // before the first wait: the client must keep reading while it writes.
  constexpr int kCalls = 100;
  std::string big(512 * 1024, 'r');
  // Serial calls read their own replies, leaving the client's I/O thread idle.
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(echo(*channel_, "warm").ok());
  std::vector<PendingCall> calls;
  for (int i = 0; i < kCalls; ++i) {
    pt::EchoRequest req;
    big[0] = static_cast<char>(i);
    req.set_payload(big);
    calls.push_back(call_async<pt::TestEchoInline>(*channel_, req, {}, milliseconds(20000)));
  }
  for (int i = 0; i < kCalls; ++i) {
    pt::EchoReply resp;
    Status st = finish_call<pt::TestEchoInline>(calls[i], &resp);
    ASSERT_TRUE(st.ok()) << i << ": " << st.ToString();
    ASSERT_EQ(resp.payload().size(), big.size());
    ASSERT_EQ(resp.payload()[0], static_cast<char>(i));
  }
}

TEST_F(RpcTest, LargeBulkEchoAfterSmallCalls) {
  // Pulled bytes fill the socket while the server pushes back: the caller is
  // blocked writing, so someone else must read.
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(echo(*channel_, "warm").ok());
  const size_t n = 48u << 20;
  auto src = pattern_bytes(n, 21);
  std::vector<std::byte> dst(n);
  BulkRegion regions[2] = {{src.data(), n, BulkAccess::kServerPull},
                           {dst.data(), n, BulkAccess::kServerPush}};
  pt::BulkReply resp;
  Status st = channel_->call<pt::TestBulkEcho>(pt::BulkRequest(), &resp, regions,
                                               milliseconds(20000));
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(src, dst);
}

TEST_F(RpcTest, ConcurrentCallersShareOneChannel) {
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        std::string p = std::to_string(t) + "/" + std::to_string(i);
        auto r = echo(*channel_, p);
        if (!r.ok() || *r != p) bad++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(RpcTest, ManyConnections) {
  constexpr int kConns = 32;
  std::vector<std::shared_ptr<RpcChannel>> chans;
  for (int i = 0; i < kConns; ++i) {
    chans.push_back(connect_or_die(server_->address()));
    ASSERT_NE(chans.back(), nullptr);
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kConns; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 20; ++k) {
        std::string p = std::to_string(i) + "/" + std::to_string(k);
        auto r = echo(*chans[i], p);
        if (!r.ok() || *r != p) bad++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(RpcCredits, ClientWaitsForCreditsInsteadOfOverrunningTheServer) {
  ServerOptions o = default_server_options();
  o.credits_per_connection = 4;
  o.worker_threads = 2;
  auto server = start_test_server(o);
  ASSERT_NE(server, nullptr);
  auto ch = connect_or_die(server->address());
  ASSERT_NE(ch, nullptr);
  std::vector<PendingCall> calls;
  for (int i = 0; i < 40; ++i) {
    pt::EchoRequest req;
    req.set_sleep_ms(5);
    req.set_payload(std::to_string(i));
    calls.push_back(call_async<pt::TestEcho>(*ch, req));
  }
  for (int i = 0; i < 40; ++i) {
    pt::EchoReply resp;
    Status st = finish_call<pt::TestEcho>(calls[i], &resp);
    ASSERT_TRUE(st.ok()) << i << ": " << st.ToString();
    EXPECT_EQ(resp.payload(), std::to_string(i));
  }
  EXPECT_TRUE(ch->connected());
}

// ------------------------------------------------------------------ bulk

class BulkSizes : public RpcTest, public ::testing::WithParamInterface<size_t> {};

// Region memory at odd offsets inside bigger allocations.
struct Unaligned {
  explicit Unaligned(size_t n, size_t skew) : storage(n + skew + 16), data(storage.data() + skew) {}
  std::vector<std::byte> storage;
  std::byte* data;
};

TEST_P(BulkSizes, EchoPullsAndPushesByteForByte) {
  const size_t n = GetParam();
  Unaligned src(n, 3);
  Unaligned dst(n, 5);
  fill_pattern({src.data, n}, 11, 0);
  std::memset(dst.data, 0xee, n);
  BulkRegion regions[2] = {{src.data, n, BulkAccess::kServerPull},
                           {dst.data, n, BulkAccess::kServerPush}};
  pt::BulkRequest req;
  pt::BulkReply resp;
  Status st = channel_->call<pt::TestBulkEcho>(req, &resp, regions, milliseconds(120000));
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(resp.length(), n);
  EXPECT_EQ(resp.crc32c(), crc32c(src.data, n));
  ASSERT_EQ(std::memcmp(src.data, dst.data, n), 0);
  // Bytes around the region are untouched.
  EXPECT_EQ(dst.storage[4], std::byte{0});
  EXPECT_EQ(dst.storage[5 + n], std::byte{0});
}

TEST_P(BulkSizes, PullOnly) {
  const size_t n = GetParam();
  Unaligned src(n, 1);
  fill_pattern({src.data, n}, 3, 0);
  BulkRegion r{src.data, n, BulkAccess::kServerPull};
  pt::BulkRequest req;
  pt::BulkReply resp;
  Status st = channel_->call<pt::TestBulkSink>(req, &resp, {&r, 1}, milliseconds(120000));
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(resp.length(), n);
  EXPECT_EQ(resp.crc32c(), crc32c(src.data, n));
}

TEST_P(BulkSizes, PushOnly) {
  const size_t n = GetParam();
  Unaligned dst(n, 7);
  BulkRegion r{dst.data, n, BulkAccess::kServerPush};
  pt::BulkRequest req;
  req.set_seed(9);
  pt::BulkReply resp;
  Status st = channel_->call<pt::TestBulkSource>(req, &resp, {&r, 1}, milliseconds(120000));
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::vector<std::byte> want(n);
  fill_pattern(want, 9, 0);
  ASSERT_TRUE(n == 0 || std::memcmp(want.data(), dst.data, n) == 0);
  EXPECT_EQ(resp.crc32c(), crc32c(want.data(), n));
}

INSTANTIATE_TEST_SUITE_P(Sizes, BulkSizes,
                         ::testing::Values(size_t{0}, size_t{1}, size_t{4095}, size_t{4096},
                                           size_t{(1 << 20) + 7}, size_t{64} << 20),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

TEST_F(RpcTest, PartialPullLeavesTheConnectionUsable) {
  // The handler pulls only the middle; the rest is discarded.
  const size_t n = 300000;
  auto src = pattern_bytes(n, 4);
  BulkRegion r{src.data(), n, BulkAccess::kServerPull};
  pt::BulkRequest req;
  req.set_offset(1000);
  req.set_length(5000);
  pt::BulkReply resp;
  ASSERT_TRUE(channel_->call<pt::TestBulkSink>(req, &resp, {&r, 1}).ok());
  EXPECT_EQ(resp.crc32c(), crc32c(src.data() + 1000, 5000));
  EXPECT_TRUE(echo(*channel_, "after a partial pull").ok());
}

TEST_F(RpcTest, PullPastTheRegionIsOutOfRange) {
  auto src = pattern_bytes(10000, 4);
  BulkRegion r{src.data(), src.size(), BulkAccess::kServerPull};
  pt::BulkRequest req;
  req.set_offset(9000);
  req.set_length(2000);
  pt::BulkReply resp;
  Status st = channel_->call<pt::TestBulkSink>(req, &resp, {&r, 1});
  EXPECT_EQ(st.code(), Code::kOutOfRange) << st.ToString();
  EXPECT_TRUE(echo(*channel_, "after out of range").ok());
}

TEST_F(RpcTest, PushIntoAPullOnlyRegionIsRefused) {
  auto src = pattern_bytes(4096, 4);
  BulkRegion r{src.data(), src.size(), BulkAccess::kServerPull};
  pt::BulkRequest req;
  pt::BulkReply resp;
  Status st = channel_->call<pt::TestBulkSource>(req, &resp, {&r, 1});
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_TRUE(echo(*channel_, "after refused push").ok());
}

TEST_F(RpcTest, ConcurrentBulkCallsOnOneConnection) {
  constexpr int kCalls = 16;
  const size_t n = 200000 + 13;
  std::vector<std::vector<std::byte>> srcs, dsts;
  std::vector<std::array<BulkRegion, 2>> regions(kCalls);
  std::vector<PendingCall> calls;
  for (int i = 0; i < kCalls; ++i) {
    srcs.push_back(pattern_bytes(n, i));
    dsts.emplace_back(n);
  }
  for (int i = 0; i < kCalls; ++i) {
    regions[i] = {BulkRegion{srcs[i].data(), n, BulkAccess::kServerPull},
                  BulkRegion{dsts[i].data(), n, BulkAccess::kServerPush}};
    calls.push_back(call_async<pt::TestBulkEcho>(*channel_, pt::BulkRequest(), regions[i]));
  }
  for (int i = 0; i < kCalls; ++i) {
    pt::BulkReply resp;
    ASSERT_TRUE(finish_call<pt::TestBulkEcho>(calls[i], &resp).ok());
    ASSERT_EQ(srcs[i], dsts[i]) << "call " << i;
  }
}

// ---------------------------------------------------------- failures

TEST(RpcAuth, WrongClusterKeyIsRejected) {
  auto server = start_test_server();
  ASSERT_NE(server, nullptr);
  ChannelOptions o;
  o.cluster_key = "not-the-key";
  auto ch = RpcChannel::Connect(server->address(), o);
  ASSERT_FALSE(ch.ok());
  EXPECT_EQ(ch.status().code(), Code::kAuthFailed) << ch.status().ToString();
  // The server keeps serving clients that know the key.
  auto good = connect_or_die(server->address());
  ASSERT_NE(good, nullptr);
  pt::EchoRequest req;
  req.set_payload("ok");
  pt::EchoReply resp;
  EXPECT_TRUE(good->call<pt::TestEcho>(req, &resp).ok());
}

// A brief handler run on the transport thread that finds it would have to
// wait moves itself to a worker: the core runs it again there, and the
// caller gets only the worker run's reply.
TEST(RpcDefer, AHandlerOnTheTransportThreadMovesToAWorker) {
  auto created = RpcServer::Create(default_server_options());
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::unique_ptr<RpcServer> server = std::move(*created);
  std::mutex mu;
  std::vector<bool> runs;      // on_transport_thread() of each run
  std::vector<bool> deferred;  // deferred() of each run after asking to defer
  server->add<pt::TestEcho>(
      [&](RpcContext& ctx, const pt::EchoRequest& req, pt::EchoReply& resp) {
        const bool on_transport = ctx.on_transport_thread();
        const bool moved = ctx.defer_to_worker();
        {
          std::lock_guard lk(mu);
          runs.push_back(on_transport);
          deferred.push_back(ctx.deferred());
        }
        if (moved) return Status::Internal("this run's answer is dropped");
        resp.set_payload(req.payload() + " from a worker");
        return Status::OK();
      },
      HandlerMode::kShortBlocking);
  ASSERT_TRUE(server->start().ok());
  auto ch = connect_or_die(server->address());
  ASSERT_NE(ch, nullptr);
  pt::EchoRequest req;
  req.set_payload("echo");
  pt::EchoReply resp;
  Status st = ch->call<pt::TestEcho>(req, &resp);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(resp.payload(), "echo from a worker");
  std::lock_guard lk(mu);
  // An idle server runs a lone brief request in place first.
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_TRUE(runs[0]);
  EXPECT_FALSE(runs[1]);
  EXPECT_EQ(deferred, (std::vector<bool>{true, false}));  // a worker cannot defer
}

TEST(RpcConnect, NobodyListeningIsAnError) {
  auto server = start_test_server();
  ASSERT_NE(server, nullptr);
  std::string addr = server->address();
  server->stop();
  server.reset();
  ChannelOptions o;
  o.cluster_key = kTestKey;
  o.connect_timeout = milliseconds(2000);
  auto ch = RpcChannel::Connect(addr, o);
  ASSERT_FALSE(ch.ok());
  EXPECT_TRUE(ch.status().code() == Code::kConnectionRefused ||
              ch.status().code() == Code::kUnavailable ||
              ch.status().code() == Code::kTimedOut)
      << ch.status().ToString();
}

TEST(RpcServerStop, OutstandingCallsFailPromptly) {
  auto server = start_test_server();
  ASSERT_NE(server, nullptr);
  auto ch = connect_or_die(server->address());
  ASSERT_NE(ch, nullptr);
  pt::EchoRequest req;
  req.set_sleep_ms(2000);
  PendingCall call = call_async<pt::TestEcho>(*ch, req);
  std::this_thread::sleep_for(milliseconds(100));
  auto start = Clock::now();
  std::thread stopper([&] { server->stop(); });
  Status st = call.wait();
  auto waited = Clock::now() - start;
  stopper.join();
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(st.code() == Code::kDisconnected || st.code() == Code::kCancelled)
      << st.ToString();
  EXPECT_LT(waited, milliseconds(1500));  // not held until the handler finished
  EXPECT_FALSE(ch->connected());
  pt::EchoReply resp;
  EXPECT_EQ(ch->call<pt::TestEcho>(pt::EchoRequest(), &resp).code(), Code::kDisconnected);
}

TEST(RpcProcess, ServerKilledMidRequestFailsTheCallPromptly) {
  auto proc = ServerProcess::Start(listen_address());
  ASSERT_NE(proc, nullptr);
  auto ch = connect_or_die(proc->address());
  ASSERT_NE(ch, nullptr);
  pt::EchoRequest slow;
  slow.set_sleep_ms(20000);
  std::vector<PendingCall> calls;
  // Fewer than the server's 4 workers, so the bulk echo below gets one (its
  // pulled bytes stall the connection until a handler reads them).
  for (int i = 0; i < 2; ++i) calls.push_back(call_async<pt::TestEcho>(*ch, slow));
  // And a bulk call whose push is pending.
  std::vector<std::byte> dst(1 << 20);
  BulkRegion region{dst.data(), dst.size(), BulkAccess::kServerPush};
  pt::BulkRequest breq;
  breq.set_sleep_ms(20000);
  PendingCall bulk = call_async<pt::TestBulkSource>(*ch, breq, {&region, 1});
  std::this_thread::sleep_for(milliseconds(200));
  auto start = Clock::now();
  proc->kill_now();
  for (auto& c : calls) {
    Status st = c.wait();
    EXPECT_EQ(st.code(), Code::kDisconnected) << st.ToString();
  }
  Status bst = bulk.wait();
  EXPECT_EQ(bst.code(), Code::kDisconnected) << bst.ToString();
  EXPECT_LT(Clock::now() - start, milliseconds(5000));  // far below the 20 s sleep
  EXPECT_FALSE(ch->connected());
}

TEST(RpcProcess, ChannelPoolReconnectsToARestartedServer) {
  auto proc = ServerProcess::Start(listen_address());
  ASSERT_NE(proc, nullptr);
  std::string addr = proc->address();
  ChannelOptions o;
  o.cluster_key = kTestKey;
  ChannelPool pool(o);
  auto ch = pool.get(addr);
  ASSERT_TRUE(ch.ok()) << ch.status().ToString();
  pt::EchoRequest req;
  req.set_payload("one");
  pt::EchoReply resp;
  ASSERT_TRUE((*ch)->call<pt::TestEcho>(req, &resp).ok());
  proc->kill_now();
  EXPECT_FALSE((*ch)->call<pt::TestEcho>(req, &resp).ok());
  // Same address again.
  proc = ServerProcess::Start(addr);
  ASSERT_NE(proc, nullptr);
  auto again = pool.get(addr);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_NE(again->get(), ch->get());
  req.set_payload("two");
  ASSERT_TRUE((*again)->call<pt::TestEcho>(req, &resp).ok());
  EXPECT_EQ(resp.payload(), "two");
}

// Whether a thread of this process has the name (/proc/self/task/*/comm).
bool thread_named(const std::string& name) {
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream f(t.path() / "comm");
    std::string comm;
    if (std::getline(f, comm) && comm == name) return true;
  }
  return false;
}

// The first thread of the process-wide pool the client transport runs on.
bool client_thread_alive() {
  return thread_named(transport_scheme() == "rdma" ? "rdma-client" : "surge-cli-io0");
}

// The client transport's threads (one process-wide pool) reap the closes of
// channels just dropped, freeing and logging as they go, so they ran on
// into exit() while it destroyed the statics they touch: over RDMA,
// surgectl died of a double free at exit after its scrub report (the loop
// frees devices, erasing them from a table exit() destroys). In a fresh
// process (the death test's), a handler registered before the first
// channel runs after the transport's own exit handler, and finds the
// pool's first thread gone.
TEST(RpcProcess, ClientThreadsAreStoppedBeforeExitDestroysStatics) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::atexit([] {
          if (client_thread_alive()) _exit(3);
        });
        auto proc = ServerProcess::Start(listen_address());
        if (proc == nullptr) _exit(4);
        auto ch = connect_or_die(proc->address());
        pt::EchoRequest req;
        req.set_payload("before exit");
        pt::EchoReply resp;
        if (ch == nullptr || !ch->call<pt::TestEcho>(req, &resp).ok()) _exit(5);
        ch.reset();
        proc.reset();
        if (!client_thread_alive()) _exit(6);  // else the check at exit proves nothing
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace surge::net::testing
