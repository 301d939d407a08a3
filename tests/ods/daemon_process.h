// DaemonProcess: a daemon (surge-ods, surge-mds) run as a child process for
// one test. Waits for its "... listening on ADDRESS ..." line on stdout;
// SIGKILLs and reaps it on every exit path (destructor), so no test leaves
// a daemon behind. Also: the transport and host the tests use, from
// SURGE_NET_TRANSPORT (tcp|rdma) and SURGE_NET_HOST (default 127.0.0.1), so
// the same tests run over RDMA inside the Soft-RoCE VM.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace surge::ods::testing {

inline std::string build_dir() {
  const char* d = std::getenv("SURGE_BUILD_DIR");
  if (d == nullptr || *d == 0) throw std::runtime_error("SURGE_BUILD_DIR is not set (run through ctest)");
  return d;
}

// "tcp://127.0.0.1:0" unless the environment says otherwise.
inline std::string listen_address(uint16_t port = 0) {
  const char* t = std::getenv("SURGE_NET_TRANSPORT");
  const char* h = std::getenv("SURGE_NET_HOST");
  std::string transport = (t != nullptr && *t != 0) ? t : "tcp";
  std::string host = (h != nullptr && *h != 0) ? h : "127.0.0.1";
  return transport + "://" + host + ":" + std::to_string(port);
}

class DaemonProcess {
 public:
  DaemonProcess() = default;
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;
  ~DaemonProcess() { kill(SIGKILL); }

  // Extra environment for the next start() (e.g. crash points).
  void set_env(std::vector<std::pair<std::string, std::string>> env) { env_ = std::move(env); }

  // Starts binary with args, stderr to log_path; returns the first stdout
  // line containing "listening on" (throws after the timeout).
  std::string start(const std::string& binary, const std::vector<std::string>& args, const std::string& log_path,
                    std::chrono::seconds timeout = std::chrono::seconds(60)) {
    if (pid_ > 0) throw std::logic_error("daemon already running");
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork");
    if (pid == 0) {
      ::dup2(out[1], 1);
      int err = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (err >= 0) ::dup2(err, 2);
      // Die with the test, whatever kills it.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      for (const auto& [k, v] : env_) ::setenv(k.c_str(), v.c_str(), 1);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(binary.c_str()));
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(binary.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    pid_ = pid;
    out_fd_ = out[0];
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string buf;
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{out_fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char c[256];
      ssize_t n = ::read(out_fd_, c, sizeof c);
      if (n <= 0) break;
      buf.append(c, static_cast<size_t>(n));
      auto nl = buf.find('\n');
      while (nl != std::string::npos) {
        std::string line = buf.substr(0, nl);
        buf.erase(0, nl + 1);
        if (line.find("listening on") != std::string::npos) return line;
        nl = buf.find('\n');
      }
    }
    kill(SIGKILL);
    // The log is usually in a temp dir that is gone by the time anyone
    // looks: carry its tail in the message.
    std::string tail;
    if (FILE* f = std::fopen(log_path.c_str(), "r")) {
      std::fseek(f, 0, SEEK_END);
      long size = std::ftell(f);
      std::fseek(f, size > 3000 ? size - 3000 : 0, SEEK_SET);
      char c[3001];
      size_t n = std::fread(c, 1, 3000, f);
      tail.assign(c, n);
      std::fclose(f);
    }
    throw std::runtime_error(binary + " did not report 'listening on' within " + std::to_string(timeout.count()) +
                             " s; end of " + log_path + ":\n" + tail);
  }

  // Sends sig and reaps the process; returns its wait status (-1 if none).
  int kill(int sig) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    if (out_fd_ >= 0) ::close(out_fd_);
    out_fd_ = -1;
    return status;
  }
  // SIGTERM, then SIGKILL if it has not exited within `grace`; the status.
  int stop(std::chrono::milliseconds grace = std::chrono::milliseconds(10000)) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + grace;
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        if (out_fd_ >= 0) ::close(out_fd_);
        out_fd_ = -1;
        return status;
      }
      ::usleep(10000);
    }
    kill(SIGKILL);
    return -1;
  }
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::vector<std::pair<std::string, std::string>> env_;
};

// "surge-ods listening on tcp://127.0.0.1:4000 target 3" -> the address.
inline std::string address_of(const std::string& line) {
  auto p = line.find("listening on ");
  if (p == std::string::npos) return "";
  p += 13;
  auto e = line.find(' ', p);
  return line.substr(p, e == std::string::npos ? std::string::npos : e - p);
}

}  // namespace surge::ods::testing
