// PLACEHOLDER owned by the net (TCP) engineer until the RDMA transport lands.
// RDMA engineer: delete this file and define connect_rdma / make_rdma_server
// (declared in net/transport.h) in your own net/rdma/*.cpp.
#include "net/transport.h"

namespace surge::net {

Result<std::unique_ptr<ClientTransport>> connect_rdma(const ClientTransportOptions& options,
                                                      std::shared_ptr<ClientCallTableBase>) {
  return Status::NotSupported("RDMA transport not built in: cannot connect to " +
                              options.endpoint.to_string());
}

Result<std::unique_ptr<ServerTransport>> make_rdma_server(const ServerTransportOptions& options,
                                                          RequestSink*) {
  return Status::NotSupported("RDMA transport not built in: cannot listen on " +
                              options.endpoint.to_string());
}

}  // namespace surge::net
