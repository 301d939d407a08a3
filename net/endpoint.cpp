// Address parsing: "tcp://H:P", "rdma://H:P", bare "H:P" (tcp), "[v6]:P".
#include <charconv>

#include "net/transport.h"

namespace surge::net {

std::string Endpoint::to_string() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return std::string(kind == TransportKind::kRdma ? "rdma://" : "tcp://") + h + ":" +
         std::to_string(port);
}

Result<Endpoint> parse_endpoint(const std::string& address) {
  Endpoint ep;
  std::string_view rest = address;
  if (rest.starts_with("tcp://")) {
    rest.remove_prefix(6);
  } else if (rest.starts_with("rdma://")) {
    ep.kind = TransportKind::kRdma;
    rest.remove_prefix(7);
  } else if (rest.find("://") != std::string_view::npos) {
    return Status::InvalidArgument("address '" + address + "': unknown scheme (tcp:// or rdma://)");
  }
  size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == rest.size()) {
    return Status::InvalidArgument("address '" + address + "': expected HOST:PORT");
  }
  std::string_view host = rest.substr(0, colon);
  if (host.front() == '[') {
    if (host.back() != ']' || host.size() < 3) {
      return Status::InvalidArgument("address '" + address + "': bad bracketed IPv6 host");
    }
    host = host.substr(1, host.size() - 2);
  }
  std::string_view port = rest.substr(colon + 1);
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || ptr != port.data() + port.size() || value > 65535) {
    return Status::InvalidArgument("address '" + address + "': bad port '" + std::string(port) +
                                   "'");
  }
  ep.host = std::string(host);
  ep.port = static_cast<uint16_t>(value);
  return ep;
}

}  // namespace surge::net
