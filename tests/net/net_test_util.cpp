#include "tests/net/net_test_util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>

#include "tests/net/test_service.h"

namespace surge::net::testing {

namespace {
std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}
}  // namespace

std::string transport_scheme() { return env_or("SURGE_NET_TRANSPORT", "tcp"); }
std::string test_host() { return env_or("SURGE_NET_HOST", "127.0.0.1"); }
std::string listen_address() { return transport_scheme() + "://" + test_host() + ":0"; }

BufferPoolOptions small_pool() {
  BufferPoolOptions p;
  p.name = "test";
  p.classes = {{4096, 64}, {64 * 1024, 16}, {1024 * 1024, 8}};
  p.huge_pages = false;
  p.lock_memory = false;
  return p;
}

ServerOptions default_server_options() {
  ServerOptions o;
  o.listen = listen_address();
  o.cluster_key = kTestKey;
  o.io_threads = 2;
  o.worker_threads = 4;
  o.pool = small_pool();
  return o;
}

std::unique_ptr<RpcServer> start_test_server(ServerOptions options) {
  auto server = RpcServer::Create(std::move(options));
  if (!server.ok()) {
    ADD_FAILURE() << "RpcServer::Create: " << server.status().ToString();
    return nullptr;
  }
  register_test_service(**server);
  Status st = (*server)->start();
  if (!st.ok()) {
    ADD_FAILURE() << "RpcServer::start: " << st.ToString();
    return nullptr;
  }
  return std::move(*server);
}

std::shared_ptr<RpcChannel> connect_or_die(const std::string& address, const std::string& key) {
  ChannelOptions o;
  o.cluster_key = key;
  auto ch = RpcChannel::Connect(address, o);
  if (!ch.ok()) {
    ADD_FAILURE() << "connect " << address << ": " << ch.status().ToString();
    return nullptr;
  }
  return *ch;
}

std::unique_ptr<ServerProcess> ServerProcess::Start(const std::string& listen,
                                                    const std::string& key) {
  const char* build = std::getenv("SURGE_BUILD_DIR");
  if (build == nullptr) {
    ADD_FAILURE() << "SURGE_BUILD_DIR is not set (run through ctest)";
    return nullptr;
  }
  std::string bin = std::string(build) + "/tests/net/net_test_server";
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return nullptr;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return nullptr;
  }
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::execl(bin.c_str(), bin.c_str(), "--listen", listen.c_str(), "--key", key.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  auto proc = std::unique_ptr<ServerProcess>(new ServerProcess());
  proc->pid_ = pid;
  // Read "LISTENING <address>\n" (10 s at most).
  std::string line;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (line.find('\n') == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{out[0], POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[256];
    ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    line.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  const std::string prefix = "LISTENING ";
  if (line.rfind(prefix, 0) != 0 || line.find('\n') == std::string::npos) {
    ADD_FAILURE() << bin << " did not report its address; got '" << line << "'";
    return nullptr;  // destructor kills it
  }
  proc->address_ = line.substr(prefix.size(), line.find('\n') - prefix.size());
  return proc;
}

void ServerProcess::kill_now() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
}

ServerProcess::~ServerProcess() { kill_now(); }

std::vector<std::byte> pattern_bytes(size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  fill_pattern(v, seed, 0);
  return v;
}

}  // namespace surge::net::testing
