// DaemonProcess: see daemon_process.h.
#include "common/daemon/daemon_process.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include "common/log.h"
#include "common/metrics/registry.h"
#include "common/systemd_notify.h"

namespace surge::daemon {
namespace {

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void block_stop_signals() {
  sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

Status start_logging(const std::string& name, const std::string& level, const std::string& file) {
  return init_logging(level, file, name);
}

Result<std::unique_ptr<MetricsEndpoint>> start_metrics(const std::string& name,
                                                       const std::string& listen) {
  if (listen.empty()) return std::unique_ptr<MetricsEndpoint>();
  auto endpoint =
      std::make_unique<MetricsEndpoint>([] { return metrics::Registry::global().render(); });
  if (Status st = endpoint->start(listen); !st.ok()) {
    return Status(st.code(), name + " metrics endpoint: " + st.message());
  }
  SLOG_INFO("{} metrics on {}", name, endpoint->url());
  return endpoint;
}

void announce_ready(const std::string& name, const std::string& stdout_line) {
  std::printf("%s\n", stdout_line.c_str());
  std::fflush(stdout);
  const std::string state =
      "READY=1\nMAINPID=" + std::to_string(::getpid()) + "\nSTATUS=" + stdout_line;
  if (Status st = notify_systemd(state); !st.ok()) SLOG_WARN("{}: {}", name, st.ToString());
}

int wait_for_stop(const std::string& name) {
  sigset_t set = stop_signals();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  SLOG_INFO("{}: signal {}, stopping", name, sig);
  if (Status st = notify_systemd("STOPPING=1"); !st.ok()) SLOG_WARN("{}: {}", name, st.ToString());
  return sig;
}

}  // namespace surge::daemon
