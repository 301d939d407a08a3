// Picking a transport from configuration: "tcp", "rdma" or "auto".
//
// Daemons and clients take a transport mode plus HOST:PORT from their
// config and turn it into an address for RpcServer / RpcChannel:
//   tcp  -> tcp://HOST:PORT
//   rdma -> rdma://HOST:PORT when an RDMA device holds HOST, else an error
//           that names HOST and says no RDMA device holds it
//   auto -> rdma:// when a device holds HOST, else tcp:// with one INFO
//           log line saying so
// Whether a device "holds" HOST is what rdma_cm says when binding to it
// (the device of the interface with that address; e.g. rxe0 on rdma0).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace surge::net {

enum class TransportMode { kTcp, kRdma, kAuto };

Result<TransportMode> parse_transport_mode(std::string_view text);

// The name of the RDMA device that holds the IP address `host`
// ("rxe0"); Unavailable naming host when none does or the machine has no
// RDMA stack at all.
Result<std::string> rdma_device_for(const std::string& host);

// "tcp://HOST:PORT" or "rdma://HOST:PORT" as the mode says (see above).
Result<std::string> choose_transport_address(TransportMode mode, const std::string& host,
                                             uint16_t port);

}  // namespace surge::net
