// TcpStream: one TCP connection's framing engine, shared by the client and
// server sides of the TCP transport.
//
// Reading happens on the connection's I/O thread (or, client side, on a
// caller waiting for its reply, see drive_reads): the I/O thread learns of
// readiness from its ReadinessService, one-shot, only while it has armed
// it (readiness.h: no wake-ups while another thread owns the read side);
// the bytes are moved with plain recv() into a read buffer, and complete
// frames go to on_frame(). Bulk bytes bypass the read
// buffer: after a frame header only what one small read happened to bring
// along (at most kFrameReadChunk) is copied; the rest is received straight
// into its destination (a client region for bulk-data frames, the handler's
// buffer for pulls).
//
// Writing happens on whichever thread has something to send (the caller's
// thread for requests, the handler's thread for replies and pushes), one
// frame at a time under a per-connection write lock, as a single gather
// sendmsg() of header + body + descriptors + payload: no copy of the
// payload, no hop to another thread.
//
// Pausing (server side): a request whose pulled bytes follow it on the
// stream pauses the read loop; the handler's thread then owns the read side
// and reads the payload synchronously (read_payload) until finish() resumes
// the loop on the I/O thread. The hand-off goes through a mutex (the worker
// queue) one way and asio::post the other, so the read buffer is never used
// by two threads at once. A handler run in place on the I/O thread (see
// tcp_server.cpp) owns the read side already; its finish() just lets the
// running loop go on.
//
// Closing: fail() is idempotent and callable from any thread; it shuts the
// socket down (waking every blocked poll and the armed readiness wait) and
// calls on_closed() once. The descriptor is closed only by the destructor,
// when no thread can still be using it.
#pragma once

#include <sys/uio.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "net/frame.h"
#include "net/tcp/readiness.h"
#include "net/transport.h"
#include "net/transport_metrics.h"

namespace surge::net::tcp {

// A blocked send or payload read that makes no progress for this long
// fails the connection with TimedOut (the default; a server sets its own,
// ServerOptions::bulk_stall_timeout).
inline constexpr std::chrono::milliseconds kIoStallTimeout{30000};
// Largest read at a frame boundary: bounds how much bulk payload can be
// copied out of the read buffer instead of received in place.
inline constexpr size_t kFrameReadChunk = 16 * 1024;
inline constexpr size_t kReadBufferSize = 64 * 1024;
// The read buffer of a connection that has not authenticated yet: one
// handshake frame (or GoAway) fits, nothing a header declares is allocated.
inline constexpr size_t kHandshakeReadBufferSize = 8 * 1024;
// SO_SNDBUF / SO_RCVBUF (the kernel doubles it).
inline constexpr int kSocketBufferBytes = 4 << 20;
// Sockets stay in blocking mode: the I/O thread always passes MSG_DONTWAIT,
// while a thread that has nothing else to do (a caller waiting for its
// reply, a handler pulling) makes one blocking recv() per arrival, as a
// plain socket reader would, instead of poll() + recv(). SO_RCVTIMEO bounds
// each blocking recv so deadlines are re-checked at least this often.
inline constexpr std::chrono::milliseconds kBlockingSlice{200};
// header + body + descriptors + up to kMaxDescriptors payload regions.
inline constexpr size_t kMaxIov = 4 + kMaxDescriptors;

// TCP_NODELAY, large buffers, blocking mode with SO_RCVTIMEO =
// kBlockingSlice. Failures are logged, not fatal.
void tune_socket(int fd, const std::string& peer);

// Blocking gather write on a socket; calls on_block (if given) once,
// before its first wait for buffer space. TimedOut after `stall` without
// progress.
Status send_all(int fd, iovec* iov, int iovcnt, const std::string& peer,
                const std::function<void()>& on_block = {},
                std::chrono::milliseconds stall = kIoStallTimeout);

class TcpStream : public std::enable_shared_from_this<TcpStream> {
 public:
  // handshake_only: until open_frames(), every frame must be
  // handshake-sized (a body of at most kMaxHandshakeBody, no descriptors,
  // no payload; anything larger fails the connection before a byte of it
  // is buffered) and the read buffer stays kHandshakeReadBufferSize.
  TcpStream(boost::asio::io_context& io, boost::asio::ip::tcp::socket socket, std::string peer,
            bool handshake_only = false);
  virtual ~TcpStream();
  TcpStream(const TcpStream&) = delete;
  TcpStream& operator=(const TcpStream&) = delete;

  // Starts the read loop on the I/O thread.
  void start();
  // One frame: header, then `parts` (body, descriptors, payload) in order.
  // Thread-safe. An error fails the connection.
  Status send_frame(const FrameHeader& h, std::span<const iovec> parts);
  void fail(const Status& why);
  bool closed() const { return closed_.load(std::memory_order_acquire); }
  // Cheap liveness check for an idle connection nobody is reading: fails
  // the stream when the peer has hung up. Returns !closed().
  bool probe();
  const std::string& peer() const { return peer_; }

 protected:
  // On the I/O thread, for each complete frame; `trailer` (body then
  // descriptors) is valid only during the call.
  virtual void on_frame(const FrameHeader& h, std::span<const std::byte> trailer) = 0;
  // Exactly once, on the thread that failed the connection.
  virtual void on_closed(const Status& why) = 0;
  // Whether the I/O thread should keep waiting for bytes. The server always
  // does; a client only while calls are outstanding, since waiting callers
  // read their own replies (an idle armed I/O thread would wake for every
  // reply and race them for it).
  virtual bool want_io_reads() { return true; }

  boost::asio::io_context& io() { return io_; }

  // How long a send or a payload read may go without progress before the
  // connection fails (kIoStallTimeout unless set). Before start().
  void set_stall_timeout(std::chrono::milliseconds t) { stall_timeout_ = t; }

  // From on_frame, once the peer has authenticated: full-size frames from
  // here on, and the full read buffer.
  void open_frames();

  // Server side. pause() from on_frame stops the read loop after the
  // current frame; resume() (any thread) restarts it on the I/O thread.
  // Called from inside on_frame on the I/O thread (a handler that ran in
  // place), resume() just lets the running loop go on.
  void pause() { paused_ = true; }
  void resume();
  // From on_frame (server): waits up to `budget` for the rest of the
  // current frame's `payload` to arrive (one wake-up, via SO_RCVLOWAT) and
  // says whether the payload is here: all of it, and (unless more_ok) no
  // byte of a further frame behind it. False when the budget passes first.
  bool payload_here(uint64_t payload, std::chrono::microseconds budget, bool more_ok);
  // While paused, from the thread that owns the read side: the next `len`
  // payload bytes into dst (nullptr discards them).
  Status read_payload(std::byte* dst, uint64_t len);

  // Client side, from on_frame: the next `len` bytes go to `dst`, written
  // under call->mu unless the call was abandoned (then discarded). A null
  // call discards.
  void begin_direct(std::shared_ptr<PendingCall::State> call, std::byte* dst, uint64_t len);

  // Client side (CallDriver): runs the read loop on the calling thread,
  // blocking in poll(), until `call` finishes or its deadline passes. False
  // when another thread holds the read side or the stream is closed.
  // `keep_reading` says whether the I/O thread must take over afterwards.
  bool drive_reads(PendingCall::State& call, bool (*keep_reading)(void*), void* arg);
  // Makes sure someone reads this socket soon (posts a pump unless the I/O
  // thread is already waiting): e.g. a writer about to block may be waiting
  // on a peer that is itself blocked writing to us.
  void kick_reader();

 private:
  enum class Step { kMore, kWouldBlock, kStop, kDone };
  void pump();
  Step run_frames(const std::atomic<bool>* until);
  Step fill(size_t want);
  void arm();
  Step advance_direct();
  void deliver(const std::byte* src, size_t n);
  void compact();

  boost::asio::io_context& io_;
  ReadinessService& readiness_;
  const int fd_;
  const uint64_t readiness_key_;
  const std::string peer_;
  std::chrono::milliseconds stall_timeout_ = kIoStallTimeout;
  std::atomic<bool> closed_{false};
  std::atomic<bool> armed_{false};  // readiness_ is watching for us
  std::mutex write_mu_;

  // Read side: owned by whoever holds read_mu_ (the I/O thread, or a client
  // caller driving its own reply), or by the paused handler (server).
  std::mutex read_mu_;
  std::vector<std::byte> rbuf_;
  size_t rpos_ = 0;
  size_t rend_ = 0;
  bool have_header_ = false;
  bool handshake_only_;  // see the constructor
  // Bytes in and out (side: server streams start handshake-only).
  TransportMetrics& metrics_;
  // The last recv() came back short: the socket is (very likely) empty, so
  // wait for readiness instead of paying for a recv() that says EAGAIN.
  // Safe: arming re-evaluates readiness (EPOLL_CTL_MOD).
  bool drained_ = false;
  // Reads may block (a driving caller with time to spare): recv() without
  // MSG_DONTWAIT. Never set on the I/O thread.
  bool blocking_reads_ = false;
  FrameHeader cur_;
  bool paused_ = false;
  struct Direct {
    std::shared_ptr<PendingCall::State> call;
    std::byte* dst = nullptr;
    uint64_t remaining = 0;
  } direct_;
};

}  // namespace surge::net::tcp
