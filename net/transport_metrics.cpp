// The transport's series: see transport_metrics.h.
#include "net/transport_metrics.h"

#include "common/metrics/registry.h"

namespace surge::net {

namespace {

TransportMetrics make(TransportKind transport, Side side) {
  auto& r = metrics::Registry::global();
  const std::string t = transport == TransportKind::kRdma ? "rdma" : "tcp";
  const std::string s = side == Side::kServer ? "server" : "client";
  const std::vector<std::string> ts{"transport", "side"};
  auto& calls = r.counter_family("surge_net_calls_total",
                                 "RPC calls: sent (side=client) or received (side=server).", ts);
  auto& errors = r.counter_family(
      "surge_net_call_errors_total",
      "RPC calls that got no reply from a handler: client: not sent, connection lost or timed "
      "out; server: refused by the RPC core (unknown method, credits exceeded, stopping).",
      ts);
  auto& sent = r.counter_family("surge_net_sent_bytes_total",
                                "Bytes sent on connections (frames, payload, RDMA WRITEs).", ts);
  auto& received = r.counter_family(
      "surge_net_received_bytes_total",
      "Bytes received on connections (frames, payload, RDMA READs).", ts);
  auto& connect_errors = r.counter_family(
      "surge_net_connect_errors_total",
      "Client connects (TCP or RDMA connection and the key handshake) that failed.",
      {"transport"});
  auto& reconnects = r.counter_family(
      "surge_net_reconnects_total",
      "Channels a ChannelPool made again to an address whose previous channel had died.",
      {"transport"});
  TransportMetrics m{calls.with({t, s}),
                     errors.with({t, s}),
                     sent.with({t, s}),
                     received.with({t, s}),
                     connect_errors.with({t}),
                     reconnects.with({t}),
                     nullptr,
                     nullptr,
                     nullptr,
                     nullptr};
  if (transport == TransportKind::kRdma) {
    const std::vector<std::string> sq{"side", "queue"};
    auto& wc = r.counter_family("surge_net_rdma_completions_total",
                                "RDMA work completions handled, per queue (send, recv).", sq);
    auto& wc_err = r.counter_family(
        "surge_net_rdma_completion_errors_total",
        "RDMA work completions with an error status (flushes at a close included).", sq);
    m.rdma_send_completions = &wc.with({s, "send"});
    m.rdma_recv_completions = &wc.with({s, "recv"});
    m.rdma_send_completion_errors = &wc_err.with({s, "send"});
    m.rdma_recv_completion_errors = &wc_err.with({s, "recv"});
  }
  return m;
}

}  // namespace

TransportMetrics& TransportMetrics::of(TransportKind transport, Side side) {
  // Function-local statics: made once, thread-safe, never destroyed
  // (the registry they point into is never destroyed either).
  static TransportMetrics* table[2][2] = {
      {new TransportMetrics(make(TransportKind::kTcp, Side::kClient)),
       new TransportMetrics(make(TransportKind::kTcp, Side::kServer))},
      {new TransportMetrics(make(TransportKind::kRdma, Side::kClient)),
       new TransportMetrics(make(TransportKind::kRdma, Side::kServer))}};
  return *table[transport == TransportKind::kRdma ? 1 : 0][side == Side::kServer ? 1 : 0];
}

RdmaConnectionProbes::RdmaConnectionProbes(Side side, std::function<RdmaConnectionState()> read) {
  auto& r = metrics::Registry::global();
  const std::vector<std::pair<std::string, std::string>> labels{
      {"side", side == Side::kServer ? "server" : "client"}};
  credits_ = r.probe("surge_net_rdma_send_credits",
                     "Send credits held by the open RDMA connections (SENDs they may post "
                     "before their peers give buffers back).",
                     metrics::Type::kGauge, labels, [read] { return read().send_credits; });
  queued_ = r.probe("surge_net_rdma_queued_sends",
                    "Messages and one-sided requests the open RDMA connections hold back for "
                    "want of send credits or send-queue slots.",
                    metrics::Type::kGauge, labels, [read] { return read().queued; });
  recvs_ = r.probe("surge_net_rdma_posted_receives",
                   "Receive buffers posted by the open RDMA connections.", metrics::Type::kGauge,
                   labels, [read] { return read().recvs_posted; });
}

}  // namespace surge::net
