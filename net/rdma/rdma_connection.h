// RdmaConnection: one reliable-connected queue pair made with rdma_cm,
// carrying messages (SEND/RECV with credits) and one-sided bulk operations
// (RDMA READ/WRITE), client or server side.
//
// Messages. Each side pre-posts `data_recvs` + kCtrlRecvs receive buffers
// (from a registered pool the connection owns) and tells the peer in the
// rdma_cm private data. A sender spends one data credit per SEND and gets
// credits back in the header of every message the peer sends, or in a
// credit-only control message when the peer owes many and has nothing to
// say; control messages have their own small credit pool, so returning
// credits never waits behind data. A receiver is therefore never overrun
// (no RNR), and a receiver slow to give buffers back only slows the sender:
// its messages wait in the send queue, none is dropped. Messages longer
// than one buffer travel as several fragments.
//
// Handshake (the TCP transport's, net/auth.h): Hello (client nonce) in the
// connect private data, Challenge (server nonce) in the accept private
// data, then Proof and Welcome as the first two messages. Nothing else is
// delivered before the Welcome.
//
// Memory windows (opt-in). Where enabled, a client binds one
// per bulk region of a request (bind_window) and invalidates it when the
// reply came (release_window), so a server can reach only the buffers of
// requests in flight, never a whole slab. Binds and invalidates travel on
// the send queue in order with the messages.
//
// Bulk. read()/write() split a transfer into work requests within the
// device's max message size and keep at most max_rd_atomic READs in flight
// on the QP; they block the calling thread (a handler's worker) until every
// piece completed and return the first error. write_staged() queues a
// WRITE from a pool buffer the connection keeps and returns at once.
//
// Completions. Not every send-queue work request is signaled (messages
// now and then, staged WRITEs and binds never): the RC send queue
// completes in order, so one completion retires every unsignaled request
// before it. Fewer completions, fewer loop wake-ups per RPC.
//
// Errors and teardown. Every error completion and every rdma_cm failure
// event closes the connection with a Status: the operations whose work
// requests failed get it, queued operations get it, on_closed gets it once.
// The QP is moved to the error state so every posted work request flushes;
// once all have completed the QP, CQ, completion channel and id are
// destroyed on the loop thread. Nothing is destroyed with work in flight.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "net/auth.h"
#include "net/buffer_pool.h"
#include "net/rdma/rdma_device.h"
#include "net/rdma/rdma_event_loop.h"
#include "net/transport.h"
#include "net/transport_metrics.h"

namespace surge::net::rdma {

struct ConnectionLimits {
  uint32_t data_recvs = 32;         // receive buffers for messages = the peer's credits
  uint32_t buffer_size = 8192;      // bytes per message buffer, header included
  uint32_t send_queue_depth = 256;  // work requests posted at once
  uint32_t max_rd_atomic = 16;      // upper bound; the device and peer may lower it
  uint64_t max_chunk = 1u << 20;    // largest single READ/WRITE work request
};

class RdmaConnection;

// One received message. Holds its receive buffers (and so the sender's
// credits) until destroyed: keep it to apply back-pressure.
class RdmaMessage {
 public:
  RdmaMessage() = default;
  RdmaMessage(RdmaMessage&& o) noexcept { *this = std::move(o); }
  RdmaMessage& operator=(RdmaMessage&&) noexcept;
  RdmaMessage(const RdmaMessage&) = delete;
  RdmaMessage& operator=(const RdmaMessage&) = delete;
  ~RdmaMessage() { release(); }

  std::span<const std::byte> bytes() const { return view_; }
  void release();  // gives the buffers back now

 private:
  friend class RdmaConnection;
  std::shared_ptr<RdmaConnection> conn_;
  std::vector<uint32_t> slots_;
  std::string assembled_;  // multi-fragment messages are copied here
  std::span<const std::byte> view_;
};

struct ConnectionCallbacks {
  // Loop thread, in arrival order, only once the handshake is done.
  std::function<void(RdmaMessage)> on_message;
  // Loop thread, exactly once, when the connection fails or is closed.
  std::function<void(const Status&)> on_closed;
  // Server side, loop thread: the handshake succeeded.
  std::function<void()> on_ready;
};

class RdmaConnection final : public CmEventTarget,
                             public std::enable_shared_from_this<RdmaConnection> {
 public:
  // Client: resolves, connects, authenticates; blocks up to `timeout`.
  // `user_pool` (may be null) is registered with the device for bulk.
  static Result<std::shared_ptr<RdmaConnection>> Connect(
      RdmaEventLoop* loop, const Endpoint& ep, std::string cluster_key, ConnectionLimits limits,
      BufferPool* user_pool, ConnectionCallbacks cbs, std::chrono::milliseconds timeout);

  // Server: takes a CONNECT_REQUEST event (loop thread). On success the
  // connection has accepted and runs its handshake; on_ready follows.
  static Result<std::shared_ptr<RdmaConnection>> Accept(
      RdmaEventLoop* loop, const CmEvent& ev, std::string cluster_key, ConnectionLimits limits,
      uint32_t rpc_credits, BufferPool* user_pool, ConnectionCallbacks cbs,
      std::chrono::milliseconds handshake_timeout);

  ~RdmaConnection() override;

  // Queues one message (any thread). Disconnected once closed.
  Status send_message(std::string msg);

  // One-sided, blocking. `local` must lie in memory registered with this
  // connection's device. On a worker the caller sleeps until the loop
  // thread reaps the completions; on the loop thread itself (a handler run
  // in place) it reaps this connection's CQ while it waits (see
  // wait_on_loop).
  Status read(std::span<std::byte> local, uint64_t remote_addr, uint32_t rkey);
  Status write(std::span<const std::byte> local, uint64_t remote_addr, uint32_t rkey);
  // Non-blocking RDMA WRITE of the first `len` bytes of `staged` (a buffer
  // of a pool registered with this device, which the connection keeps
  // until the WRITE is done). Returns once queued: a message sent after it
  // (the reply) reaches the peer only after the data (RC ordering), and if
  // the WRITE fails the QP dies, so that message never arrives. Saves the
  // caller waiting for the WRITE's acknowledgement.
  Status write_staged(PoolBuffer staged, uint64_t len, uint64_t remote_addr, uint32_t rkey);
  // Whether write_staged would take [p, p + len): registered memory, one
  // work request.
  bool can_write_staged(const void* p, uint64_t len) const;

  // Client side of per-request exposure: a type 2 memory window over
  // [addr, addr+len) of registered memory that lets the peer READ it
  // (remote_write false) or WRITE it, and nothing else. The bind is queued
  // on the send queue, so a message sent after this call finds it bound.
  // NotSupported when the device has no type 2 windows or
  // SURGE_RDMA_MEMORY_WINDOWS=0 turned them off (see README.md); then the
  // caller uses the slab's key.
  struct Window {
    ibv_mw* mw = nullptr;
    uint32_t rkey = 0;
  };
  Result<Window> bind_window(void* addr, uint64_t len, bool remote_write);
  // Invalidates the window (local invalidate on the send queue); the rkey
  // is dead for the peer once that completes, and the window is reused.
  void release_window(const Window& w);
  bool windows_enabled() const { return windows_enabled_; }

  // Closes with `why` (any thread; idempotent). Synchronous: no callback
  // runs after it returns.
  void close(const Status& why);

  // Client side, a caller's thread: reaps this connection's completions
  // (replies delivered through on_message right here) until done() holds
  // and every completion it polled is delivered, `deadline` passes or the
  // connection closes, sleeping on the completion
  // channel, which the loop stops watching meanwhile. Saves the hand-off
  // from the loop thread to the caller. Returns false at once when another
  // thread reaps, the connection is not open or the loop polls.
  bool drive(const std::function<bool()>& done, std::chrono::steady_clock::time_point deadline);

  // Loop thread, from on_message: whether more received messages of this
  // connection wait to be delivered behind the current one (then a handler
  // should not run in place and hold them up).
  bool messages_waiting() const;

  bool ready() const;
  // True once every verbs resource is gone (tests, orderly shutdown).
  bool destroyed() const;
  const std::string& peer() const { return peer_; }
  const std::shared_ptr<RdmaDevice>& device() const { return device_; }
  // The RPC credits the server advertised (client side).
  uint32_t rpc_credits() const { return rpc_credits_; }
  // Current counters (tests, and the page: RdmaConnectionProbes).
  struct Counters {
    uint32_t send_credits;
    uint32_t queued;
    uint32_t recvs_posted;
  };
  Counters counters() const;

  void on_cm_event(const CmEvent& ev) override;

 private:
  enum class Role { kClient, kServer };
  enum class State { kConnecting, kHandshake, kReady, kClosing, kClosed };
  struct Wr;
  struct OpWaiter;

  RdmaConnection(RdmaEventLoop* loop, Role role, std::string key, ConnectionLimits limits,
                 BufferPool* user_pool, ConnectionCallbacks cbs);

  Status setup_verbs();  // device, CQ, QP, buffers, posted receives
  std::string hello_private_data() const;
  Status apply_peer_private_data(std::string_view pd);
  void on_cq_readable();
  void on_poll();
  // The reaper (under reap_mu_): takes every pending completion-channel
  // event and re-arms the CQ; sleep_on_channel first waits up to
  // timeout_ms for one.
  void consume_events_and_rearm();
  void sleep_on_channel(int timeout_ms);
  void poll_cq();
  void handle_recv(const ibv_wc& wc);
  void handle_send(const ibv_wc& wc);
  void handle_handshake(std::span<const std::byte> frame);
  Status post_recv_locked(uint32_t slot);
  void repost(const std::vector<uint32_t>& slots, bool data);
  void pump_locked();
  Status bulk_op(bool is_read, std::byte* local, uint64_t len, uint64_t remote, uint32_t rkey);
  // Loop thread: waits for `waiter` by reaping this CQ itself, sleeping on
  // the completion channel when it is empty. Send completions are handled
  // at once; receives go to reaped_ for poll_cq, so no handler ever runs
  // inside another.
  Status wait_on_loop(OpWaiter& waiter);
  void dispatch(const ibv_wc& wc);
  // Loop thread.
  void shutdown(const Status& why);
  // shutdown() for a fault of the peer or the device: logged as a warning
  // naming the peer (hostile or broken input must leave a trace).
  void fail(const Status& why);
  void maybe_destroy_locked();
  void finish_connect(const Status& st);
  std::string control_frame(int type, const Status& st, std::span<const std::byte> body) const;

  friend class RdmaMessage;

  RdmaEventLoop* loop_;
  Role role_;
  std::string key_;
  ConnectionLimits limits_;
  BufferPool* user_pool_;
  ConnectionCallbacks cbs_;
  // Completions and bytes on the process's metrics page (resolved here,
  // counted with relaxed atomics).
  TransportMetrics& metrics_;
  std::string peer_;

  rdma_cm_id* id_ = nullptr;
  std::shared_ptr<RdmaDevice> device_;
  bool user_pool_attached_ = false;
  std::unique_ptr<BufferPool> msg_pool_;
  bool msg_pool_attached_ = false;
  ibv_comp_channel* comp_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  std::vector<PoolBuffer> recv_bufs_;
  std::vector<PoolBuffer> send_bufs_;
  uint32_t send_lkey_ = 0;
  uint32_t rpc_credits_ = 0;
  Nonce my_nonce_{};
  Nonce peer_nonce_{};

  mutable std::mutex mu_;
  std::condition_variable state_cv_;
  State state_ = State::kConnecting;
  Status close_reason_;
  Status connect_status_;  // client: result of Connect
  bool connect_done_ = false;
  bool closed_notified_ = false;
  uint32_t send_credits_ = 0;
  uint32_t ctrl_credits_ = 0;
  uint32_t owed_credits_ = 0;
  uint32_t owed_ctrl_ = 0;
  uint32_t peer_buffer_size_ = 0;
  uint32_t max_rd_ = 1;
  uint32_t sq_outstanding_ = 0;
  uint32_t rd_outstanding_ = 0;
  uint32_t recvs_posted_ = 0;
  std::vector<uint32_t> free_send_slots_;
  bool windows_enabled_ = false;
  std::vector<ibv_mw*> all_mws_;
  std::vector<ibv_mw*> free_mws_;
  std::deque<std::unique_ptr<Wr>> queue_;
  // Posted send-queue work requests by id (ids grow with posting order).
  // Only some are signaled (see pump_locked): a completion for id X also
  // retires every earlier one, since an RC send queue completes in order.
  std::map<uint64_t, std::unique_ptr<Wr>> posted_;
  uint32_t signaled_outstanding_ = 0;
  uint32_t unsignaled_run_ = 0;     // SENDs posted since the last signaled WR
  uint32_t staged_unsignaled_ = 0;  // staged WRITEs whose buffers wait for a signal
  uint64_t next_wr_id_ = 1;
  bool close_after_send_ = false;
  std::shared_ptr<RdmaConnection> self_;  // keeps us alive until destroyed

  // Held by whoever reaps the CQ and handles completions: the loop thread,
  // or a caller in drive() (then the loop skips this CQ). reaper_ names
  // the holder, so close() from within a handler does not wait for itself.
  std::mutex reap_mu_;
  std::atomic<std::thread::id> reaper_{};
  uint32_t drivers_ = 0;  // guarded by mu_: a caller in drive() (no destroy)

  // Under reap_mu_: completions polled from the CQ and not handled yet,
  // in CQ order (a handler run in place leaves receives here).
  std::deque<ibv_wc> reaped_;
  // This connection's counters() on the metrics page.
  std::unique_ptr<RdmaConnectionProbes> probes_;
  // Under reap_mu_: the message being reassembled.
  std::vector<uint32_t> frag_slots_;
  std::string frag_data_;
};

}  // namespace surge::net::rdma
