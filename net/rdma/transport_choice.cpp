// Transport mode -> address: see transport_choice.h.
#include "net/rdma/transport_choice.h"

#include <netdb.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace surge::net {

Result<TransportMode> parse_transport_mode(std::string_view text) {
  if (text == "tcp") return TransportMode::kTcp;
  if (text == "rdma") return TransportMode::kRdma;
  if (text == "auto") return TransportMode::kAuto;
  return Status::InvalidArgument("transport '" + std::string(text) +
                                 "': expected tcp, rdma or auto");
}

Result<std::string> rdma_device_for(const std::string& host) {
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST;
  addrinfo* ai = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &ai);
  if (rc != 0) {
    return Status::InvalidArgument("rdma: '" + host +
                                   "' is not an IP address: " + gai_strerror(rc));
  }
  rdma_event_channel* ch = rdma_create_event_channel();
  if (ch == nullptr) {
    int err = errno;
    freeaddrinfo(ai);
    return Status::Unavailable(
        "rdma: no RDMA device holds " + host +
        ": this machine has no RDMA stack (rdma_cm: " + std::string(strerror(err)) + ")");
  }
  rdma_cm_id* id = nullptr;
  Status st;
  std::string name;
  if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) {
    st = Status::FromErrno(errno, "rdma: rdma_create_id to probe " + host);
  } else if (rdma_bind_addr(id, ai->ai_addr) != 0 || id->verbs == nullptr) {
    st = Status::Unavailable("rdma: no RDMA device holds " + host);
  } else {
    name = ibv_get_device_name(id->verbs->device);
  }
  if (id != nullptr) rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
  freeaddrinfo(ai);
  if (!st.ok()) return st;
  return name;
}

Result<std::string> choose_transport_address(TransportMode mode, const std::string& host,
                                             uint16_t port) {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  std::string hp = h + ":" + std::to_string(port);
  if (mode == TransportMode::kTcp) return "tcp://" + hp;
  auto dev = rdma_device_for(host);
  if (dev.ok()) return "rdma://" + hp;
  if (mode == TransportMode::kRdma) {
    return dev.status().WithContext("transport 'rdma' for " + hp);
  }
  SLOG_INFO("transport auto: {} ({}), using tcp://{}", dev.status().message(), hp, hp);
  return "tcp://" + hp;
}

}  // namespace surge::net
