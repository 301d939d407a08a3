// Typed RPC methods. Every method is declared once, next to its schema in
// net/proto/, as a MethodDef: numeric service id, numeric method id, and the
// protobuf request and response types. Server registration and client calls
// both take the MethodDef, so ids and types cannot drift apart.
#pragma once

#include <cstdint>

namespace surge::net {

template <uint16_t Service, uint16_t Method, typename Req, typename Resp>
struct MethodDef {
  static constexpr uint16_t kService = Service;
  static constexpr uint16_t kMethod = Method;
  using Request = Req;
  using Response = Resp;
};

}  // namespace surge::net
