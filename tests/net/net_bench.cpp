// net_bench: the net layer against its ceiling, in one run.
//
// For bulk push (server -> client) and pull (client -> server) at 4 KiB,
// 64 KiB and 1 MiB, and for small round trips, it measures RpcServer /
// RpcChannel (test service, tests/net/test_service.h) and, next to it, a
// plain blocking socket pair over the same loopback doing the same exchange
// (a small request, then the bytes; or the ping-pong). The ratio table at
// the end is rpc / ceiling. Targets (issue 2): >= 0.8 for 1 MiB bulk,
// >= 0.5 for small round trips.
//
//   build-net/tests/net/net_bench                      # TCP, in-process server
//   net_bench --benchmark_repetitions=5 --benchmark_min_time=1
//   net_bench --net_transport=rdma --net_host=10.99.0.1   # RDMA (or the
//       SURGE_NET_TRANSPORT / SURGE_NET_HOST variables the tests use)
//   net_bench --net_address=tcp://HOST:PORT --net_key=KEY  # external
//       net_test_server (the socket ceiling still runs locally)
//
// BM_RpcPushQD / BM_RpcPullQD (SIZE, DEPTH) keep DEPTH calls in flight on
// the one channel, as the striped client does (one benchmark iteration =
// one completed call): the figure to put next to perftest, whose own
// queue depth is 128. They have no socket ceiling of their own.
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <thread>

#include "common/log.h"
#include "net/proto/test_methods.h"
#include "tests/net/net_test_util.h"
#include "tests/net/test_service.h"

namespace surge::net::testing {
namespace {

namespace pt = surge::proto::test;

// Context switches of the whole process (every thread) so far: thread
// hand-offs per call, a cost figure that host load does not blur.
int64_t context_switches() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_nvcsw + ru.ru_nivcsw;
}

// Sets the "csw" counter: context switches per benchmark iteration.
class SwitchCounter {
 public:
  explicit SwitchCounter(benchmark::State& state) : state_(state), start_(context_switches()) {}
  ~SwitchCounter() {
    if (state_.iterations() > 0) {
      state_.counters["csw"] = static_cast<double>(context_switches() - start_) /
                               static_cast<double>(state_.iterations());
    }
  }

 private:
  benchmark::State& state_;
  int64_t start_;
};

std::string g_address;  // external server, or empty for in-process
std::string g_key = kTestKey;
std::unique_ptr<RpcServer> g_server;
std::shared_ptr<RpcChannel> g_channel;

RpcChannel& channel() {
  if (!g_channel) {
    std::string addr = g_address;
    if (addr.empty()) {
      ServerOptions o;
      o.listen = listen_address();
      o.cluster_key = g_key;
      o.io_threads = 2;
      o.worker_threads = 8;  // surge-ods's default
      auto server = RpcServer::Create(o);
      if (!server.ok()) {
        std::cerr << "server: " << server.status().ToString() << "\n";
        std::exit(1);
      }
      // Push and pull in the mode a data server runs its reads and writes.
      register_test_service(**server, HandlerMode::kShortBlocking);
      if (auto st = (*server)->start(); !st.ok()) {
        std::cerr << "server start: " << st.ToString() << "\n";
        std::exit(1);
      }
      g_server = std::move(*server);
      addr = g_server->address();
    }
    ChannelOptions co;
    co.cluster_key = g_key;
    auto ch = RpcChannel::Connect(addr, co);
    if (!ch.ok()) {
      std::cerr << "connect " << addr << ": " << ch.status().ToString() << "\n";
      std::exit(1);
    }
    g_channel = *ch;
  }
  return *g_channel;
}

// Client buffers from a registered pool, as a real client's would be.
std::unique_ptr<BufferPool> g_client_pool;
PoolBuffer client_buffer(size_t size = 1 << 20) {
  if (!g_client_pool) {
    BufferPoolOptions o;
    o.name = "bench-client";
    // 1 MiB buffers for one call at a time, and enough of each size for
    // the deepest queue the QD benchmarks keep.
    o.classes = {{64 << 10, 80}, {1 << 20, 20}};
    g_client_pool = std::move(BufferPool::Create(o).value());
  }
  PoolBuffer b = g_client_pool->try_acquire(size).value();
  std::memset(b.data(), 0x5a, b.capacity());
  return b;
}

// One call of SIZE bytes at a time: the server pushes into (TestBulkSource)
// or pulls from (TestBulkSink) one client buffer.
template <typename M>
void run_one_at_a_time(benchmark::State& state, BulkAccess access) {
  const size_t n = static_cast<size_t>(state.range(0));
  PoolBuffer buf = client_buffer();
  channel();  // connected before counting
  SwitchCounter csw(state);
  BulkRegion r{buf.data(), n, access};
  pt::BulkRequest req;
  req.set_skip_checksum(true);
  pt::BulkReply resp;
  for (auto _ : state) {
    Status st = channel().call<M>(req, &resp, {&r, 1});
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
}

void BM_RpcPush(benchmark::State& state) {
  run_one_at_a_time<pt::TestBulkSource>(state, BulkAccess::kServerPush);
}

void BM_RpcPull(benchmark::State& state) {
  run_one_at_a_time<pt::TestBulkSink>(state, BulkAccess::kServerPull);
}

// DEPTH calls of SIZE bytes in flight on one channel: each iteration waits
// for the oldest and issues the next in its place, so the queue stays full.
template <typename M>
void run_queue_depth(benchmark::State& state, BulkAccess access) {
  const size_t n = static_cast<size_t>(state.range(0));
  const size_t depth = static_cast<size_t>(state.range(1));
  std::vector<PoolBuffer> bufs;
  std::vector<BulkRegion> regions;
  for (size_t i = 0; i < depth; ++i) {
    bufs.push_back(client_buffer(n));
    regions.push_back({bufs.back().data(), n, access});
  }
  pt::BulkRequest req;
  req.set_skip_checksum(true);
  pt::BulkReply resp;
  RpcChannel& ch = channel();
  SwitchCounter csw(state);
  std::vector<PendingCall> calls(depth);
  for (size_t i = 0; i < depth; ++i) calls[i] = call_async<M>(ch, req, {&regions[i], 1});
  size_t next = 0;
  for (auto _ : state) {
    Status st = finish_call<M>(calls[next], &resp);
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      break;
    }
    calls[next] = call_async<M>(ch, req, {&regions[next], 1});
    next = (next + 1) % depth;
  }
  for (auto& c : calls) (void)c.wait();  // drain before the buffers go
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
  state.counters["depth"] = static_cast<double>(depth);
}

void BM_RpcPushQD(benchmark::State& state) {
  run_queue_depth<pt::TestBulkSource>(state, BulkAccess::kServerPush);
}
void BM_RpcPullQD(benchmark::State& state) {
  run_queue_depth<pt::TestBulkSink>(state, BulkAccess::kServerPull);
}

void BM_RpcRoundTrip(benchmark::State& state) {
  channel();  // connected before counting
  SwitchCounter csw(state);
  pt::EchoRequest req;
  req.set_payload(std::string(16, 'p'));
  pt::EchoReply resp;
  for (auto _ : state) {
    Status st = channel().call<pt::TestEchoInline>(req, &resp);
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_RpcRoundTripWorker(benchmark::State& state) {
  channel();  // connected before counting
  SwitchCounter csw(state);
  pt::EchoRequest req;
  req.set_payload(std::string(16, 'p'));
  pt::EchoReply resp;
  for (auto _ : state) {
    Status st = channel().call<pt::TestEcho>(req, &resp);
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations());
}

// ------------------------------------------------- the ceiling: raw sockets

// A connected loopback TCP pair with TCP_NODELAY, blocking.
struct SocketPair {
  int client = -1;
  int server = -1;
  SocketPair() {
    int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(lfd, 1);
    ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
    client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) std::abort();
    server = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    ::close(lfd);
    int one = 1;
    ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~SocketPair() {
    ::close(client);
    ::close(server);
  }
};

bool read_full(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::recv(fd, c, n, 0);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}
bool write_full(int fd, const void* p, size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t r = ::send(fd, c, n, MSG_NOSIGNAL);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Request: 64 bytes {op, n}. op 1: server sends n bytes (push); op 2: the
// client sends n bytes after the request, server replies 64 bytes (pull);
// op 3: 64-byte echo (round trip). op 0 ends.
void ceiling_server(int fd) {
  std::vector<char> buf(1 << 20, 'c');
  char req[64];
  while (read_full(fd, req, sizeof req)) {
    uint64_t op, n;
    std::memcpy(&op, req, 8);
    std::memcpy(&n, req + 8, 8);
    if (op == 0) return;
    if (op == 1 && !write_full(fd, buf.data(), n)) return;
    if (op == 2 && (!read_full(fd, buf.data(), n) || !write_full(fd, req, sizeof req))) return;
    if (op == 3 && !write_full(fd, req, sizeof req)) return;
  }
}

void run_ceiling(benchmark::State& state, uint64_t op, size_t n) {
  SocketPair sp;
  std::thread server(ceiling_server, sp.server);
  std::vector<char> buf(1 << 20, 'x');
  char req[64] = {};
  std::memcpy(req, &op, 8);
  uint64_t n64 = n;
  std::memcpy(req + 8, &n64, 8);
  for (auto _ : state) {
    write_full(sp.client, req, sizeof req);
    if (op == 1) read_full(sp.client, buf.data(), n);
    if (op == 2) {
      write_full(sp.client, buf.data(), n);
      read_full(sp.client, req, sizeof req);
    }
    if (op == 3) read_full(sp.client, req, sizeof req);
  }
  uint64_t stop = 0;
  std::memcpy(req, &stop, 8);
  write_full(sp.client, req, sizeof req);
  server.join();
}

void BM_SocketPush(benchmark::State& state) {
  run_ceiling(state, 1, static_cast<size_t>(state.range(0)));
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
void BM_SocketPull(benchmark::State& state) {
  run_ceiling(state, 2, static_cast<size_t>(state.range(0)));
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
void BM_SocketRoundTrip(benchmark::State& state) {
  run_ceiling(state, 3, 0);
  state.SetItemsProcessed(state.iterations());
}

// Registered in main(), rpc next to its ceiling so both see the same
// machine load (this box is shared; medians of a few repetitions).
void register_benchmarks() {
  for (int64_t size : {int64_t{4} << 10, int64_t{64} << 10, int64_t{1} << 20}) {
    benchmark::RegisterBenchmark("BM_RpcPush", BM_RpcPush)->Arg(size)->UseRealTime();
    benchmark::RegisterBenchmark("BM_SocketPush", BM_SocketPush)->Arg(size)->UseRealTime();
    benchmark::RegisterBenchmark("BM_RpcPull", BM_RpcPull)->Arg(size)->UseRealTime();
    benchmark::RegisterBenchmark("BM_SocketPull", BM_SocketPull)->Arg(size)->UseRealTime();
  }
  for (int64_t size : {int64_t{64} << 10, int64_t{1} << 20}) {
    // 64 deep only at 64 KiB: it takes 64 MiB of client buffers at 1 MiB.
    for (int64_t depth : {4, 16, 64}) {
      if (depth == 64 && size != int64_t{64} << 10) continue;
      benchmark::RegisterBenchmark("BM_RpcPushQD", BM_RpcPushQD)
          ->Args({size, depth})
          ->UseRealTime();
      benchmark::RegisterBenchmark("BM_RpcPullQD", BM_RpcPullQD)
          ->Args({size, depth})
          ->UseRealTime();
    }
  }
  benchmark::RegisterBenchmark("BM_RpcRoundTrip", BM_RpcRoundTrip)->UseRealTime();
  benchmark::RegisterBenchmark("BM_SocketRoundTrip", BM_SocketRoundTrip)->UseRealTime();
  benchmark::RegisterBenchmark("BM_RpcRoundTripWorker", BM_RpcRoundTripWorker)->UseRealTime();
}

// Remembers each run's rate so main() can print rpc / ceiling.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      // With repetitions, the median aggregate; else the single run.
      std::string name = r.run_name.str();
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median") continue;
      auto it = r.counters.find("bytes_per_second");
      if (it == r.counters.end()) it = r.counters.find("items_per_second");
      if (it == r.counters.end()) continue;
      if (r.run_type == Run::RT_Aggregate || rates.find(name) == rates.end()) {
        rates[name] = it->second.value;
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  std::map<std::string, double> rates;
};

}  // namespace
}  // namespace surge::net::testing

int main(int argc, char** argv) {
  using namespace surge::net::testing;
  std::vector<char*> rest;
  bool repetitions_given = false;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--net_address=", 0) == 0) {
      g_address = a.substr(14);
    } else if (a.rfind("--net_key=", 0) == 0) {
      g_key = a.substr(10);
    } else if (a.rfind("--net_transport=", 0) == 0) {
      ::setenv("SURGE_NET_TRANSPORT", a.substr(16).c_str(), 1);
    } else if (a.rfind("--net_host=", 0) == 0) {
      ::setenv("SURGE_NET_HOST", a.substr(11).c_str(), 1);
    } else {
      if (a.rfind("--benchmark_repetitions", 0) == 0) repetitions_given = true;
      rest.push_back(argv[i]);
    }
  }
  // Default: 3 repetitions of 0.3 s each, medians reported (about a minute).
  static char reps[] = "--benchmark_repetitions=3";
  static char aggr[] = "--benchmark_report_aggregates_only=true";
  static char min_time[] = "--benchmark_min_time=0.3";
  if (!repetitions_given) {
    rest.insert(rest.begin() + 1, {reps, aggr, min_time});
  }
  register_benchmarks();
  int n = static_cast<int>(rest.size());
  (void)surge::init_logging("warn");
  benchmark::Initialize(&n, rest.data());
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);

  struct Pair {
    const char* label;
    std::string rpc, ceiling;
    double target;
  };
  std::vector<Pair> pairs;
  for (const char* sz : {"4096", "65536", "1048576"}) {
    double target = std::string(sz) == "1048576" ? 0.8 : 0.0;
    pairs.push_back({"push", std::string("BM_RpcPush/") + sz + "/real_time",
                     std::string("BM_SocketPush/") + sz + "/real_time", target});
    pairs.push_back({"pull", std::string("BM_RpcPull/") + sz + "/real_time",
                     std::string("BM_SocketPull/") + sz + "/real_time", target});
  }
  pairs.push_back({"round trip (inline handler)", "BM_RpcRoundTrip/real_time",
                   "BM_SocketRoundTrip/real_time", 0.5});
  pairs.push_back({"round trip (worker handler)", "BM_RpcRoundTripWorker/real_time",
                   "BM_SocketRoundTrip/real_time", 0.0});
  std::printf("\n%-30s %-26s %12s %12s %7s %s\n", "exchange", "rpc benchmark", "rpc", "ceiling",
              "ratio", "target");
  for (const Pair& p : pairs) {
    auto a = reporter.rates.find(p.rpc);
    auto b = reporter.rates.find(p.ceiling);
    if (a == reporter.rates.end() || b == reporter.rates.end() || b->second <= 0) continue;
    bool bytes = p.rpc.find("Round") == std::string::npos;
    double scale = bytes ? 1.0 / (1 << 20) : 1.0;
    std::printf(
        "%-30s %-26s %10.0f%s %10.0f%s %7.2f %s\n", p.label,
        p.rpc.substr(0, p.rpc.find("/real_time")).c_str(), a->second * scale, bytes ? "M/s" : "/s",
        b->second * scale, bytes ? "M/s" : "/s", a->second / b->second,
        p.target > 0 ? (a->second / b->second >= p.target ? ">= target" : "BELOW target") : "");
  }
  g_channel.reset();
  if (g_server) g_server->stop();
  benchmark::Shutdown();
  return 0;
}
