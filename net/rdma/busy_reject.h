// BusyReject: the private data of a connection request an RDMA server
// rejects because it is busy (over a limit on connections in the handshake,
// net/preauth_limits.h), so the client can tell "busy, come back" from "no
// listener" or "bad Hello" and retry as the TCP client does after a
// GoAway(Unavailable) (net/busy_retry.h).
//
// Wire (little-endian, the first 12 bytes of the REJ private data; rdma_cm
// may pad it with zeros):
//   u32 magic "SRDB" | u8 scope (1: per address, 2: in total) | 3 zero
//   bytes | u32 the limit
// Any other rejection carries no private data (or not this magic).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "net/frame.h"

namespace surge::net::rdma {

inline constexpr uint32_t kBusyRejectMagic = 0x42445253;  // "SRDB"
inline constexpr size_t kBusyRejectSize = 12;

struct BusyReject {
  bool per_address = false;  // else the total
  uint32_t limit = 0;

  // "its limit of 32 connections in the handshake per address"
  std::string describe() const {
    return "its limit of " + std::to_string(limit) + " connections in the handshake " +
           (per_address ? "per address" : "in total");
  }
};

inline std::string encode_busy_reject(const BusyReject& b) {
  std::string out(kBusyRejectSize, '\0');
  auto* p = reinterpret_cast<std::byte*>(out.data());
  put_u32(p, kBusyRejectMagic);
  p[4] = std::byte{static_cast<uint8_t>(b.per_address ? 1 : 2)};
  put_u32(p + 8, b.limit);
  return out;
}

// The busy rejection in a REJ's private data; nullopt for anything else.
inline std::optional<BusyReject> decode_busy_reject(std::string_view pd) {
  if (pd.size() < kBusyRejectSize) return std::nullopt;
  const auto* p = reinterpret_cast<const std::byte*>(pd.data());
  if (get_u32(p) != kBusyRejectMagic) return std::nullopt;
  const auto scope = static_cast<uint8_t>(p[4]);
  if (scope != 1 && scope != 2) return std::nullopt;
  return BusyReject{scope == 1, get_u32(p + 8)};
}

}  // namespace surge::net::rdma
