// Helpers for the net tests: which transport to test (from the
// environment), an in-process server, and a server in its own process.
//
// Environment (the same test binaries run over RDMA inside the Soft-RoCE VM):
//   SURGE_NET_TRANSPORT  tcp (default) | rdma
//   SURGE_NET_HOST       address to listen on / connect to (default 127.0.0.1;
//                        e.g. 10.99.0.1 in the VM)
//   SURGE_BUILD_DIR      build tree (set by ctest), for net_test_server
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "net/rpc_channel.h"
#include "net/rpc_server.h"

namespace surge::net::testing {

inline constexpr const char* kTestKey = "net-test-cluster-key";

// "tcp" or "rdma".
std::string transport_scheme();
std::string test_host();
// scheme://host:0
std::string listen_address();

// Small pool so tests also exercise pool waits.
BufferPoolOptions small_pool();
ServerOptions default_server_options();

// Creates, registers the test service, starts. Fails the test on error.
std::unique_ptr<RpcServer> start_test_server(ServerOptions options = default_server_options());
std::shared_ptr<RpcChannel> connect_or_die(const std::string& address,
                                           const std::string& key = kTestKey);

// net_test_server in a child process; killed (SIGKILL) and reaped by the
// destructor on every path.
class ServerProcess {
 public:
  // listen: "tcp://127.0.0.1:0" etc.
  static std::unique_ptr<ServerProcess> Start(const std::string& listen,
                                              const std::string& key = kTestKey);
  ~ServerProcess();
  const std::string& address() const { return address_; }
  pid_t pid() const { return pid_; }
  void kill_now();  // SIGKILL + reap

 private:
  pid_t pid_ = -1;
  std::string address_;
};

std::vector<std::byte> pattern_bytes(size_t n, uint32_t seed);

}  // namespace surge::net::testing
