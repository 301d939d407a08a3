// DrainWait: see drain_wait.h.
#include "tools/surgectl/drain_wait.h"

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "tools/surgectl/chain_report.h"
#include "tools/surgectl/json_output.h"

namespace surge::tools {

namespace pb = proto::mds;

namespace {

struct DrainProgress {
  uint32_t chains = 0;       // chains still listing the target
  uint32_t moving = 0;       // of those, with a replacement syncing
  uint64_t bytes_left = 0;   // reported by the syncing replacements
  uint64_t bytes_per_sec = 0;
  bool operator!=(const DrainProgress& o) const {
    return chains != o.chains || moving != o.moving || bytes_left != o.bytes_left;
  }
};

DrainProgress progress_of(const pb::ClusterMap& m, uint32_t target) {
  DrainProgress p;
  for (const auto& c : m.chains().chains()) {
    bool member = false;
    for (const auto& cm : c.members()) member |= cm.target_id() == target;
    if (!member) continue;
    ++p.chains;
    bool moving = false;
    for (const auto& mv : c.moves()) moving |= mv.from_target_id() == target;
    p.moving += moving;
    for (const auto& s : c.sync()) {
      p.bytes_left += s.bytes_total() > s.bytes_done() ? s.bytes_total() - s.bytes_done() : 0;
      p.bytes_per_sec += s.bytes_per_sec();
    }
  }
  return p;
}

}  // namespace

int wait_drained(ClusterAdmin& admin, uint32_t target_id, bool json) {
  const auto began = std::chrono::steady_clock::now();
  DrainProgress last;
  bool first = true;
  for (;;) {
    auto m = admin.cluster_map();
    if (!m.ok()) {
      std::fprintf(stderr, "surgectl: waiting for target %u to drain: %s\n", target_id,
                   m.status().ToString().c_str());
      return 1;
    }
    const pb::TargetInfo* t = nullptr;
    for (const auto& ti : m->targets()) {
      if (ti.target_id() == target_id) t = &ti;
    }
    if (t == nullptr || !t->draining()) {
      std::fprintf(stderr, "surgectl: target %u is %s: no longer waiting for it to drain\n",
                   target_id, t == nullptr ? "not in the cluster map" : "not draining any more");
      return 1;
    }
    const DrainProgress p = progress_of(*m, target_id);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    if (p.chains == 0) {
      if (json) {
        print_json(drained_json(target_id, secs));
      } else {
        std::printf("target %u (%s) holds no chunk of any chain: drained (%.1f s)\n", target_id,
                    t->address().c_str(), secs);
      }
      return 0;
    }
    if (!json && (first || p != last)) {
      std::printf("target %u: in %u chains, %u moving (%llu MiB left at %llu MiB/s)%s\n",
                  target_id, p.chains, p.moving, static_cast<unsigned long long>(p.bytes_left >> 20),
                  static_cast<unsigned long long>(p.bytes_per_sec >> 20),
                  t->state() == pb::TARGET_DOWN
                      ? "; it is down: its chains move after the MDS's absence time"
                      : "");
      std::fflush(stdout);
    }
    first = false;
    last = p;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

}  // namespace surge::tools
