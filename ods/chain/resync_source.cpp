// ResyncSource: list, compare, send whole, report. See resync_source.h.
#include "ods/chain/resync_source.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "common/log.h"
#include "ods/chain/member_listing.h"
#include "ods/chain/pause_points.h"

namespace surge::ods {
namespace {

namespace pb = proto::ods;
namespace mpb = proto::mds;

constexpr uint32_t kResyncPage = 1024;
constexpr auto kReportEvery = std::chrono::seconds(1);

// The syncing member's copy is ours at `version`: complete, at that
// version, and clean. It syncs at the tail, where every update commits as
// it is stored, so a dirty copy there is left from before it went away
// (an update it took as a middle member, or under a chain version that had
// already moved, that never went on): the same version number need not
// mean the same bytes then, so it is sent whole.
bool holds(const pb::ChunkState& theirs, uint64_t version) {
  return !theirs.incomplete() && theirs.version() == version &&
         theirs.committed_version() == theirs.version();
}

}  // namespace

ResyncSource::ResyncSource(ChunkStore& chunks, ChainView& view, ChainForwarder& forwarder,
                           UpdateOrder& order)
    : chunks_(chunks), view_(view), forwarder_(forwarder), order_(order) {}

ResyncSource::~ResyncSource() { stop(); }

void ResyncSource::start() {
  loop_.start([this](bool) {
    for (const ChainPlace& p : view_.places()) {
      // An EC position is rebuilt from K others, never copied from the
      // member before it (docs/redundancy.md, "Erasure coding").
      if (p.ec || !p.last_serving || p.successor == 0 || !p.successor_syncing) continue;
      auto f = finished_.find(p.chain_id);
      if (f != finished_.end() && f->second == p.version) continue;
      Status st = resync(p);
      if (st.ok()) {
        finished_[p.chain_id] = p.version;
      } else {
        SLOG_WARN("resync of chain {} (version {}) to target {}: {}; trying again", p.chain_id,
                  p.version, p.successor, st.ToString());
      }
      if (loop_.stopping()) break;
    }
    return true;
  });
}

void ResyncSource::stop() {
  loop_.stop();
}

void ResyncSource::poke() {
  loop_.poke();
}

Status ResyncSource::report(const ChainPlace& place, const Progress& p, bool done) {
  mpb::ReportChainSyncRequest req;
  req.set_chain_id(place.chain_id);
  req.set_chain_version(place.version);
  req.set_target_id(place.successor);
  req.set_source_target_id(view_.own_id());
  req.set_chunks_total(p.chunks_total);
  req.set_chunks_done(p.chunks_done);
  req.set_bytes_total(p.bytes_total);
  req.set_bytes_done(p.bytes_done);
  req.set_done(done);
  auto r = view_.report_sync(req);
  if (!r.ok()) return r.status();
  if (done) (void)view_.refresh();
  return Status::OK();
}

Result<std::map<ChunkKey, pb::ChunkState>> ResyncSource::list_theirs(const ChainPlace& place) {
  std::map<ChunkKey, pb::ChunkState> theirs;
  Status st = list_member_chunks(forwarder_, place.successor, place.successor_address,
                                 place.chain_id, place.version, [&](const pb::ChunkState& c) {
                                   theirs[{c.ino(), c.slot(), c.position()}] = c;
                                 });
  if (peer_unreachable(st)) {
    return forwarder_.unreachable(place.successor, place.chain_id, place.version, st);
  }
  SURGE_RETURN_IF_ERROR(st);
  return theirs;
}

Status ResyncSource::resync(const ChainPlace& place) {
  const auto began = std::chrono::steady_clock::now();
  SLOG_INFO("resync of chain {} (version {}) to target {} begins", place.chain_id, place.version,
            place.successor);
  // What the syncing member holds.
  SURGE_ASSIGN_OR_RETURN(auto theirs, list_theirs(place));

  Progress p;
  // What is to send, measured first (without the update orders: an
  // estimate, so the MDS can show bytes left and a rate from the start;
  // the pass below corrects it as it goes).
  {
    std::optional<ChunkKey> from;
    for (;;) {
      SURGE_ASSIGN_OR_RETURN(auto page, chunks_.index().list(place.chain_id, from, kResyncPage));
      for (const auto& [key, rec] : page) {
        auto it = theirs.find(key);
        if (it != theirs.end() && holds(it->second, rec.version)) continue;
        auto size = chunks_.size(rec);
        p.chunks_total++;
        p.bytes_total += size.ok() ? *size : 0;
      }
      if (page.size() < kResyncPage) break;
      from = page.back().first;
    }
    SURGE_RETURN_IF_ERROR(report(place, p, false));
  }
  auto last_report = std::chrono::steady_clock::now();
  auto maybe_report = [&]() -> Status {
    if (std::chrono::steady_clock::now() - last_report < kReportEvery) return Status::OK();
    last_report = std::chrono::steady_clock::now();
    return report(place, p, false);
  };
  // Ours, in key order, each compared and sent under its update order.
  std::optional<ChunkKey> after;
  for (;;) {
    SURGE_ASSIGN_OR_RETURN(auto page, chunks_.index().list(place.chain_id, after, kResyncPage));
    for (const auto& [key, listed] : page) {
      auto order = order_.lock(key);
      SURGE_ASSIGN_OR_RETURN(auto rec, chunks_.index().get(key));
      auto it = theirs.find(key);
      const bool same = rec && it != theirs.end() && holds(it->second, rec->version);
      if (it != theirs.end()) theirs.erase(it);
      if (!rec) continue;  // removed meanwhile (the remove went down the chain)
      if (same) {
        p.unchanged++;
        continue;
      }
      SURGE_ASSIGN_OR_RETURN(uint64_t size, chunks_.size(*rec));
      SURGE_RETURN_IF_ERROR(forwarder_.send_whole(place.chain_id, place.version, place.successor,
                                                  place.successor_address, key, rec));
      p.chunks_done++;
      p.bytes_done += size;
      p.chunks_total = std::max(p.chunks_total, p.chunks_done);
      p.bytes_total = std::max(p.bytes_total, p.bytes_done);
      SURGE_RETURN_IF_ERROR(maybe_report());
    }
    if (page.size() < kResyncPage) break;
    after = page.back().first;
  }
  // What they hold and we do not: gone here, so gone there.
  for (const auto& [key, state] : theirs) {
    auto order = order_.lock(key);
    SURGE_ASSIGN_OR_RETURN(auto rec, chunks_.index().get(key));
    if (rec) continue;  // written meanwhile: it went down the chain
    p.chunks_total = std::max(p.chunks_total, p.chunks_done + 1);
    SURGE_RETURN_IF_ERROR(forwarder_.send_whole(place.chain_id, place.version, place.successor,
                                                place.successor_address, key, std::nullopt));
    p.chunks_done++;
    SURGE_RETURN_IF_ERROR(maybe_report());
  }
  // Never "done" while the member holds a chunk incomplete: the MDS would
  // make it SERVING with it. Every chunk was sent whole to the last piece
  // above, so one incomplete now is a piece of an earlier, cut-short send
  // that arrived late (issue 18: a SERVING member once held one); the next
  // round sends it whole again.
  SURGE_ASSIGN_OR_RETURN(auto after_pass, list_theirs(place));
  for (const auto& [key, state] : after_pass) {
    if (state.incomplete()) {
      return Status::Unavailable("resync of chain " + std::to_string(place.chain_id) +
                                 " (version " + std::to_string(place.version) + ") to target " +
                                 std::to_string(place.successor) + " at " +
                                 place.successor_address + ": " + key.describe() +
                                 " is incomplete there after the pass; not reporting done");
    }
  }
  p.chunks_total = p.chunks_done;
  p.bytes_total = p.bytes_done;
  {
    // Tests hold here a resync that sent something (not the many that
    // find nothing to send), to land a late piece before the MDS hears.
    std::optional<PausePoint> pause;
    if (p.chunks_done > 0) pause.emplace("resync_sent_before_done");
    SURGE_RETURN_IF_ERROR(report(place, p, true));
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  SLOG_INFO(
      "resync of chain {} (version {}) to target {} done: {} chunks sent or removed ({} bytes), "
      "{} unchanged, in {:.3f} s",
      place.chain_id, place.version, place.successor, p.chunks_done, p.bytes_done, p.unchanged,
      secs);
  return Status::OK();
}

}  // namespace surge::ods
