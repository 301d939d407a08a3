// Fuzzes a real RpcServer over loopback TCP, as a hostile client would
// reach it: the stream decoder state machine (net/tcp/tcp_stream.cpp:
// partial headers, bodies, descriptors, payloads), the server side of the
// cluster-key handshake (hello, proof), and request frames with their bulk
// descriptors and pulled payloads (net/tcp/tcp_server.cpp) into handlers
// that pull, push, answer and fail.
//
// Input: byte 0 picks the mode; bit 0 set: the harness authenticates first
// (a correct hello and proof), so the rest of the input is what an
// authenticated peer sends; clear: the rest is the first thing the server
// hears. The harness then half-closes and reads until the server closes:
// the server must close every connection whose peer has gone (an EOF in
// any state), within kCloseDeadline. Anything else is a finding (a hang is
// reported and aborts).
//
// libFuzzer's -timeout watchdog is a periodic SIGALRM (every timeout/2 + 1
// s, without SA_RESTART), delivered to this, the main, thread: the
// harness's connect, poll, send and recv can fail with EINTR at any
// moment. That is not the server's doing, so every call here goes on after
// EINTR (poll with the time left) rather than report it as a finding.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include "net/auth.h"
#include "net/frame.h"
#include "net/rpc_server.h"
#include "tests/fuzz/fuzz_support.h"

using namespace surge;
using namespace surge::net;

namespace {

constexpr char kKey[] = "surge-fuzz-cluster-key-0123456789abcdef";
constexpr uint16_t kService = 1;  // the test service id (net/proto/services.h)
constexpr auto kCloseDeadline = std::chrono::seconds(10);
constexpr size_t kMaxPushed = 1 << 20;  // per region, so a 1 GiB region is not 1 GiB of work

std::unique_ptr<RpcServer> server;
uint16_t port = 0;

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "tcp_server_fuzzer: %s\n", why.c_str());
  std::abort();
}

// Pulls every pull region whole (forward, in pieces) and pushes up to
// kMaxPushed into every push region, as the data server does.
Status bulk_handler(RpcContext& ctx, std::string_view, std::string& resp) {
  BulkHandle& b = ctx.bulk();
  std::vector<std::byte> buf(64 * 1024, std::byte{0x5a});
  for (size_t r = 0; r < b.count(); ++r) {
    if (b.access(r) == BulkAccess::kServerPull) {
      for (uint64_t off = 0; off < b.length(r);) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), b.length(r) - off));
        SURGE_RETURN_IF_ERROR(b.pull(r, off, {buf.data(), n}));
        off += n;
      }
    } else {
      const uint64_t len = std::min<uint64_t>(b.length(r), kMaxPushed);
      for (uint64_t off = 0; off < len;) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), len - off));
        SURGE_RETURN_IF_ERROR(b.push(r, off, {buf.data(), n}));
        off += n;
      }
    }
  }
  // A pull out of order, and one past the end: errors, never a crash.
  if (b.count() > 0) {
    (void)b.pull(0, 0, {buf.data(), 1});
    (void)b.push(b.count(), 0, {buf.data(), 1});
  }
  resp = "done";
  return Status::OK();
}

void start_server() {
  ServerOptions o;
  o.listen = "tcp://127.0.0.1:0";
  o.cluster_key = kKey;
  o.io_threads = 1;
  o.worker_threads = 2;
  o.credits_per_connection = 4;
  o.handshake_timeout = std::chrono::milliseconds(2000);
  o.pool.name = "fuzz-tcp";
  o.pool.classes = {{4096, 16}, {64 * 1024, 8}};
  o.pool.huge_pages = false;
  o.pool.lock_memory = false;
  auto s = RpcServer::Create(o);
  if (!s.ok()) die("server: " + s.status().ToString());
  server = std::move(*s);
  server->add_raw(
      kService, 1,
      [](RpcContext&, std::string_view req, std::string& resp) {
        resp.assign(req);
        return Status::OK();
      },
      HandlerMode::kInline);
  server->add_raw(kService, 2, bulk_handler, HandlerMode::kShortBlocking);
  server->add_raw(kService, 3, bulk_handler, HandlerMode::kWorker);
  server->add_raw(kService, 4, [](RpcContext& ctx, std::string_view, std::string&) {
    return Status::NotFound("no such thing for " + ctx.peer());
  });
  if (Status st = server->start(); !st.ok()) die("start: " + st.ToString());
  port = server->port();
  // Stop the I/O threads before static destructors run (spdlog's registry
  // among them, which a closing connection still logs to).
  std::atexit([] { server->stop(); });
}

// Waits for `events` on fd until the deadline, through EINTR. False when
// the deadline passes first.
bool wait_for(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd pf{fd, events, 0};
    const int r = ::poll(&pf, 1, static_cast<int>(left.count()));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) die(std::string("poll: ") + std::strerror(errno));
  }
}

int connect_server() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (errno != EINTR) die(std::string("connect: ") + std::strerror(errno));
    // Interrupted, the connection goes on being set up: wait for it.
    const auto deadline = std::chrono::steady_clock::now() + kCloseDeadline;
    if (!wait_for(fd, POLLOUT, deadline)) die("connect: not connected within 10 s");
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) die(std::string("connect: ") + std::strerror(err));
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool send_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t k = ::send(fd, c, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;  // the server may close first: fine
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool recv_exact(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (n > 0) {
    if (!wait_for(fd, POLLIN, deadline)) die("no handshake answer within 10 s");
    ssize_t k = ::recv(fd, c, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

std::string frame(FrameType type, std::string_view body) {
  FrameHeader h;
  h.type = type;
  h.body_length = static_cast<uint32_t>(body.size());
  std::string out(kFrameHeaderSize, '\0');
  encode_header(h, reinterpret_cast<std::byte*>(out.data()));
  out.append(body);
  return out;
}

// The client half of the handshake. False if the server went away.
bool authenticate(int fd) {
  Nonce nc = make_nonce();
  std::string hello = frame(FrameType::kHello, {reinterpret_cast<const char*>(nc.data()), nc.size()});
  if (!send_all(fd, hello.data(), hello.size())) return false;
  std::byte hdr[kFrameHeaderSize];
  std::byte body[kChallengeBodySize];
  if (!recv_exact(fd, hdr, sizeof hdr) || !recv_exact(fd, body, sizeof body)) return false;
  auto h = decode_header({hdr, sizeof hdr});
  if (!h.ok() || h->type != FrameType::kChallenge) die("the server sent no challenge");
  Nonce ns;
  std::memcpy(ns.data(), body, kNonceSize);
  Proof p = client_proof(kKey, ns, nc);
  std::string proof = frame(FrameType::kProof, {reinterpret_cast<const char*>(p.data()), p.size()});
  if (!send_all(fd, proof.data(), proof.size())) return false;
  std::byte welcome[kProofSize];
  if (!recv_exact(fd, hdr, sizeof hdr) || !recv_exact(fd, welcome, sizeof welcome)) return false;
  h = decode_header({hdr, sizeof hdr});
  if (!h.ok() || h->type != FrameType::kWelcome) die("the server sent no welcome");
  return true;
}

// Reads (and drops) until the server closes; a hang is a finding.
void drain_until_closed(int fd) {
  const auto deadline = std::chrono::steady_clock::now() + kCloseDeadline;
  std::vector<char> buf(64 * 1024);
  for (;;) {
    if (!wait_for(fd, POLLIN, deadline)) {
      die("the server kept a connection open after its peer half-closed");
    }
    ssize_t k = ::recv(fd, buf.data(), buf.size(), 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return;  // closed (or reset): done
  }
}

// Seeds: frames an authenticated client sends, and handshake mistakes.
std::string request(uint16_t method, std::string_view body, const std::vector<BulkDescriptor>& ds,
                    std::string_view payload, uint64_t id) {
  FrameHeader h;
  h.type = FrameType::kRequest;
  h.service = kService;
  h.method = method;
  h.request_id = id;
  h.body_length = static_cast<uint32_t>(body.size());
  h.descriptor_count = static_cast<uint16_t>(ds.size());
  h.payload_length = payload.size();
  std::string out(kFrameHeaderSize, '\0');
  encode_header(h, reinterpret_cast<std::byte*>(out.data()));
  out.append(body);
  for (const auto& d : ds) {
    std::byte b[kBulkDescriptorSize];
    encode_descriptor(d, b);
    out.append(reinterpret_cast<const char*>(b), sizeof b);
  }
  out.append(payload);
  return out;
}

void write_seeds(const std::string& dir) {
  const std::string authed(1, '\x01'), raw(1, '\x00');
  BulkDescriptor pull{0, 300, 0, BulkAccess::kServerPull};
  BulkDescriptor push{0, 5000, 0, BulkAccess::kServerPush};
  fuzz::write_seed(dir, "echo", authed + request(1, "ping", {}, "", 1));
  fuzz::write_seed(dir, "pull_in_place", authed + request(2, "", {pull}, std::string(300, 'p'), 2));
  fuzz::write_seed(dir, "pull_push_worker",
                   authed + request(3, "x", {pull, push}, std::string(300, 'q'), 3) +
                       request(4, "", {}, "", 4));
  fuzz::write_seed(dir, "short_payload", authed + request(2, "", {pull}, std::string(100, 'r'), 5));
  fuzz::write_seed(dir, "unknown_method", authed + request(99, "?", {}, "", 6));
  std::string nonce(kNonceSize, 'n');
  fuzz::write_seed(dir, "hello_only", raw + frame(FrameType::kHello, nonce));
  fuzz::write_seed(dir, "hello_bad_proof",
                   raw + frame(FrameType::kHello, nonce) + frame(FrameType::kProof, std::string(kProofSize, 'x')));
  fuzz::write_seed(dir, "request_before_auth", raw + request(1, "ping", {}, "", 1));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::maybe_write_seeds(write_seeds);
  fuzz::quiet_logs();
  start_server();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool authed = (data[0] & 1) != 0;
  int fd = connect_server();
  if (!authed || authenticate(fd)) {
    if (send_all(fd, data + 1, size - 1)) ::shutdown(fd, SHUT_WR);
  }
  drain_until_closed(fd);
  ::close(fd);
  return 0;
}
