// DaemonProcess: what every Surge daemon does around its own work, written
// once: the stop signals (blocked in every thread, waited for in main),
// logging set up from its settings, the Prometheus endpoint, and telling
// its starter it is ready (the one stdout line scripts and tests wait for;
// READY=1 with MAINPID to systemd, whose units are Type=notify) and that it
// is stopping.
//   main():  block_stop_signals();  ... settings ...  start_logging(...);
//   run():   ... serve ...  start_metrics(...);  announce_ready(...);
//            wait_for_stop(...);  ... stop ...
#pragma once

#include <memory>
#include <string>

#include "common/metrics_endpoint.h"
#include "common/status.h"

namespace surge::daemon {

// Call first in main, before any thread exists: every thread inherits a
// mask with SIGTERM and SIGINT blocked, so only wait_for_stop sees them;
// SIGPIPE is ignored (a peer gone mid-write is an error value, not a
// death).
void block_stop_signals();

// Logging for the daemon `name` ("surge-mds") at level, to file ("":
// stderr).
Status start_logging(const std::string& name, const std::string& level, const std::string& file);

// The daemon's metrics registry (metrics::Registry::global()) served on
// listen ("HOST:PORT", GET /metrics); "" serves none (nullptr). A failure
// names the daemon and the address.
Result<std::unique_ptr<MetricsEndpoint>> start_metrics(const std::string& name,
                                                       const std::string& listen);

// The daemon serves from now on: prints stdout_line (flushed) and tells
// systemd READY=1, MAINPID and STATUS=stdout_line. A failure to notify is
// logged, not fatal (a unit that is not Type=notify has no socket).
void announce_ready(const std::string& name, const std::string& stdout_line);

// Blocks until SIGTERM or SIGINT, logs it and tells systemd STOPPING=1.
// Returns the signal.
int wait_for_stop(const std::string& name);

}  // namespace surge::daemon
