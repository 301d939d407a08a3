// How a client comes back to a server that refused its connection as busy
// (over its limits on connections in the handshake, net/preauth_limits.h):
// the TCP client on a GoAway(Unavailable) before the challenge, the RDMA
// client on a connection request rejected with the busy private data
// (net/rdma/busy_reject.h). Both try again after busy_retry_pause() until
// their connect deadline, and only then fail, saying how often they were
// refused and why: busy_gave_up(), also when the last try ran out of time
// (a try started just before the deadline has only what is left of it, and
// timing out then says nothing the refusals did not).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>

#include "common/status.h"

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

// The error once a client stops asking: the last refusal (it names the
// address and the limit), how often and over how long it was refused.
inline Status busy_gave_up(const Status& last_refusal, int refusals,
                           std::chrono::steady_clock::time_point start,
                           std::chrono::milliseconds connect_timeout) {
  const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  return last_refusal.WithContext("refused " + std::to_string(refusals) + " times in " +
                                  std::to_string(spent.count()) + " ms (connect timeout " +
                                  std::to_string(connect_timeout.count()) + " ms)");
}

}  // namespace surge::net
