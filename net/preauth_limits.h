// PreauthLimits: how many connections may be in the handshake at once, per
// peer address and in total, for one server (either transport). A
// connection holds a slot from accept (TCP) or connection request (RDMA)
// until it authenticates or closes; one over a limit is refused before
// anything is allocated for it. Together with the handshake deadline and
// handshake-sized frames this bounds what peers that never prove the
// cluster key can make a server hold.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/status.h"

namespace surge::net {

class PreauthLimits {
 public:
  // 0 means no limit.
  PreauthLimits(uint32_t total, uint32_t per_address) : total_(total), per_address_(per_address) {}

  // Which limit a refused connection met (what an RDMA rejection tells
  // the client, net/rdma/busy_reject.h).
  struct Refusal {
    bool per_address = false;  // else the total
    uint32_t limit = 0;
  };

  // Takes a slot for a connection from `host` (an IP address), or
  // Unavailable naming the limit it would pass (also in *why, if given).
  // Thread-safe.
  Status admit(const std::string& host, Refusal* why = nullptr);
  // Gives back the slot admit() took for `host`.
  void release(const std::string& host);

  uint32_t in_handshake() const;

 private:
  const uint32_t total_;
  const uint32_t per_address_;
  mutable std::mutex mu_;
  uint32_t count_ = 0;
  std::unordered_map<std::string, uint32_t> by_host_;
};

}  // namespace surge::net
