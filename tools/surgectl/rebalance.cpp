// Rebalance: see rebalance.h.
#include "tools/surgectl/rebalance.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tools/surgectl/json_output.h"

namespace surge::tools {

namespace pb = proto::mds;

namespace {

uint32_t rebalance_moves_in_flight(const pb::ClusterMap& m) {
  uint32_t n = 0;
  for (const auto& c : m.chains().chains()) {
    for (const auto& mv : c.moves()) n += mv.reason() == "rebalance";
  }
  return n;
}

std::string move_text(const pb::ChainMoveOfChain& m) {
  return "chain " + std::to_string(m.chain_id()) + ": target " +
         std::to_string(m.move().from_target_id()) + " -> target " +
         std::to_string(m.move().to_target_id());
}

}  // namespace

int rebalance(ClusterAdmin& admin, bool dry_run, uint32_t max_moves, bool wait, bool json) {
  uint32_t started = 0;
  std::vector<pb::ChainMoveOfChain> all;
  for (;;) {
    auto r = admin.rebalance(dry_run, max_moves);
    if (!r.ok()) {
      std::fprintf(stderr, "surgectl: %s\n", r.status().ToString().c_str());
      return 1;
    }
    for (const auto& mv : r->moves()) {
      ++started;
      all.push_back(mv);
      if (!json) {
        std::printf("%s%s\n", dry_run ? "would move " : "moving ", move_text(mv).c_str());
        std::fflush(stdout);
      }
    }
    auto m = admin.cluster_map();
    if (!m.ok()) {
      std::fprintf(stderr, "surgectl: %s\n", m.status().ToString().c_str());
      return 1;
    }
    const uint32_t in_flight = rebalance_moves_in_flight(*m);
    if (!wait || dry_run || (r->moves_size() == 0 && in_flight == 0)) {
      if (json) {
        print_json(rebalance_json(all, in_flight, *m));
        return 0;
      }
      std::string per;
      for (const auto& t : m->targets()) {
        per += (per.empty() ? "" : ", ") + std::to_string(t.target_id()) + ": " +
               std::to_string(t.chain_memberships());
      }
      if (wait && !dry_run) {
        std::printf("balanced: %u moves done; chains per target %s\n", started, per.c_str());
      } else {
        std::printf("%u moves %s, %u in flight; chains per target %s\n", started,
                    dry_run ? "would start" : "started", in_flight, per.c_str());
      }
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

}  // namespace surge::tools
