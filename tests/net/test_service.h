// The test echo service (net/proto/test_methods.h), shared by the in-process
// tests, tests/net/net_test_server (a separate process) and net_bench.
// Other parts may reuse net_test_server as a stand-in peer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "net/rpc_server.h"

namespace surge::net::testing {

// Registers TestEcho, TestEchoInline, TestBulkEcho, TestBulkSink,
// TestBulkSource on server (before start()). The sink (a write) and the
// source (a read) run in data_mode: net_bench passes kShortBlocking, the
// mode surge-ods registers OdsWrite / OdsRead in.
void register_test_service(RpcServer& server, HandlerMode data_mode = HandlerMode::kWorker);

// Deterministic bytes: byte i of a region made with `seed`, starting at
// absolute position `pos`.
void fill_pattern(std::span<std::byte> out, uint32_t seed, uint64_t pos);

}  // namespace surge::net::testing
