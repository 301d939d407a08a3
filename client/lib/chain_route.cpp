#include "client/lib/chain_route.h"

#include <algorithm>
#include <string>

namespace surge::client {

namespace {

namespace pb = proto::mds;

std::string chain_text(const pb::Chain& c) {
  std::string s = "chain " + std::to_string(c.chain_id()) + " (version " +
                  std::to_string(c.version()) + ", members";
  for (const auto& m : c.members()) {
    const char* st = m.state() == pb::MEMBER_SERVING   ? "serving"
                     : m.state() == pb::MEMBER_SYNCING ? "syncing"
                                                       : "offline";
    s += ' ';
    s += std::to_string(m.target_id());
    s += ':';
    s += st;
  }
  return s + ")";
}

bool avoided(const RouteHint& h, uint32_t target) {
  return std::find(h.avoid.begin(), h.avoid.end(), target) != h.avoid.end();
}

}  // namespace

Result<uint32_t> chain_head(const pb::Chain& chain) {
  for (const auto& m : chain.members()) {
    if (m.state() == pb::MEMBER_SERVING || m.state() == pb::MEMBER_SYNCING) return m.target_id();
  }
  return Status::Unavailable(chain_text(chain) + " has no member that takes writes");
}

Result<uint32_t> chain_reader(const pb::Chain& chain, uint64_t spread_key, const RouteHint& hint) {
  std::vector<uint32_t> serving;
  for (const auto& m : chain.members()) {
    if (m.state() == pb::MEMBER_SERVING) serving.push_back(m.target_id());
  }
  if (serving.empty()) return Status::Unavailable(chain_text(chain) + " has no serving member");
  if (hint.last_serving) {
    // Only the last SERVING member serves a dirty chunk; if it cannot be
    // reached the map must change first (the MDS takes it out, and the one
    // before it becomes last).
    if (!avoided(hint, serving.back())) return serving.back();
    return Status::Unavailable(chain_text(chain) + ": its last serving member " +
                               std::to_string(serving.back()) + " was tried already");
  }
  std::vector<uint32_t> left;
  for (uint32_t t : serving) {
    if (!avoided(hint, t)) left.push_back(t);
  }
  if (left.empty()) {
    return Status::Unavailable(chain_text(chain) + ": every serving member was tried already");
  }
  return left[spread_key % left.size()];
}

namespace {

Result<uint32_t> ec_holder(const pb::Chain& chain, uint32_t position, const RouteHint& hint,
                           bool syncing_too) {
  if (position >= static_cast<uint32_t>(chain.members_size())) {
    return Status::Unavailable(chain_text(chain) + " has no position " + std::to_string(position));
  }
  const auto& m = chain.members(static_cast<int>(position));
  const bool takes =
      m.state() == pb::MEMBER_SERVING || (syncing_too && m.state() == pb::MEMBER_SYNCING);
  if (!takes) {
    return Status::Unavailable(chain_text(chain) + ": position " + std::to_string(position) +
                               " (target " + std::to_string(m.target_id()) + ") does not serve");
  }
  if (avoided(hint, m.target_id())) {
    return Status::Unavailable(chain_text(chain) + ": position " + std::to_string(position) +
                               " (target " + std::to_string(m.target_id()) + ") was tried already");
  }
  return m.target_id();
}

}  // namespace

Result<uint32_t> ec_member(const pb::Chain& chain, uint32_t position, const RouteHint& hint) {
  return ec_holder(chain, position, hint, false);
}

Result<uint32_t> ec_writer(const pb::Chain& chain, uint32_t position, const RouteHint& hint) {
  return ec_holder(chain, position, hint, true);
}

Result<uint32_t> ec_stand_in(const pb::Chain& chain, uint32_t position, const RouteHint& hint) {
  const uint32_t k = chain.ec_data(), n = k + chain.ec_parity();
  if (position >= k || position >= static_cast<uint32_t>(chain.members_size())) {
    return Status::Unavailable(chain_text(chain) + ": position " + std::to_string(position) +
                               " is no data position");
  }
  const auto state = chain.members(static_cast<int>(position)).state();
  if (state == pb::MEMBER_SERVING || state == pb::MEMBER_SYNCING) {
    return Status::Unavailable(chain_text(chain) + ": position " + std::to_string(position) +
                               " takes its own writes");
  }
  for (uint32_t i = k; i < n && i < static_cast<uint32_t>(chain.members_size()); ++i) {
    const auto& m = chain.members(static_cast<int>(i));
    if (m.state() != pb::MEMBER_SERVING) continue;
    // Only the first serving parity position stands in: a later one would
    // refuse, so one that was tried waits for the map to move on.
    if (avoided(hint, m.target_id())) {
      return Status::Unavailable(chain_text(chain) + ": the stand-in for position " +
                                 std::to_string(position) + " (parity position " +
                                 std::to_string(i) + ", target " + std::to_string(m.target_id()) +
                                 ") was tried already");
    }
    return m.target_id();
  }
  return Status::Unavailable(chain_text(chain) + ": position " + std::to_string(position) +
                             " is down and no parity position serves to stand in for it");
}

uint64_t read_spread_key(uint64_t ino, uint32_t slot, uint64_t stripe) {
  // splitmix64 over the three: neighbouring stripes land on different members.
  uint64_t x = ino * 0x9E3779B97F4A7C15ull ^ (uint64_t{slot} << 40) ^ stripe;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace surge::client
