// systemd's readiness protocol (sd_notify(3)), written here rather than
// linked from libsystemd: one datagram to the socket named by $NOTIFY_SOCKET.
// A daemon sends "READY=1" once it serves requests (units are Type=notify, so
// `systemctl start` returns then and units ordered after it start then) and
// "STOPPING=1" when a stop signal arrives. Without $NOTIFY_SOCKET (not run by
// systemd, or not Type=notify) it does nothing and succeeds.
#pragma once

#include <string_view>

#include "common/status.h"

namespace surge {

// state: newline-separated assignments, e.g. "READY=1\nSTATUS=serving".
Status notify_systemd(std::string_view state);

}  // namespace surge
