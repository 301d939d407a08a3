// net_test_server: the test echo service (tests/net/test_service.h) in its
// own process, for tests that kill a server (SIGKILL mid-request) and for
// other parts that need a peer. Prints "LISTENING <address>" on stdout once
// it serves, then runs until killed (SIGTERM/SIGINT stop it cleanly).
//
//   net_test_server --listen tcp://127.0.0.1:0 --key SECRET
//   net_test_server --listen rdma://10.99.0.1:0 --key-file /path/key
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "common/log.h"
#include "net/cluster_key.h"
#include "net/rpc_server.h"
#include "tests/net/test_service.h"

int main(int argc, char** argv) {
  CLI::App app{"Surge net test server (test echo service)"};
  std::string listen = "tcp://127.0.0.1:0";
  std::string key;
  std::string key_file;
  int workers = 4;
  int io_threads = 2;
  std::string log_level = "warn";
  app.add_option("--listen", listen, "tcp://HOST:PORT or rdma://HOST:PORT");
  app.add_option("--key", key, "cluster key");
  app.add_option("--key-file", key_file, "cluster key file");
  app.add_option("--workers", workers, "handler threads");
  app.add_option("--io-threads", io_threads, "I/O threads");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error");
  CLI11_PARSE(app, argc, argv);

  if (auto st = surge::init_logging(log_level); !st.ok()) {
    std::cerr << st.ToString() << "\n";
    return 2;
  }
  if (!key_file.empty()) {
    auto k = surge::net::load_cluster_key(key_file);
    if (!k.ok()) {
      std::cerr << k.status().ToString() << "\n";
      return 2;
    }
    key = *k;
  }
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // threads inherit it

  surge::net::ServerOptions opts;
  opts.listen = listen;
  opts.cluster_key = key;
  opts.worker_threads = workers;
  opts.io_threads = io_threads;
  auto server = surge::net::RpcServer::Create(opts);
  if (!server.ok()) {
    std::cerr << server.status().ToString() << "\n";
    return 1;
  }
  surge::net::testing::register_test_service(**server);
  if (auto st = (*server)->start(); !st.ok()) {
    std::cerr << st.ToString() << "\n";
    return 1;
  }
  std::printf("LISTENING %s\n", (*server)->address().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  (*server)->stop();
  return 0;
}
