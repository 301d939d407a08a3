// ChainTable::rebalance: move chain memberships from the targets that hold
// the most onto those that hold the fewest (docs/redundancy.md,
// "Replacement, rebuild, drain, rebalance"). A move is the drain's: the
// newcomer joins the chain SYNCING at the tail (a ChainMove {from, to,
// "rebalance"} records why), the chain's last serving member sends it
// every chunk, and once it serves reconcile() drops the member it
// replaces. Bounded: at most `max_moves` rebalance moves are in flight at
// once, so a new target is filled a few chains at a time while the
// cluster keeps serving.
#include <algorithm>

#include "common/log.h"
#include "mds/cluster/chain_table.h"

namespace surge::mds {

namespace pb = proto::mds;

namespace {

// A chain may give up a member to rebalance only when it is whole and
// quiet: replicated, every member SERVING, no move under way.
bool movable(const pb::Chain& c) {
  if (c.scheme() == pb::SCHEME_EC || c.moves_size() != 0) return false;
  if (c.members_size() != static_cast<int>(c.replicas())) return false;
  for (const auto& m : c.members()) {
    if (m.state() != pb::MEMBER_SERVING) return false;
  }
  return true;
}

}  // namespace

uint32_t ChainTable::rebalance_in_flight() const {
  uint32_t n = 0;
  for (const auto& [id, c] : chains_) {
    for (const auto& mv : c.moves()) n += mv.reason() == kRebalanceReason;
  }
  return n;
}

std::vector<pb::ChainMoveOfChain> ChainTable::rebalance(
    const std::vector<TargetView>& targets, const std::map<uint32_t, uint64_t>& chain_bytes,
    uint32_t max_moves, bool dry_run, uint64_t now_ms) {
  // A chain weighs its bytes plus one, so with no data the memberships
  // balance and with data the bytes do.
  auto weight = [&](uint32_t chain_id) -> int64_t {
    auto it = chain_bytes.find(chain_id);
    return 1 + (it == chain_bytes.end() ? 0 : static_cast<int64_t>(it->second));
  };
  // Load of each target that can take a member: the weights of its
  // chains, less those it is already on its way out of.
  std::map<uint32_t, int64_t> load;
  for (const auto& v : targets) {
    if (v.can_join()) load[v.id] = 0;
  }
  std::vector<pb::ChainMoveOfChain> out;
  if (load.size() < 2) return out;
  for (const auto& [id, c] : chains_) {
    for (const auto& m : c.members()) {
      auto it = load.find(m.target_id());
      if (it != load.end()) it->second += weight(id);
    }
    for (const auto& mv : c.moves()) {
      auto it = load.find(mv.from_target_id());
      if (it != load.end()) it->second -= weight(id);
    }
  }
  const uint32_t in_flight = rebalance_in_flight();
  uint32_t budget = max_moves > in_flight ? max_moves - in_flight : 0;
  std::set<uint32_t> taken;  // chains given a move in this call
  while (budget > 0) {
    // Sources from the heaviest down, destinations from the lightest up;
    // the first pair with a quiet chain whose move narrows their gap
    // (its weight below the gap), the heaviest such chain.
    std::vector<std::pair<int64_t, uint32_t>> by_load;
    for (const auto& [id, n] : load) by_load.emplace_back(n, id);
    std::sort(by_load.begin(), by_load.end());
    uint32_t chain_id = 0, from = 0, to = 0;
    for (auto s = by_load.rbegin(); s != by_load.rend() && chain_id == 0; ++s) {
      for (auto d = by_load.begin(); d != by_load.end() && chain_id == 0; ++d) {
        const int64_t gap = s->first - d->first;
        if (gap <= 1) break;
        int64_t best = 0;
        for (const auto& [id, c] : chains_) {
          if (taken.count(id) || !movable(c) || !chain_has_member(c, s->second) ||
              chain_has_member(c, d->second)) {
            continue;
          }
          const int64_t w = weight(id);
          if (w < gap && w > best) {
            best = w;
            chain_id = id;
          }
        }
        if (chain_id != 0) {
          from = s->second;
          to = d->second;
        }
      }
    }
    if (chain_id == 0) break;  // balanced, or nothing quiet to move
    taken.insert(chain_id);
    load[from] -= weight(chain_id);
    load[to] += weight(chain_id);
    --budget;
    pb::ChainMoveOfChain r;
    r.set_chain_id(chain_id);
    r.mutable_move()->set_from_target_id(from);
    r.mutable_move()->set_to_target_id(to);
    r.mutable_move()->set_reason(kRebalanceReason);
    out.push_back(r);
    if (dry_run) continue;
    pb::Chain& c = chains_[chain_id];
    *c.add_moves() = r.move();
    auto* nm = c.add_members();
    nm->set_target_id(to);
    nm->set_state(pb::MEMBER_SYNCING);
    nm->set_since_ms(now_ms);
    touch(chain_id);
    SLOG_INFO("chain {}: target {} replaces target {} (rebalance, about {} bytes), syncing",
              chain_id, to, from, weight(chain_id) - 1);
  }
  finish();
  return out;
}

}  // namespace surge::mds
