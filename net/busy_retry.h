// How a client comes back to a server that refused its connection as busy
// (over its limits on connections in the handshake, net/preauth_limits.h):
// the TCP client on a GoAway(Unavailable) before the challenge, the RDMA
// client on a connection request rejected with the busy private data
// (net/rdma/busy_reject.h). Both try again after busy_retry_pause() until
// their connect deadline, and only then fail, saying how often they were
// refused and why.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

namespace surge::net {

// The pause before try `n` (2, 3, ...) after a refusal: 2 ms doubling up to
// 128 ms, each a random 50-100% of that so refused peers do not come back
// in step.
inline std::chrono::microseconds busy_retry_pause(int n) {
  thread_local std::minstd_rand rng{std::random_device{}()};
  const int64_t ceiling_us = int64_t{2000} << std::clamp(n - 2, 0, 6);
  std::uniform_int_distribution<int64_t> pick(ceiling_us / 2, ceiling_us);
  return std::chrono::microseconds(pick(rng));
}

}  // namespace surge::net
