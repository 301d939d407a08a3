// RollForward: the head's pass over its dirty chunks after a chain change.
// See roll_forward.h.
#include "ods/chain/roll_forward.h"

#include <chrono>

#include "common/log.h"

namespace surge::ods {
namespace {

constexpr size_t kRollForwardPage = 1024;

}  // namespace

RollForward::RollForward(ChunkStore& chunks, ChainView& view, ChainedChunks& chained)
    : chunks_(chunks), view_(view), chained_(chained) {}

RollForward::~RollForward() { stop(); }

void RollForward::start() {
  // A first pass at start; then when poked, and each second while a
  // chain was left not done.
  loop_.start(
      [this](bool) {
        bool again = false;
        for (const ChainPlace& p : view_.places()) {
          // EC chains have no head: each data position sends its own deltas.
          if (p.ec || !p.head) continue;
          auto d = done_.find(p.chain_id);
          if (d != done_.end() && d->second == p.version) continue;
          uint64_t rolled = 0;
          Status st = pass(p, &rolled);
          if (rolled > 0) {
            SLOG_INFO("chain {} (version {}): rolled {} dirty chunks forward to every member",
                      p.chain_id, p.version, rolled);
          }
          if (st.ok()) {
            done_[p.chain_id] = p.version;
          } else {
            SLOG_WARN("rolling the dirty chunks of chain {} (version {}) forward: {}; trying again",
                      p.chain_id, p.version, st.ToString());
            again = true;
          }
          if (loop_.stopping()) break;
        }
        return again;
      },
      true);
}

void RollForward::stop() {
  loop_.stop();
}

void RollForward::poke() {
  loop_.poke();
}

Status RollForward::pass(const ChainPlace& place, uint64_t* rolled) {
  std::optional<ChunkKey> after;
  Status first_error;
  for (;;) {
    SURGE_ASSIGN_OR_RETURN(auto page,
                           chunks_.index().list(place.chain_id, after, kRollForwardPage));
    for (const auto& [key, rec] : page) {
      if (!rec.dirty() || rec.incomplete) continue;
      Result<bool> r = chained_.roll_forward(place, key);
      if (!r.ok()) {
        // StaleChain: the map moved, the next pass runs under it.
        if (r.status().code() == Code::kStaleChain) return r.status();
        if (first_error.ok()) first_error = r.status();
        continue;
      }
      if (*r) ++*rolled;
    }
    if (page.size() < kRollForwardPage) break;
    after = page.back().first;
  }
  return first_error;
}

}  // namespace surge::ods
