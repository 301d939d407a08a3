// Method ids of the test service (kServiceTest): the net layer's tests,
// benchmark and tests/net/net_test_server. Never used by a real daemon.
#pragma once

#include "net/method.h"
#include "net/proto/services.h"
#include "net/proto/test.pb.h"

namespace surge::proto::test {

// Worker pool; honours sleep_ms / fail_code / fail_message.
using TestEcho = net::MethodDef<kServiceTest, 1, EchoRequest, EchoReply>;
// Same on the I/O thread (no sleep): the small-RPC benchmark.
using TestEchoInline = net::MethodDef<kServiceTest, 2, EchoRequest, EchoReply>;
using TestBulkEcho = net::MethodDef<kServiceTest, 3, BulkRequest, BulkReply>;
using TestBulkSink = net::MethodDef<kServiceTest, 4, BulkRequest, BulkReply>;
using TestBulkSource = net::MethodDef<kServiceTest, 5, BulkRequest, BulkReply>;
// Not registered by the test service: calls get UnknownMethod.
inline constexpr uint16_t kTestUnregisteredMethod = 99;

}  // namespace surge::proto::test
