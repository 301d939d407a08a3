// EcRebuild: rebuilding this member's position of an EC chain. See
// ec_rebuild.h.
#include "ods/ec/ec_rebuild.h"

#include <sys/uio.h>

#include <algorithm>
#include <optional>
#include <thread>
#include <vector>

#include "common/log.h"
#include "ods/chain/member_listing.h"
#include "ods/ec/group_cut.h"
#include "ods/ec/position_reads.h"

namespace surge::ods {
namespace {

namespace pb = proto::ods;
namespace mpb = proto::mds;

constexpr uint32_t kListPage = 1024;  // local index entries per page
constexpr auto kReportEvery = std::chrono::seconds(1);
// How long writes admitted under a chain version before the listing get to
// end (see run()).
constexpr auto kSettle = std::chrono::seconds(1);
// A parity rebuild starts again when a data chunk moves on between its
// windows.
constexpr int kParityAttempts = 5;
// A pass that failed is tried again after this long, doubling to the
// most (a rebuild that waits for a position to return is not retried
// every second).
constexpr auto kRetryFirst = std::chrono::seconds(1);
constexpr auto kRetryMost = std::chrono::seconds(16);

std::string target_text(const ChainPlace& place, uint32_t position) {
  const auto& m = place.ec_members[position];
  return "target " + std::to_string(m.target_id) + " at " + m.address;
}

// Why a rebuild of place's own position cannot start: which others do not
// serve.
Status too_few_serve(const ChainPlace& place, size_t serving) {
  std::string absent;
  for (uint32_t i = 0; i < place.ec_data + place.ec_parity; ++i) {
    if (i == place.ec_position || place.ec_members[i].state == mpb::MEMBER_SERVING) continue;
    absent += (absent.empty() ? "" : ", ") + std::to_string(i) + " (" + target_text(place, i) + ")";
  }
  return Status::Unavailable("only " + std::to_string(serving) + " other positions serve, " +
                             std::to_string(place.ec_data) + " needed; not serving: " + absent);
}

}  // namespace

EcRebuild::EcRebuild(ChainedChunks& chained, ChainView& view, ChainForwarder& forwarder,
                     CodecOf codec, std::function<void(const ChunkKey&)> rebuilt,
                     LaggingParity& lagging)
    : chained_(chained),
      view_(view),
      forwarder_(forwarder),
      codec_(std::move(codec)),
      on_rebuilt_(std::move(rebuilt)),
      lagging_(lagging) {}

EcRebuild::~EcRebuild() {
  stop();
}

void EcRebuild::start() {
  loop_.start([this](bool) {
    round();
    return true;
  });
}

void EcRebuild::stop() {
  loop_.stop();
}

void EcRebuild::poke() {
  loop_.poke();
}

bool EcRebuild::rebuilt(const ChainPlace& place, const ChunkKey& key) {
  std::lock_guard lk(syncs_mu_);
  auto it = syncs_.find(place.chain_id);
  return it != syncs_.end() && it->second.version == place.version &&
         it->second.rebuilt.count(key) != 0;
}

EcRebuild::Sync& EcRebuild::sync_of(const ChainPlace& place) {
  Sync& s = syncs_[place.chain_id];
  if (s.version != place.version) s = Sync{place.version, {}, {}, false};
  return s;
}

void EcRebuild::mark(const ChainPlace& place, const ChunkKey& key) {
  std::lock_guard lk(syncs_mu_);
  Sync& s = sync_of(place);
  s.rebuilt.insert(key);
  s.deferred.erase(key);
}

bool EcRebuild::defer(const ChainPlace& place, const ChunkKey& key) {
  std::lock_guard lk(syncs_mu_);
  Sync& s = sync_of(place);
  if (s.closing) return false;
  s.rebuilt.erase(key);
  s.deferred.insert(key);
  return true;
}

Status EcRebuild::rebuild_deferred(const ChainPlace& place) {
  for (;;) {
    std::optional<ChunkKey> next;
    {
      std::lock_guard lk(syncs_mu_);
      Sync& s = sync_of(place);
      if (s.deferred.empty()) {
        s.closing = true;
        return Status::OK();
      }
      next = *s.deferred.begin();
    }
    auto order = chained_.order().lock(*next);
    {
      std::lock_guard lk(syncs_mu_);
      if (sync_of(place).deferred.count(*next) == 0) continue;  // rebuilt meanwhile
    }
    SURGE_RETURN_IF_ERROR(rebuild_one(place, *next).status());
  }
}

Status EcRebuild::rebuild(const ChainPlace& place, const ChunkKey& key) {
  return rebuild_one(place, key).status();
}

Result<EcRebuild::Rebuilt> EcRebuild::rebuild_one(const ChainPlace& place, const ChunkKey& key) {
  const std::string what = "rebuild of " + key.describe() + " of EC chain " +
                           std::to_string(place.chain_id) + " on target " +
                           std::to_string(view_.own_id());
  SURGE_RETURN_IF_ERROR(chained_.still_current(place, what));
  const bool parity = place.ec_position >= place.ec_data;
  auto done = parity ? rebuild_parity(place, key) : rebuild_data(place, key);
  if (!done.ok()) return done.status().WithContext(what);
  if (!done->kept) on_rebuilt_(key);
  mark(place, key);
  return done;
}

Result<EcRebuild::Rebuilt> EcRebuild::rebuild_parity(const ChainPlace& place, const ChunkKey& key) {
  const uint32_t k = place.ec_data, n = k + place.ec_parity, p = place.ec_position;
  // The code of the K data chunks, read where they serve; while one does
  // not, its bytes come from the other parity positions (any K copies of a
  // consistent cut determine the group).
  std::vector<uint32_t> sources;
  for (uint32_t q = 0; q < k; ++q) {
    if (place.ec_members[q].state == mpb::MEMBER_SERVING) sources.push_back(q);
  }
  if (sources.size() < k) {
    for (uint32_t i = k; i < n; ++i) {
      if (i != p && place.ec_members[i].state == mpb::MEMBER_SERVING) sources.push_back(i);
    }
  }
  if (sources.size() < k) return too_few_serve(place, sources.size());
  SURGE_ASSIGN_OR_RETURN(const ec::RsCodec* rs, codec_(place));
  ChunkStore& chunks = chained_.chunks();
  const pb::ChunkRef ref = ref_in_chain(place, key);
  PositionBuffers bufs = position_buffers(place);
  for (int attempt = 0; attempt < kParityAttempts; ++attempt) {
    SURGE_ASSIGN_OR_RETURN(GroupCut cut,
                           read_cut(forwarder_, place, key, *rs, sources, 0, std::nullopt, bufs));
    const std::vector<uint64_t> versions = cut.versions;
    SURGE_ASSIGN_OR_RETURN(auto found, chained_.record(key, ref, false));
    if (found && !found->incomplete && !found->dirty() && found->applied_count == k &&
        std::equal(versions.begin(), versions.end(), found->applied.begin())) {
      // Held here already as the code of exactly those versions (a member
      // back from a restart during which nothing was written to the group).
      return Rebuilt{0, true};
    }
    if (std::all_of(versions.begin(), versions.end(), [](uint64_t v) { return v == 0; })) {
      // No data chunk of the group: nothing to hold.
      if (found) SURGE_RETURN_IF_ERROR(chunks.remove(key, *found, false));
      return Rebuilt{};
    }
    SURGE_ASSIGN_OR_RETURN(found, chained_.record(key, ref, true));
    ChunkRecord rec = chained_.begin_life(*found);
    // Incomplete while the bytes change: no reader sees them, and a crash
    // leaves the chunk for the next sync (which starts with nothing rebuilt).
    rec.incomplete = true;
    SURGE_RETURN_IF_ERROR(chunks.index().put(key, rec, false));
    SURGE_RETURN_IF_ERROR(chunks.objects().truncate(rec.object_id, 0));
    uint64_t off = 0;
    bool steady = true;
    while (cut.length > 0) {
      iovec seg{bufs[p].data(), cut.length};
      auto wrote = chunks.objects().write(rec.object_id, off, {&seg, 1}, false);
      if (!wrote.ok()) return wrote.status();
      off += cut.length;
      if (cut.length < kCutWindow) break;
      SURGE_ASSIGN_OR_RETURN(
          cut, read_cut(forwarder_, place, key, *rs, sources, off, std::nullopt, bufs));
      // A data chunk that moved on between windows: read it all again.
      steady = cut.versions == versions;
      if (!steady) break;
    }
    if (!steady) continue;
    rec.incomplete = false;
    rec.version += 1;
    rec.committed_version = rec.version;
    rec.applied_count = k;
    rec.applied = {};
    for (uint32_t q = 0; q < k; ++q) {
      rec.applied[q] = versions[q];
      rec.applied_truncate[q] = cut.truncates[q];
    }
    SURGE_RETURN_IF_ERROR(chunks.index().put(key, rec, false));
    SURGE_RETURN_IF_ERROR(chunks.sync(key, rec));
    chained_.waits().changed();
    return Rebuilt{off, false};
  }
  return Status::Unavailable("the data chunks kept changing while read (" +
                             std::to_string(kParityAttempts) + " times)");
}

Result<EcRebuild::Rebuilt> EcRebuild::rebuild_data(const ChainPlace& place, const ChunkKey& key,
                                                   bool rolled) {
  const uint32_t k = place.ec_data, n = k + place.ec_parity, p = place.ec_position;
  std::vector<uint32_t> sources;
  for (uint32_t i = 0; i < n; ++i) {
    if (i != p && place.ec_members[i].state == mpb::MEMBER_SERVING) sources.push_back(i);
  }
  if (sources.size() < k) return too_few_serve(place, sources.size());
  SURGE_ASSIGN_OR_RETURN(const ec::RsCodec* rs, codec_(place));
  ChunkStore& chunks = chained_.chunks();
  const pb::ChunkRef ref = ref_in_chain(place, key);
  PositionBuffers bufs = position_buffers(place);
  std::optional<uint64_t> target;  // the version every parity copy names for p
  uint64_t truncated = 0;          // the truncate generation p had applied, as parity knows it
  std::optional<ChunkRecord> rec;
  uint64_t off = 0;
  for (;;) {
    SURGE_ASSIGN_OR_RETURN(GroupCut cut,
                           read_cut(forwarder_, place, key, *rs, sources, off, target, bufs));
    if (cut.names.size() > 1) {
      // A write of p was under way when it was lost: its delta reached
      // some parity positions only. p's bytes at the newer version are in
      // the group (the data position stores before it sends), so the
      // update is completed: the others are sent its delta, rebuilt from
      // both versions, and the chunk is rebuilt again at the newer one.
      if (rolled || target) {
        return Status::Unavailable("parity positions still name " +
                                   std::to_string(cut.names.size()) + " versions of position " +
                                   std::to_string(p) + " after the missing delta was sent");
      }
      SURGE_RETURN_IF_ERROR(lagging_.roll_forward(place, key, sources, cut.names));
      return rebuild_data(place, key, true);
    }
    if (!target) {
      target = cut.version;
      truncated = cut.truncated;
    }
    if (!rec) {
      SURGE_ASSIGN_OR_RETURN(auto held, chained_.record(key, ref, false));
      if (*target == 0) {
        // p never written (or its chunk's life ended): nothing to hold.
        if (held) SURGE_RETURN_IF_ERROR(chunks.remove(key, *held, false));
        return Rebuilt{};
      }
      if (held && !held->incomplete && !held->dirty() && held->version == *target) {
        // Held here already at the version the parity names (a member back
        // from a restart; its bytes of that version were stored before the
        // parity was sent their delta). Not a dirty copy: its last update
        // may have reached no parity position, and a stand-in may have
        // given the same version to other bytes while it was down.
        held->committed_version = held->version;
        SURGE_RETURN_IF_ERROR(chunks.index().put(key, *held, false));
        return Rebuilt{0, true};
      }
      SURGE_ASSIGN_OR_RETURN(auto found, chained_.record(key, ref, true));
      rec = chained_.begin_life(*found);
      rec->incomplete = true;
      SURGE_RETURN_IF_ERROR(chunks.index().put(key, *rec, false));
      SURGE_RETURN_IF_ERROR(chunks.objects().truncate(rec->object_id, 0));
    }
    if (cut.length == 0) break;
    iovec seg{bufs[p].data(), cut.length};
    auto wrote = chunks.objects().write(rec->object_id, off, {&seg, 1}, false);
    if (!wrote.ok()) return wrote.status();
    off += cut.length;
    if (cut.length < kCutWindow) break;
  }
  rec->incomplete = false;
  rec->version = rec->committed_version = *target;
  rec->applied_count = 0;
  // The bytes are those it held at that version, cut or not, and so is its
  // generation as the parity knows it (not this copy's, which may be of a
  // later update the parity never got): a truncate it had not applied cuts
  // it when the MDS or a write brings it.
  rec->truncate_seq = truncated;
  SURGE_RETURN_IF_ERROR(chunks.index().put(key, *rec, false));
  SURGE_RETURN_IF_ERROR(chunks.sync(key, *rec));
  chained_.waits().changed();
  return Rebuilt{off, false};
}

void EcRebuild::round() {
  using Clock = std::chrono::steady_clock;
  auto failed = [&](const ChainPlace& place, const Status& st) {
    auto r = retry_.find(place.chain_id);
    const Clock::duration wait = r == retry_.end()
                                     ? Clock::duration(kRetryFirst)
                                     : std::min<Clock::duration>(r->second.second * 2, kRetryMost);
    retry_[place.chain_id] = {Clock::now() + wait, wait};
    SLOG_WARN(
        "rebuild of position {} of EC chain {} (version {}) on target {}: {}; trying again "
        "in {} s",
        place.ec_position, place.chain_id, place.version, view_.own_id(), st.ToString(),
        std::chrono::duration_cast<std::chrono::seconds>(wait).count());
  };
  const auto now = Clock::now();
  std::vector<std::pair<ChainPlace, Keys>> due;
  for (const ChainPlace& place : view_.places()) {
    if (!place.ec || place.state != mpb::MEMBER_SYNCING) continue;
    auto f = finished_.find(place.chain_id);
    if (f != finished_.end() && f->second == place.version) continue;
    auto r = retry_.find(place.chain_id);
    if (r != retry_.end() && now < r->second.first) continue;
    SLOG_INFO("rebuild of position {} of EC chain {} (version {}) on target {} begins",
              place.ec_position, place.chain_id, place.version, view_.own_id());
    auto keys = list_others(place);
    if (keys.ok()) {
      due.emplace_back(place, std::move(*keys));
    } else {
      failed(place, keys.status());
    }
  }
  // Listing made every member reached take these chain versions: writes
  // admitted under the versions before, whose deltas did not come here,
  // end before the passes read what they wrote.
  if (!due.empty()) std::this_thread::sleep_for(kSettle);
  for (const auto& [place, keys] : due) {
    Status st = pass(place, keys);
    if (st.ok()) {
      finished_[place.chain_id] = place.version;
      retry_.erase(place.chain_id);
    } else {
      failed(place, st);
    }
    if (loop_.stopping()) break;
  }
}

Result<EcRebuild::Keys> EcRebuild::list_others(const ChainPlace& place) {
  Keys keys;
  for (uint32_t i = 0; i < place.ec_members.size(); ++i) {
    const auto& m = place.ec_members[i];
    if (i == place.ec_position || m.state != mpb::MEMBER_SERVING) continue;
    SURGE_RETURN_IF_ERROR(
        list_member_chunks(forwarder_, m.target_id, m.address, place.chain_id, place.version,
                           [&](const pb::ChunkState& c) { keys.emplace(c.ino(), c.slot()); }));
  }
  return keys;
}

Status EcRebuild::report(const ChainPlace& place, const Progress& p, bool done) {
  mpb::ReportChainSyncRequest req;
  req.set_chain_id(place.chain_id);
  req.set_chain_version(place.version);
  req.set_target_id(view_.own_id());
  req.set_source_target_id(view_.own_id());
  req.set_chunks_total(p.chunks_total);
  req.set_chunks_done(p.chunks_done);
  req.set_bytes_total(p.bytes_done);
  req.set_bytes_done(p.bytes_done);
  req.set_done(done);
  auto r = view_.report_sync(req);
  if (!r.ok()) return r.status();
  if (done) (void)view_.refresh();
  return Status::OK();
}

Status EcRebuild::pass(const ChainPlace& place, const Keys& keys) {
  const auto began = std::chrono::steady_clock::now();
  const uint32_t pos = place.ec_position;
  Progress p;
  p.chunks_total = keys.size();
  {
    std::lock_guard lk(syncs_mu_);
    sync_of(place).closing = false;  // a pass before this one may have failed while closing
  }
  SURGE_RETURN_IF_ERROR(report(place, p, false));
  auto last_report = std::chrono::steady_clock::now();
  auto rebuild_all = [&](const Keys& of) -> Status {
    for (const auto& [ino, slot] : of) {
      if (&of != &keys && keys.count({ino, slot}) != 0) continue;  // the first pass's
      const ChunkKey key{ino, slot, pos};
      auto order = chained_.order().lock(key);
      if (!rebuilt(place, key)) {
        SURGE_ASSIGN_OR_RETURN(Rebuilt r, rebuild_one(place, key));
        p.bytes_done += r.bytes;
        p.kept += r.kept ? 1 : 0;
      }
      p.chunks_done++;
      p.chunks_total = std::max(p.chunks_total, p.chunks_done);
      if (std::chrono::steady_clock::now() - last_report >= kReportEvery) {
        last_report = std::chrono::steady_clock::now();
        SURGE_RETURN_IF_ERROR(report(place, p, false));
      }
    }
    return Status::OK();
  };
  SURGE_RETURN_IF_ERROR(rebuild_all(keys));
  // Chunks held here that no other member holds: their file went while
  // this member was away (one made meanwhile is rebuilt already). Only
  // when every other position serves: a chunk set may be held by one
  // that does not, and this copy may be all that covers it.
  uint64_t dropped = 0;
  bool all_serve = true;
  for (uint32_t i = 0; i < place.ec_members.size(); ++i) {
    all_serve = all_serve && (i == pos || place.ec_members[i].state == mpb::MEMBER_SERVING);
  }
  std::optional<ChunkKey> after;
  while (all_serve) {
    SURGE_ASSIGN_OR_RETURN(auto page,
                           chained_.chunks().index().list(place.chain_id, after, kListPage));
    for (const auto& [key, listed] : page) {
      if (key.position != pos || keys.count({key.ino, key.slot}) != 0) continue;
      auto order = chained_.order().lock(key);
      if (rebuilt(place, key)) continue;
      SURGE_ASSIGN_OR_RETURN(auto rec, chained_.chunks().index().get(key));
      if (!rec) continue;
      SURGE_RETURN_IF_ERROR(chained_.chunks().remove(key, *rec, false));
      dropped++;
    }
    if (page.size() < kListPage) break;
    after = page.back().first;
  }
  // Chunks made while the pass ran, and those deltas left to it.
  SURGE_ASSIGN_OR_RETURN(auto again, list_others(place));
  SURGE_RETURN_IF_ERROR(rebuild_all(again));
  SURGE_RETURN_IF_ERROR(rebuild_deferred(place));
  p.chunks_total = p.chunks_done;
  SURGE_RETURN_IF_ERROR(report(place, p, true));
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  SLOG_INFO(
      "rebuild of position {} of EC chain {} (version {}) on target {} done: {} chunks, {} of them "
      "current here already, {} bytes rebuilt, {} dropped, in {:.3f} s",
      pos, place.chain_id, place.version, view_.own_id(), p.chunks_done, p.kept, p.bytes_done,
      dropped, secs);
  return Status::OK();
}

}  // namespace surge::ods
