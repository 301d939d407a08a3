#include "net/tcp/tcp_stream.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <climits>
#include <cstring>

#include "common/log.h"
#include "net/auth.h"

namespace surge::net::tcp {

namespace {

// The stream whose read loop (pump) runs on this thread, if any: a handler
// running inside that loop resumes it without a round trip through Asio.
thread_local const TcpStream* tls_pumping = nullptr;

// Waits for `events` on fd until the deadline. TimedOut past it.
Status wait_fd(int fd, short events, std::chrono::steady_clock::time_point deadline,
               std::chrono::milliseconds stall, const std::string& peer, const char* what) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return Status::TimedOut(std::string(what) + " " + peer + ": no progress for " +
                              std::to_string(stall.count()) + " ms");
    }
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), INT_MAX)));
    if (r > 0) return Status::OK();
    if (r < 0 && errno != EINTR) return Status::FromErrno(errno, std::string("poll ") + peer);
  }
}

}  // namespace

void tune_socket(int fd, const std::string& peer) {
  int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
    SLOG_WARN("TCP_NODELAY on {}: {}", peer, std::strerror(errno));
  }
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0 && (flags & O_NONBLOCK) != 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  timeval slice{0, static_cast<suseconds_t>(kBlockingSlice.count() * 1000)};
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &slice, sizeof slice) != 0) {
    SLOG_WARN("SO_RCVTIMEO on {}: {}", peer, std::strerror(errno));
  }
  int bytes = kSocketBufferBytes;
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes) != 0) {
    SLOG_WARN("socket buffers on {}: {}", peer, std::strerror(errno));
  }
}

Status send_all(int fd, iovec* iov, int iovcnt, const std::string& peer,
                const std::function<void()>& on_block, std::chrono::milliseconds stall) {
  auto deadline = std::chrono::steady_clock::now() + stall;
  bool blocked = false;
  int i = 0;
  while (i < iovcnt) {
    if (iov[i].iov_len == 0) {
      ++i;
      continue;
    }
    msghdr msg{};
    msg.msg_iov = iov + i;
    msg.msg_iovlen = static_cast<size_t>(std::min(iovcnt - i, IOV_MAX));
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!blocked && on_block) on_block();
        blocked = true;
        SURGE_RETURN_IF_ERROR(wait_fd(fd, POLLOUT, deadline, stall, peer, "send to"));
        continue;
      }
      return Status::Disconnected("send to " + peer + ": " + std::strerror(errno));
    }
    deadline = std::chrono::steady_clock::now() + stall;
    size_t left = static_cast<size_t>(n);
    while (left > 0 && i < iovcnt) {
      if (left >= iov[i].iov_len) {
        left -= iov[i].iov_len;
        iov[i].iov_len = 0;
        ++i;
      } else {
        iov[i].iov_base = static_cast<char*>(iov[i].iov_base) + left;
        iov[i].iov_len -= left;
        left = 0;
      }
    }
  }
  return Status::OK();
}

TcpStream::TcpStream(boost::asio::io_context& io, boost::asio::ip::tcp::socket socket,
                     std::string peer, bool handshake_only)
    : io_(io),
      readiness_(ReadinessService::of(io)),
      // Out of Asio's reactor: readiness is watched only while armed (see
      // readiness.h). From here on the stream owns the descriptor.
      fd_(socket.release()),
      readiness_key_(readiness_.add(fd_)),
      peer_(std::move(peer)),
      rbuf_(handshake_only ? kHandshakeReadBufferSize : kReadBufferSize),
      handshake_only_(handshake_only),
      metrics_(TransportMetrics::of(TransportKind::kTcp,
                                    handshake_only ? Side::kServer : Side::kClient)) {}

void TcpStream::open_frames() {
  handshake_only_ = false;
  if (rbuf_.size() < kReadBufferSize) rbuf_.resize(kReadBufferSize);
}

TcpStream::~TcpStream() {
  readiness_.remove(readiness_key_);
  ::close(fd_);
}

void TcpStream::start() {
  boost::asio::post(io_, [self = shared_from_this()] { self->pump(); });
}

void TcpStream::resume() {
  if (tls_pumping == this) {
    paused_ = false;  // run_frames checks it before the next frame
    return;
  }
  boost::asio::post(io_, [self = shared_from_this()] {
    self->paused_ = false;
    self->pump();
  });
}

void TcpStream::kick_reader() {
  // Client side the read side may be idle (replies are read by waiting
  // callers). If we block writing while the peer blocks writing to us and
  // nobody reads, both sides stall: so wake the I/O thread first. A pump
  // that finds the read side busy (a driving caller) just returns.
  if (!armed_.load(std::memory_order_acquire)) {
    boost::asio::post(io_, [self = shared_from_this()] { self->pump(); });
  }
}

bool TcpStream::probe() {
  if (closed()) return false;
  pollfd p{fd_, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
    fail(Status::Disconnected("peer " + peer_ + " hung up"));
  }
  return !closed();
}

void TcpStream::fail(const Status& why) {
  if (closed_.exchange(true, std::memory_order_acq_rel)) return;
  ::shutdown(fd_, SHUT_RDWR);
  on_closed(why);
}

Status TcpStream::send_frame(const FrameHeader& h, std::span<const iovec> parts) {
  std::byte header[kFrameHeaderSize];
  encode_header(h, header);
  iovec iov[kMaxIov];
  int n = 0;
  iov[n++] = {header, kFrameHeaderSize};
  if (parts.size() + 1 > kMaxIov) {
    return Status::InvalidArgument("frame to " + peer_ + " has too many parts");
  }
  for (const iovec& p : parts) {
    if (p.iov_len > 0) iov[n++] = p;
  }
  uint64_t bytes = 0;
  for (int i = 0; i < n; ++i) bytes += iov[i].iov_len;
  std::lock_guard lk(write_mu_);
  if (closed()) return Status::Disconnected("connection to " + peer_ + " is closed");
  Status st = send_all(fd_, iov, n, peer_, [this] { kick_reader(); }, stall_timeout_);
  if (!st.ok()) {
    fail(st);
    return st;
  }
  metrics_.sent_bytes.inc(bytes);
  return st;
}

void TcpStream::compact() {
  if (rpos_ == 0) return;
  std::memmove(rbuf_.data(), rbuf_.data() + rpos_, rend_ - rpos_);
  rend_ -= rpos_;
  rpos_ = 0;
}

TcpStream::Step TcpStream::fill(size_t want) {
  if (rpos_ == rend_) {
    rpos_ = rend_ = 0;
    // Grown for one large body: give the memory back once it is consumed.
    if (rbuf_.size() > kReadBufferSize && !have_header_) {
      rbuf_.resize(kReadBufferSize);
      rbuf_.shrink_to_fit();
    }
  } else if (rend_ == rbuf_.size()) {
    compact();
  }
  if (drained_ && !blocking_reads_) {
    drained_ = false;
    return Step::kWouldBlock;
  }
  size_t room = std::min(rbuf_.size() - rend_, want);
  ssize_t n = ::recv(fd_, rbuf_.data() + rend_, room, blocking_reads_ ? 0 : MSG_DONTWAIT);
  if (n > 0) {
    metrics_.received_bytes.inc(static_cast<uint64_t>(n));
    rend_ += static_cast<size_t>(n);
    drained_ = static_cast<size_t>(n) < room;
    return Step::kMore;
  }
  if (n == 0) {
    bool mid_frame = have_header_ || rend_ > rpos_ || direct_.remaining > 0;
    fail(Status::Disconnected(mid_frame ? "peer " + peer_ + " closed mid-frame (truncated frame)"
                                        : "peer " + peer_ + " closed the connection"));
    return Step::kStop;
  }
  if (errno == EINTR) return Step::kMore;
  if (errno == EAGAIN || errno == EWOULDBLOCK) return Step::kWouldBlock;
  fail(Status::Disconnected("recv from " + peer_ + ": " + std::strerror(errno)));
  return Step::kStop;
}

void TcpStream::arm() {
  if (armed_.exchange(true)) return;  // one pending wait is enough
  // Errors and hang-ups fire it too; the pump's recv() then says what.
  readiness_.arm(readiness_key_, [self = shared_from_this()] {
    self->armed_.store(false);
    self->pump();
  });
}

void TcpStream::pump() {
  // A caller driving its own reply holds the read side; it re-arms the I/O
  // thread when it lets go.
  std::unique_lock lk(read_mu_, std::try_to_lock);
  if (!lk.owns_lock()) return;
  drained_ = false;  // woken by readiness (or a post): try the socket
  const TcpStream* outer = tls_pumping;
  tls_pumping = this;
  Step s = run_frames(nullptr);
  tls_pumping = outer;
  lk.unlock();
  // Checked after letting go of the read side: a caller that failed to take
  // it registered its call before, so we see it and keep reading for it.
  // (Arming re-evaluates readiness, so nothing that arrived is missed.)
  if (s == Step::kWouldBlock && want_io_reads()) arm();
}

bool TcpStream::drive_reads(PendingCall::State& call, bool (*keep_reading)(void*), void* arg) {
  if (closed()) return false;
  {
    std::unique_lock lk(read_mu_, std::try_to_lock);
    if (!lk.owns_lock()) return false;
    // The reply is rarely there yet: wait first rather than recv() EAGAIN.
    drained_ = true;
    for (;;) {
      // Far from the deadline: block in recv() itself (one syscall per
      // arrival). Near it: poll() with the exact time left.
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          call.deadline - std::chrono::steady_clock::now());
      blocking_reads_ = left > kBlockingSlice;
      Step s = run_frames(&call.finished);
      blocking_reads_ = false;
      if (s != Step::kWouldBlock) break;
      left = std::chrono::duration_cast<std::chrono::milliseconds>(
          call.deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      if (left > kBlockingSlice) continue;  // a blocking recv timed out
      pollfd p{fd_, POLLIN, 0};
      int r = ::poll(&p, 1, static_cast<int>(left.count() + 1));
      if (r < 0 && errno != EINTR) break;
      drained_ = false;
    }
  }
  // Replies for other callers may be buffered or on their way: hand the
  // read side back to the I/O thread while anyone still waits. A pump
  // first: bytes may already be buffered in rbuf_, which no readiness
  // event would report.
  if (!closed() && keep_reading(arg)) {
    boost::asio::post(io_, [self = shared_from_this()] { self->pump(); });
  }
  return true;
}

TcpStream::Step TcpStream::run_frames(const std::atomic<bool>* until) {
  for (;;) {
    if (closed()) return Step::kStop;
    if (until != nullptr && until->load(std::memory_order_acquire)) return Step::kDone;
    if (direct_.remaining > 0) {
      Step s = advance_direct();
      if (s != Step::kMore) return s;
      continue;
    }
    if (paused_) return Step::kStop;
    size_t avail = rend_ - rpos_;
    if (!have_header_) {
      if (avail < kFrameHeaderSize) {
        Step s = fill(kFrameReadChunk);
        if (s != Step::kMore) return s;
        continue;
      }
      Result<FrameHeader> h = decode_header({rbuf_.data() + rpos_, kFrameHeaderSize});
      if (!h.ok()) {
        fail(h.status().WithContext("frame from " + peer_));
        return Step::kStop;
      }
      cur_ = *h;
      if (handshake_only_ && (cur_.body_length > kMaxHandshakeBody || cur_.descriptor_count > 0 ||
                              cur_.payload_length > 0)) {
        fail(Status::ProtocolError(
            std::string(frame_type_name(cur_.type)) + " frame from " + peer_ + " declares " +
            std::to_string(cur_.body_length) + " body bytes, " +
            std::to_string(cur_.descriptor_count) + " descriptors and " +
            std::to_string(cur_.payload_length) +
            " payload bytes before the peer has authenticated (at most " +
            std::to_string(kMaxHandshakeBody) + " body bytes, nothing else)"));
        return Step::kStop;
      }
      have_header_ = true;
      size_t need = kFrameHeaderSize + cur_.trailer_length();
      if (rbuf_.size() - rpos_ < need) {
        compact();
        if (rbuf_.size() < need) rbuf_.resize(need);
      }
      continue;
    }
    size_t need = kFrameHeaderSize + cur_.trailer_length();
    if (avail < need) {
      Step s = fill(need - avail + kFrameReadChunk);
      if (s != Step::kMore) return s;
      continue;
    }
    std::span<const std::byte> trailer(rbuf_.data() + rpos_ + kFrameHeaderSize,
                                       cur_.trailer_length());
    rpos_ += need;
    have_header_ = false;
    on_frame(cur_, trailer);
  }
}

bool TcpStream::payload_here(uint64_t payload, std::chrono::microseconds budget, bool more_ok) {
  const uint64_t buffered = rend_ - rpos_;
  if (buffered > payload) return more_ok;
  const auto deadline = std::chrono::steady_clock::now() + budget;
  bool lowat_set = false;
  bool here = false;
  for (;;) {
    int queued = 0;
    if (::ioctl(fd_, FIONREAD, &queued) != 0) break;  // unknown: not eligible
    const uint64_t have = buffered + static_cast<uint64_t>(queued);
    if (have >= payload) {
      here = more_ok || have == payload;
      break;
    }
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) break;
    // Wake once when the rest is here, not once per arriving segment (the
    // kernel caps the mark at half the receive buffer; then we loop).
    int mark = static_cast<int>(std::min<uint64_t>(payload - have, INT_MAX));
    if (::setsockopt(fd_, SOL_SOCKET, SO_RCVLOWAT, &mark, sizeof mark) != 0) break;
    lowat_set = true;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    int r = ::ppoll(&p, 1, &ts, nullptr);
    if (r < 0 && errno != EINTR) break;
    if (r > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) break;  // the loop will see it
  }
  if (lowat_set) {
    int one = 1;  // back to the default: readiness on any byte
    if (::setsockopt(fd_, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one) != 0) {
      fail(Status::FromErrno(errno, "SO_RCVLOWAT on " + peer_));
      return false;
    }
  }
  return here;
}

Status TcpStream::read_payload(std::byte* dst, uint64_t len) {
  auto deadline = std::chrono::steady_clock::now() + stall_timeout_;
  while (len > 0) {
    if (closed()) return Status::Disconnected("connection to " + peer_ + " is closed");
    size_t avail = rend_ - rpos_;
    if (avail > 0) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(avail, len));
      if (dst != nullptr) {
        std::memcpy(dst, rbuf_.data() + rpos_, n);
        dst += n;
      }
      rpos_ += n;
      len -= n;
      continue;
    }
    rpos_ = rend_ = 0;
    // In place when there is a destination; discarded bytes go through the
    // read buffer (and whatever follows them stays there for the loop).
    std::byte* into = dst != nullptr ? dst : rbuf_.data();
    size_t want = dst != nullptr ? static_cast<size_t>(std::min<uint64_t>(len, 1u << 30))
                                 : rbuf_.size();
    // Blocking (bounded by SO_RCVTIMEO): this thread only waits for these
    // bytes, so one recv() per arrival beats poll() + recv().
    ssize_t n = ::recv(fd_, into, want, 0);
    if (n > 0) {
      metrics_.received_bytes.inc(static_cast<uint64_t>(n));
      deadline = std::chrono::steady_clock::now() + stall_timeout_;
      if (dst != nullptr) {
        dst += n;
        len -= static_cast<uint64_t>(n);
      } else {
        rend_ = static_cast<size_t>(n);
      }
      continue;
    }
    Status st;
    if (n == 0) {
      st = Status::Disconnected("peer " + peer_ + " closed mid-payload");
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (std::chrono::steady_clock::now() < deadline) continue;  // one slice passed
      st = Status::TimedOut("bulk payload from " + peer_ + ": no progress for " +
                            std::to_string(stall_timeout_.count()) + " ms");
    } else {
      st = Status::Disconnected("recv from " + peer_ + ": " + std::strerror(errno));
    }
    fail(st);
    return st;
  }
  return Status::OK();
}

void TcpStream::begin_direct(std::shared_ptr<PendingCall::State> call, std::byte* dst,
                             uint64_t len) {
  direct_.call = std::move(call);
  direct_.dst = dst;
  direct_.remaining = len;
}

void TcpStream::deliver(const std::byte* src, size_t n) {
  if (!direct_.call) return;
  std::lock_guard lk(direct_.call->mu);
  if (direct_.call->abandoned) {
    direct_.call.reset();
    return;
  }
  std::memcpy(direct_.dst, src, n);
  direct_.dst += n;
}

TcpStream::Step TcpStream::advance_direct() {
  while (direct_.remaining > 0) {
    size_t avail = rend_ - rpos_;
    if (avail > 0) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(avail, direct_.remaining));
      deliver(rbuf_.data() + rpos_, n);
      rpos_ += n;
      direct_.remaining -= n;
      continue;
    }
    if (!direct_.call) {
      Step s = fill(rbuf_.size());
      if (s != Step::kMore) return s;
      continue;
    }
    rpos_ = rend_ = 0;
    ssize_t n;
    {
      // Under the call's lock: a waiter that times out either sees this
      // write finished or marks the call abandoned before it starts.
      std::lock_guard lk(direct_.call->mu);
      if (direct_.call->abandoned) {
        n = -2;
      } else {
        n = ::recv(fd_, direct_.dst,
                   static_cast<size_t>(std::min<uint64_t>(direct_.remaining, 16u << 20)),
                   blocking_reads_ ? 0 : MSG_DONTWAIT);
      }
    }
    if (n == -2) {
      direct_.call.reset();
      continue;
    }
    if (n > 0) {
      metrics_.received_bytes.inc(static_cast<uint64_t>(n));
      direct_.dst += n;
      direct_.remaining -= static_cast<uint64_t>(n);
      continue;
    }
    if (n == 0) {
      fail(Status::Disconnected("peer " + peer_ + " closed mid bulk-data frame"));
      return Step::kStop;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Step::kWouldBlock;
    fail(Status::Disconnected("recv from " + peer_ + ": " + std::strerror(errno)));
    return Step::kStop;
  }
  direct_.call.reset();
  return Step::kMore;
}

}  // namespace surge::net::tcp
