// ods_bench: one surge-ods over TCP loopback next to its two ceilings, in
// one run, on the same file system:
//   BM_OdsWrite / BM_OdsRead    OdsWrite/OdsRead through RpcChannel to a
//                               surge-ods process (payload CRC both ways)
//   BM_Pwrite / BM_Pread        pwrite/pread of the same bytes to a file in
//                               the same directory
//   BM_SocketPair               the same bytes over a plain TCP loopback
//                               connection, one message and an 8-byte ack
//                               per operation (what one RPC does)
//   BM_SocketStream             the same bytes streamed with no ack: the
//                               bandwidth ceiling of one connection
//   BM_OdsWriteQD4 / ReadQD4    4 requests in flight on one connection
//   BM_OdsStat                  one request's floor (no bulk)
//   BM_UringWrite               the same writes through io_uring, one at a
//                               time as a worker would issue them: the
//                               measurement behind pwritev in the store
//   BM_OdsWriteFresh            one OdsWrite per new object (a fresh small
//                               file, or the first MiB of a fresh stripe):
//                               object creation, sidecar, fan-out included
//   BM_PwriteFresh              its ceiling: open(O_CREAT) + pwrite + close
//                               of a new file in one directory of the same
//                               file system
// Sizes: 64 KiB and 1 MiB (fresh: 4 KiB too). Run:
// build-ods/tests/ods/ods_bench (SURGE_BUILD_DIR defaults to the build dir
// holding this binary). SURGE_ODS_BENCH_DIR puts the data server's store and
// the plain files in that directory (default /tmp), e.g. on a tmpfs.
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <thread>

#include "tests/ods/ods_fixture.h"

namespace {

using namespace surge;
using namespace surge::ods::testing;

constexpr uint64_t kSpan = 256 << 20;  // offsets cycle over 256 MiB: stays in the page cache

struct Env {
  TempDir dir{"surge-ods-bench",
              std::getenv("SURGE_ODS_BENCH_DIR") != nullptr ? std::getenv("SURGE_ODS_BENCH_DIR") : "/tmp"};
  std::string key_file;
  DaemonProcess ods;
  std::string address;
  std::unique_ptr<OdsClient> client;
  int file_fd = -1;

  Env() {
    if (std::getenv("SURGE_BUILD_DIR") == nullptr) {
      auto exe = std::filesystem::read_symlink("/proc/self/exe");
      ::setenv("SURGE_BUILD_DIR", exe.parent_path().parent_path().parent_path().c_str(), 1);
    }
    key_file = make_key(dir);
    address = start_ods(ods, dir.path() + "/data", key_file, dir.path() + "/ods.log",
                        {"--log-level", "warn", "--pool-1m-buffers", "32"});
    client = std::make_unique<OdsClient>(address, key_of(key_file));
    file_fd = ::open((dir.path() + "/plain.dat").c_str(), O_RDWR | O_CREAT, 0644);
  }
  ~Env() {
    client.reset();
    ods.stop();
    if (file_fd >= 0) ::close(file_fd);
  }
};

Env& env() {
  static Env e;
  return e;
}

void BM_OdsWrite(benchmark::State& state) {
  const auto size = static_cast<uint64_t>(state.range(0));
  auto data = pattern(size, 1);
  (void)env();  // the daemon starts here, not inside the first timed batch
  uint64_t off = 0;
  for (auto _ : state) {
    auto r = env().client->write(1, off, data);
    if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
    off = (off + size) % kSpan;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

void BM_OdsRead(benchmark::State& state) {
  const auto size = static_cast<uint64_t>(state.range(0));
  auto data = pattern(1 << 20, 2);
  for (uint64_t off = 0; off < 64 << 20; off += data.size()) (void)env().client->write(2, off, data);
  // One buffer for every read, as the socket pair's receiver has: the
  // client's allocation and zeroing are not the data server's cost.
  std::vector<std::byte> buf(size);
  uint64_t off = 0;
  for (auto _ : state) {
    auto r = env().client->read_into(2, off, buf);
    if (!r.ok() || *r != size) state.SkipWithError("short or failed read");
    off = (off + size) % (64 << 20);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

// kDepth requests in flight on one connection (a client striping a large IO
// keeps several going): hides the per-request round trip.
constexpr int kDepth = 4;

void BM_OdsWriteQD4(benchmark::State& state) {
  const auto size = static_cast<uint64_t>(state.range(0));
  auto data = pattern(size, 7);
  const uint32_t crc = surge::crc32c(data.data(), size);
  net::BulkRegion region{data.data(), size, net::BulkAccess::kServerPull};
  std::vector<net::PendingCall> calls(kDepth);
  uint64_t off = 0, i = 0;
  for (auto _ : state) {
    net::PendingCall& slot = calls[i++ % kDepth];
    if (slot.valid()) {
      pb::WriteReply a;
      if (!net::finish_call<pb::OdsWrite>(slot, &a).ok()) state.SkipWithError("write failed");
    }
    pb::WriteRequest q;
    q.set_object_id(3);
    q.set_offset(off);
    q.set_length(size);
    q.set_crc32c(crc);
    slot = net::call_async<pb::OdsWrite>(env().client->channel(), q, {&region, 1});
    off = (off + size) % kSpan;
  }
  for (auto& c : calls) {
    if (c.valid()) (void)c.wait();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

void BM_OdsReadQD4(benchmark::State& state) {
  const auto size = static_cast<uint64_t>(state.range(0));
  auto data = pattern(1 << 20, 8);
  for (uint64_t off = 0; off < 64 << 20; off += data.size()) (void)env().client->write(4, off, data);
  std::vector<std::vector<std::byte>> bufs(kDepth, std::vector<std::byte>(size));
  std::vector<net::PendingCall> calls(kDepth);
  uint64_t off = 0, i = 0;
  for (auto _ : state) {
    const size_t k = i++ % kDepth;
    if (calls[k].valid()) {
      pb::ReadReply a;
      if (!net::finish_call<pb::OdsRead>(calls[k], &a).ok() ||
          surge::crc32c(bufs[k].data(), a.length()) != a.crc32c()) {
        state.SkipWithError("read failed");
      }
    }
    pb::ReadRequest q;
    q.set_object_id(4);
    q.set_offset(off);
    q.set_length(size);
    net::BulkRegion region{bufs[k].data(), size, net::BulkAccess::kServerPush};
    calls[k] = net::call_async<pb::OdsRead>(env().client->channel(), q, {&region, 1});
    off = (off + size) % (64 << 20);
  }
  for (auto& c : calls) {
    if (c.valid()) (void)c.wait();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

// The floor of one request: a Stat round trip, no bulk data.
void BM_OdsStat(benchmark::State& state) {
  (void)env().client->write(5, 0, pattern(10, 1));
  for (auto _ : state) {
    if (!env().client->stat(5).ok()) state.SkipWithError("stat failed");
  }
}

void BM_Pwrite(benchmark::State& state) {
  const auto size = static_cast<uint64_t>(state.range(0));
  auto data = pattern(size, 3);
  uint64_t off = 0;
  for (auto _ : state) {
    if (::pwrite(env().file_fd, data.data(), size, static_cast<off_t>(off)) != static_cast<ssize_t>(size)) {
      state.SkipWithError("pwrite");
    }
    off = (off + size) % kSpan;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

void BM_Pread(benchmark::State& state) {
  const auto size = static_cast<uint64_t>(state.range(0));
  std::vector<std::byte> buf(size);
  auto data = pattern(1 << 20, 4);
  for (uint64_t off = 0; off < 64 << 20; off += data.size()) {
    (void)!::pwrite(env().file_fd, data.data(), data.size(), static_cast<off_t>(off));
  }
  uint64_t off = 0;
  for (auto _ : state) {
    if (::pread(env().file_fd, buf.data(), size, static_cast<off_t>(off)) != static_cast<ssize_t>(size)) {
      state.SkipWithError("pread");
    }
    off = (off + size) % (64 << 20);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

void BM_UringWrite(benchmark::State& state) {
  const auto size = static_cast<uint64_t>(state.range(0));
  auto data = pattern(size, 5);
  io_uring ring;
  if (io_uring_queue_init(8, &ring, 0) != 0) {
    state.SkipWithError("io_uring_queue_init");
    return;
  }
  uint64_t off = 0;
  for (auto _ : state) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_write(sqe, env().file_fd, data.data(), static_cast<unsigned>(size), off);
    io_uring_submit(&ring);
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring, &cqe) != 0 || cqe->res != static_cast<int>(size)) state.SkipWithError("uring write");
    io_uring_cqe_seen(&ring, cqe);
    off = (off + size) % kSpan;
  }
  io_uring_queue_exit(&ring);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

// Fresh objects and files are removed in batches of kFreshBatch with the
// clock stopped, so a long run does not fill the file system and the
// removal is not counted.
constexpr uint64_t kFreshBatch = 256;

void BM_OdsWriteFresh(benchmark::State& state) {
  const auto size = static_cast<uint64_t>(state.range(0));
  auto data = pattern(size, 10);
  (void)env();
  static uint64_t next_id = 1'000'000;
  uint64_t first = next_id;
  for (auto _ : state) {
    auto r = env().client->write(next_id++, 0, data);
    if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
    if (next_id - first == kFreshBatch) {
      state.PauseTiming();
      for (uint64_t id = first; id < next_id; ++id) (void)env().client->remove(id);
      first = next_id;
      state.ResumeTiming();
    }
  }
  for (uint64_t id = first; id < next_id; ++id) (void)env().client->remove(id);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

void BM_PwriteFresh(benchmark::State& state) {
  const auto size = static_cast<uint64_t>(state.range(0));
  auto data = pattern(size, 11);
  const std::string dir = env().dir.path() + "/fresh";
  std::filesystem::create_directories(dir);
  static uint64_t next = 0;
  uint64_t first = next;
  auto name = [&](uint64_t i) { return dir + "/" + std::to_string(i) + ".dat"; };
  for (auto _ : state) {
    int fd = ::open(name(next++).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 || ::pwrite(fd, data.data(), size, 0) != static_cast<ssize_t>(size)) state.SkipWithError("pwrite fresh");
    if (fd >= 0) ::close(fd);
    if (next - first == kFreshBatch) {
      state.PauseTiming();
      for (uint64_t i = first; i < next; ++i) ::unlink(name(i).c_str());
      first = next;
      state.ResumeTiming();
    }
  }
  for (uint64_t i = first; i < next; ++i) ::unlink(name(i).c_str());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

bool full_io(int fd, void* p, size_t n, bool send) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    ssize_t k = send ? ::write(fd, b, n) : ::read(fd, b, n);
    if (k <= 0) return false;
    b += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// One message of `size` bytes and an 8-byte ack per iteration over TCP
// loopback: the network ceiling of one synchronous request.
void BM_SocketPair(benchmark::State& state) {
  const auto size = static_cast<size_t>(state.range(0));
  int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof a;
  ::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::listen(ls, 1);
  ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &al);
  int c = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    state.SkipWithError("connect");
    return;
  }
  int s = ::accept(ls, nullptr, nullptr);
  int one = 1;
  ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::thread server([&] {
    std::vector<char> buf(size);
    uint64_t ack = 0;
    while (full_io(s, buf.data(), size, false)) {
      if (!full_io(s, &ack, sizeof ack, true)) break;
    }
  });
  auto data = pattern(size, 6);
  uint64_t ack = 0;
  for (auto _ : state) {
    if (!full_io(c, data.data(), size, true) || !full_io(c, &ack, sizeof ack, false)) state.SkipWithError("socket");
  }
  ::shutdown(c, SHUT_RDWR);
  server.join();
  ::close(c);
  ::close(s);
  ::close(ls);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

// The same bytes streamed one way with no per-message ack: the bandwidth
// ceiling of one TCP loopback connection.
void BM_SocketStream(benchmark::State& state) {
  const auto size = static_cast<size_t>(state.range(0));
  int sv[2];
  int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof a;
  ::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::listen(ls, 1);
  ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &al);
  sv[0] = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(sv[0], reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    state.SkipWithError("connect");
    return;
  }
  sv[1] = ::accept(ls, nullptr, nullptr);
  std::thread sink([&] {
    std::vector<char> buf(size);
    while (full_io(sv[1], buf.data(), size, false)) {
    }
  });
  auto data = pattern(size, 9);
  for (auto _ : state) {
    if (!full_io(sv[0], data.data(), size, true)) state.SkipWithError("socket");
  }
  ::shutdown(sv[0], SHUT_RDWR);
  sink.join();
  ::close(sv[0]);
  ::close(sv[1]);
  ::close(ls);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

constexpr int64_t k64K = 64 << 10, k1M = 1 << 20;
BENCHMARK(BM_OdsWrite)->Arg(k64K)->Arg(k1M)->UseRealTime();
BENCHMARK(BM_OdsRead)->Arg(k64K)->Arg(k1M)->UseRealTime();
BENCHMARK(BM_OdsWriteQD4)->Arg(k64K)->Arg(k1M)->UseRealTime();
BENCHMARK(BM_OdsReadQD4)->Arg(k64K)->Arg(k1M)->UseRealTime();
BENCHMARK(BM_OdsStat)->UseRealTime();
BENCHMARK(BM_Pwrite)->Arg(k64K)->Arg(k1M)->UseRealTime();
BENCHMARK(BM_Pread)->Arg(k64K)->Arg(k1M)->UseRealTime();
BENCHMARK(BM_UringWrite)->Arg(k64K)->Arg(k1M)->UseRealTime();
BENCHMARK(BM_SocketPair)->Arg(k64K)->Arg(k1M)->UseRealTime();
BENCHMARK(BM_SocketStream)->Arg(k64K)->Arg(k1M)->UseRealTime();
BENCHMARK(BM_OdsWriteFresh)->Arg(4 << 10)->Arg(k64K)->Arg(k1M)->UseRealTime();
BENCHMARK(BM_PwriteFresh)->Arg(4 << 10)->Arg(k64K)->Arg(k1M)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
