// The transport's series on the process's metrics page, declared once for
// both transports (label transport = "tcp" | "rdma") and both sides of a
// connection (label side = "client" | "server"):
//
//   surge_net_calls_total             client: calls sent; server: requests received
//   surge_net_call_errors_total       calls that got no handler reply: client: not sent,
//                                     connection lost or timed out; server: refused by the
//                                     core (unknown method, credits exceeded, stopping)
//   surge_net_sent_bytes_total        bytes put on the wire (TCP: sendmsg; RDMA: SENDs
//   surge_net_received_bytes_total    and WRITEs out, receives and READs in)
//   surge_net_connect_errors_total    client connects (with handshake) that failed
//   surge_net_reconnects_total        ChannelPool replaced a dead channel to an address
//   surge_net_rdma_completions_total        RDMA work completions, queue = send | recv
//   surge_net_rdma_completion_errors_total  those that did not succeed (flushes included)
//   surge_net_rdma_send_credits, surge_net_rdma_queued_sends, surge_net_rdma_posted_receives
//                                     gauges read at scrape time, summed over the open
//                                     RDMA connections (RdmaConnectionProbes)
//
// The label lookups (a mutex each) happen once per process, at the first
// TransportMetrics::of(), for every transport and side at once: so every
// process that uses a transport shows every series (zero where unused, the
// RDMA ones too), and a dashboard finds them on any page. The code that
// counts holds the references, resolved when its connection or server is
// made, and counts with relaxed atomics.
#pragma once

#include <cstdint>
#include <functional>

#include "common/metrics/metric.h"
#include "common/metrics/registry.h"
#include "net/transport.h"

namespace surge::net {

enum class Side { kClient, kServer };

struct TransportMetrics {
  metrics::Counter& calls;
  metrics::Counter& call_errors;
  metrics::Counter& sent_bytes;
  metrics::Counter& received_bytes;
  metrics::Counter& connect_errors;  // client side only
  metrics::Counter& reconnects;      // client side only
  // RDMA only (zero for TCP, whose series are not declared).
  metrics::Counter* rdma_send_completions;
  metrics::Counter* rdma_recv_completions;
  metrics::Counter* rdma_send_completion_errors;
  metrics::Counter* rdma_recv_completion_errors;

  // The series of one transport and side in metrics::Registry::global();
  // the first call resolves them all, later calls are a table lookup.
  static TransportMetrics& of(TransportKind transport, Side side);
};

// What an RDMA connection holds right now (RdmaConnection::counters()).
struct RdmaConnectionState {
  uint32_t send_credits = 0;  // SENDs it may post before the peer returns buffers
  uint32_t queued = 0;        // messages and one-sided requests waiting to be posted
  uint32_t recvs_posted = 0;  // receive buffers posted
};

// One connection's state on the page while it lives: three probes (label
// side) whose values add up over the process's connections. `read` runs
// at scrape time under the registry's lock, so it must not take a lock
// that is held while a probe is made or destroyed; destroy this before
// whatever `read` touches.
class RdmaConnectionProbes {
 public:
  RdmaConnectionProbes(Side side, std::function<RdmaConnectionState()> read);

 private:
  metrics::Probe credits_, queued_, recvs_;
};

}  // namespace surge::net
