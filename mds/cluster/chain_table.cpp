// ChainTable implementation; see chain_table.h and docs/redundancy.md.
#include "mds/cluster/chain_table.h"

#include <algorithm>
#include <tuple>

#include "common/log.h"
#include "mds/namespace/keys.h"

namespace surge::mds {

namespace pb = proto::mds;

namespace {

bool in_write_chain(const pb::ChainMember& m) {
  return m.state() == pb::MEMBER_SERVING || m.state() == pb::MEMBER_SYNCING;
}

int count_state(const pb::Chain& c, pb::ChainMemberState s) {
  int n = 0;
  for (const auto& m : c.members()) n += m.state() == s;
  return n;
}

pb::ChainMember* member_of(pb::Chain& c, uint32_t target) {
  for (auto& m : *c.mutable_members()) {
    if (m.target_id() == target) return &m;
  }
  return nullptr;
}

void erase_member(pb::Chain& c, uint32_t target) {
  auto* ms = c.mutable_members();
  for (int i = 0; i < ms->size(); ++i) {
    if (ms->Get(i).target_id() == target) {
      ms->DeleteSubrange(i, 1);
      return;
    }
  }
}

// Moves a replicated chain's member to the end of the list (the tail).
void move_to_tail(pb::Chain& c, uint32_t target) {
  pb::ChainMember m = *member_of(c, target);
  erase_member(c, target);
  *c.add_members() = m;
}

bool is_move_target(const pb::Chain& c, uint32_t target) {
  for (const auto& mv : c.moves()) {
    if (mv.to_target_id() == target) return true;
  }
  return false;
}

std::string ids_text(const std::vector<uint32_t>& v) {
  std::string s;
  for (uint32_t id : v) {
    if (!s.empty()) s += ',';
    s += std::to_string(id);
  }
  return s;
}

std::vector<uint32_t> member_ids(const pb::Chain& c) {
  std::vector<uint32_t> v;
  for (const auto& m : c.members()) v.push_back(m.target_id());
  return v;
}

}  // namespace

bool ChainShape::operator<(const ChainShape& o) const {
  return std::tie(scheme, replicas, ec_data, ec_parity) <
         std::tie(o.scheme, o.replicas, o.ec_data, o.ec_parity);
}

bool ChainShape::matches(const pb::Chain& c) const {
  if (c.scheme() != scheme) return false;
  if (scheme == pb::SCHEME_EC) return c.ec_data() == ec_data && c.ec_parity() == ec_parity;
  return c.replicas() == replicas;
}

std::string ChainShape::describe() const {
  if (scheme == pb::SCHEME_EC) {
    return "ec " + std::to_string(ec_data) + "+" + std::to_string(ec_parity);
  }
  return "replicas " + std::to_string(replicas);
}

Status ChainTable::load(KvStore* kv) {
  // Loading again (another MDS changed the table) starts from the store;
  // resync progress and placement rotation are this MDS's and stay.
  chains_.clear();
  dirty_.clear();
  pending_.clear();
  meta_dirty_ = false;
  version_ = 0;
  next_id_ = 1;
  SURGE_ASSIGN_OR_RETURN(auto ver, kv->get(Space::kSystem, keys::kChainVersion));
  if (ver && ver->size() == 8) version_ = keys::get_be64(*ver);
  SURGE_ASSIGN_OR_RETURN(auto hwm, kv->get(Space::kSystem, keys::kChainHwm));
  if (hwm && hwm->size() == 4) next_id_ = keys::get_be32(*hwm);
  Status bad;
  SURGE_RETURN_IF_ERROR(kv->scan(Space::kSystem, keys::kChainPrefix, keys::kChainEnd,
                                 [&](std::string_view k, std::string_view v) {
                                   pb::Chain c;
                                   if (!c.ParseFromArray(v.data(), static_cast<int>(v.size())) ||
                                       c.chain_id() == 0) {
                                     const uint32_t id = k.size() == keys::kChainPrefix.size() + 4
                                                             ? keys::get_be32(k.substr(2))
                                                             : 0;
                                     bad = Status::Corruption("unreadable record of chain " +
                                                              std::to_string(id));
                                     return false;
                                   }
                                   chains_[c.chain_id()] = std::move(c);
                                   return true;
                                 }));
  SURGE_RETURN_IF_ERROR(bad);
  for (const auto& [id, c] : chains_) {
    if (id >= next_id_) next_id_ = id + 1;
    if (c.version() > version_) version_ = c.version();
  }
  return Status::OK();
}

void ChainTable::persist(KvBatch& b) {
  for (uint32_t id : dirty_) {
    auto it = chains_.find(id);
    if (it == chains_.end()) {
      b.del(Space::kSystem, keys::chain(id));
      continue;
    }
    pb::Chain stored = it->second;
    stored.clear_health();  // derived
    stored.clear_sync();    // reported, in memory only
    b.put(Space::kSystem, keys::chain(id), stored.SerializeAsString());
  }
  std::string v;
  keys::put_be64(v, version_);
  b.put(Space::kSystem, std::string(keys::kChainVersion), v);
  std::string h;
  keys::put_be32(h, next_id_);
  b.put(Space::kSystem, std::string(keys::kChainHwm), h);
  dirty_.clear();
  meta_dirty_ = false;
}

void ChainTable::touch(uint32_t chain_id) {
  pending_.insert(chain_id);
  dirty_.insert(chain_id);
}

void ChainTable::finish() {
  if (pending_.empty()) return;
  ++version_;
  for (uint32_t id : pending_) {
    auto it = chains_.find(id);
    if (it == chains_.end()) continue;
    pb::Chain& c = it->second;
    c.set_version(version_);
    // From this version on writes can land (K serve): a member away misses them.
    if (c.scheme() == pb::SCHEME_EC &&
        count_state(c, pb::MEMBER_SERVING) >= static_cast<int>(c.ec_data())) {
      for (auto& m : *c.mutable_members()) {
        if (m.state() == pb::MEMBER_OFFLINE) m.set_current_while_away(false);
      }
    }
  }
  pending_.clear();
  meta_dirty_ = true;
}

pb::Chain ChainTable::shipped(const pb::Chain& c) const {
  pb::Chain out = c;
  const int serving = count_state(c, pb::MEMBER_SERVING);
  const int syncing = count_state(c, pb::MEMBER_SYNCING);
  const bool ec = c.scheme() == pb::SCHEME_EC;
  const int wanted = static_cast<int>(ec ? c.ec_data() + c.ec_parity() : c.replicas());
  const int needed = ec ? static_cast<int>(c.ec_data()) : 1;
  pb::ChainHealth h = pb::CHAIN_HEALTHY;
  if (serving < needed) {
    h = pb::CHAIN_UNAVAILABLE;
  } else if (syncing > 0) {
    bool rebuild = false;
    for (const auto& m : c.members()) {
      if (m.state() == pb::MEMBER_SYNCING && is_move_target(c, m.target_id())) rebuild = true;
    }
    h = rebuild ? pb::CHAIN_REBUILDING : pb::CHAIN_RESYNCING;
  } else if (serving < wanted) {
    h = pb::CHAIN_DEGRADED;
  }
  out.set_health(h);
  auto s = sync_.find(c.chain_id());
  if (s != sync_.end()) {
    for (const auto& [target, p] : s->second) *out.add_sync() = p;
  }
  return out;
}

void ChainTable::fill(pb::ChainTable* out) const {
  out->set_version(version_);
  for (const auto& [id, c] : chains_) *out->add_chains() = shipped(c);
}

const pb::Chain* ChainTable::find(uint32_t chain_id) const {
  auto it = chains_.find(chain_id);
  return it == chains_.end() ? nullptr : &it->second;
}

Result<bool> ChainTable::form(const ChainShape& shape, const std::vector<uint32_t>& target_ids,
                              uint64_t now_ms) {
  std::vector<uint32_t> t = target_ids;
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  const uint32_t n = static_cast<uint32_t>(t.size());
  const uint32_t w = shape.width();
  if (w == 0) return Status::InvalidArgument("chains of " + shape.describe() + ": width 0");
  if (n < w) {
    return Status::NoSpace("chains of " + shape.describe() + " need " + std::to_string(w) +
                           " data servers, " + std::to_string(n) + " registered");
  }
  const uint32_t strides = w == 1 ? 1 : std::max<uint32_t>(1, std::min(opts_.strides, (n - 1) / (w - 1)));
  std::vector<std::vector<uint32_t>> want;
  for (uint32_t k = 1; k <= strides; ++k) {
    for (uint32_t i = 0; i < n; ++i) {
      std::vector<uint32_t> members;
      for (uint32_t j = 0; j < w; ++j) members.push_back(t[(i + j * k) % n]);
      want.push_back(std::move(members));
    }
  }
  // Match wanted chains to existing ones of the shape by member set, each
  // existing chain at most once.
  std::vector<uint32_t> unmatched;
  std::map<std::vector<uint32_t>, std::vector<uint32_t>> existing;  // sorted members -> ids
  for (const auto& [id, c] : chains_) {
    if (!shape.matches(c)) continue;
    std::vector<uint32_t> key = member_ids(c);
    std::sort(key.begin(), key.end());
    existing[key].push_back(id);
  }
  std::set<uint32_t> matched;
  bool changed = false;
  for (const auto& members : want) {
    std::vector<uint32_t> key = members;
    std::sort(key.begin(), key.end());
    auto it = existing.find(key);
    if (it != existing.end() && !it->second.empty()) {
      matched.insert(it->second.back());
      it->second.pop_back();
      continue;
    }
    pb::Chain c;
    c.set_chain_id(next_id_++);
    c.set_scheme(shape.scheme);
    if (shape.scheme == pb::SCHEME_EC) {
      c.set_ec_data(shape.ec_data);
      c.set_ec_parity(shape.ec_parity);
    } else {
      c.set_replicas(shape.replicas);
    }
    c.set_placement(true);
    for (uint32_t id : members) {
      auto* m = c.add_members();
      m->set_target_id(id);
      m->set_state(pb::MEMBER_SERVING);
      m->set_since_ms(now_ms);
    }
    const uint32_t cid = c.chain_id();
    chains_[cid] = std::move(c);
    matched.insert(cid);
    touch(cid);
    changed = true;
  }
  for (auto& [id, c] : chains_) {
    if (!shape.matches(c)) continue;
    const bool keep = matched.count(id) != 0;
    if (c.placement() != keep) {
      c.set_placement(keep);
      touch(id);
      changed = true;
    }
  }
  if (changed) {
    meta_dirty_ = true;
    finish();
    SLOG_INFO("chains of {} formed over targets {}: {} chains, table version {}", shape.describe(),
              ids_text(t), matched.size(), version_);
  }
  return changed;
}

bool ChainTable::has_shape(const ChainShape& shape) const {
  for (const auto& [id, c] : chains_) {
    if (shape.matches(c)) return true;
  }
  return false;
}

bool ChainTable::reform_all(const std::vector<uint32_t>& target_ids, uint64_t now_ms) {
  std::set<ChainShape> shapes;
  for (const auto& [id, c] : chains_) {
    ChainShape s;
    s.scheme = c.scheme();
    s.replicas = c.replicas();
    s.ec_data = c.ec_data();
    s.ec_parity = c.ec_parity();
    shapes.insert(s);
  }
  bool changed = false;
  for (const auto& s : shapes) {
    auto r = form(s, target_ids, now_ms);
    if (r.ok() && *r) changed = true;
  }
  return changed;
}

uint32_t ChainTable::memberships(uint32_t target_id) const {
  uint32_t n = 0;
  for (const auto& [id, c] : chains_) n += chain_has_member(c, target_id);
  return n;
}

std::vector<uint32_t> ChainTable::chains_of(uint32_t target_id) const {
  std::vector<uint32_t> v;
  for (const auto& [id, c] : chains_) {
    if (chain_has_member(c, target_id)) v.push_back(id);
  }
  return v;
}

uint32_t ChainTable::replacement_for(const pb::Chain& c, const std::map<uint32_t, TargetView>& t,
                                     std::map<uint32_t, uint32_t>& extra) const {
  uint32_t best = 0;
  std::tuple<uint32_t, uint64_t> best_key{};
  for (const auto& [id, v] : t) {
    if (!v.can_join() || chain_has_member(c, id)) continue;
    const uint32_t load = memberships(id) + extra[id];
    // fewest memberships first, then most free space
    std::tuple<uint32_t, uint64_t> key{load, ~v.free_bytes};
    if (best == 0 || key < best_key) {
      best = id;
      best_key = key;
    }
  }
  if (best != 0) ++extra[best];
  return best;
}

bool ChainTable::reconcile_chain(pb::Chain& c, const std::map<uint32_t, TargetView>& t,
                                 std::map<uint32_t, uint32_t>& extra, uint64_t now_ms) {
  auto alive = [&](uint32_t id) {
    auto it = t.find(id);
    return it != t.end() && it->second.alive;
  };
  auto heard = [&](uint32_t id) {
    auto it = t.find(id);
    return it != t.end() && it->second.alive && it->second.heard;
  };
  auto draining = [&](uint32_t id) {
    auto it = t.find(id);
    return it != t.end() && it->second.draining;
  };
  const bool ec = c.scheme() == pb::SCHEME_EC;
  const uint32_t cid = c.chain_id();
  bool changed = false;

  // 1. Members of dead targets leave the write chain. A replacement that
  // dies before it served leaves the chain altogether.
  for (auto& m : *c.mutable_members()) {
    if (!in_write_chain(m) || alive(m.target_id())) continue;
    if (m.state() == pb::MEMBER_SERVING && count_state(c, pb::MEMBER_SERVING) == 1) {
      c.set_last_serving_target(m.target_id());
    }
    const bool was_serving = m.state() == pb::MEMBER_SERVING;
    SLOG_WARN("chain {}: target {} is down, {} -> offline", cid, m.target_id(),
              was_serving ? "serving" : "syncing");
    m.set_state(pb::MEMBER_OFFLINE);
    m.set_since_ms(now_ms);
    // A syncing one held part of the data only. Cleared by finish() if K
    // still serve, or serve again while it is away.
    m.set_current_while_away(ec && was_serving);
    sync_[cid].erase(m.target_id());
    changed = true;
  }
  // A SYNCING member holds only part of the chain's data, and only a
  // SERVING member can bring it the rest. With none left it must not stay
  // in the write chain: it would become the head and take writes alone,
  // and its returning source would then drop those as resends (their
  // versions are below its own) and never resync it. It waits OFFLINE
  // like the others until the last member to serve is back.
  if (!ec && count_state(c, pb::MEMBER_SERVING) == 0) {
    for (auto& m : *c.mutable_members()) {
      if (m.state() != pb::MEMBER_SYNCING) continue;
      SLOG_WARN("chain {}: target {} was syncing but no member serves: syncing -> offline", cid,
                m.target_id());
      m.set_state(pb::MEMBER_OFFLINE);
      m.set_since_ms(now_ms);
      sync_[cid].erase(m.target_id());
      changed = true;
    }
  }
  if (!ec) {
    for (int i = c.moves_size() - 1; i >= 0; --i) {
      const uint32_t to = c.moves(i).to_target_id();
      pb::ChainMember* m = member_of(c, to);
      if (m == nullptr || m->state() == pb::MEMBER_OFFLINE) {
        if (m != nullptr) erase_member(c, to);
        c.mutable_moves()->DeleteSubrange(i, 1);
        changed = true;
      }
    }
  }

  // 2. Nobody serves: only the last member to serve may come back serving.
  if (count_state(c, pb::MEMBER_SERVING) == 0) {
    uint32_t back = 0;
    if (c.last_serving_target() != 0 && heard(c.last_serving_target())) {
      back = c.last_serving_target();
    } else if (c.last_serving_target() == 0 || member_of(c, c.last_serving_target()) == nullptr) {
      // No record of who served last (it left the chain): the first alive
      // member is the best copy there is.
      for (const auto& m : c.members()) {
        if (heard(m.target_id())) {
          back = m.target_id();
          break;
        }
      }
    }
    if (back != 0) {
      pb::ChainMember* m = member_of(c, back);
      m->set_state(pb::MEMBER_SERVING);
      m->set_since_ms(now_ms);
      c.set_last_serving_target(0);
      if (!ec) move_to_tail(c, back);  // the others follow it as they return
      SLOG_INFO("chain {}: target {} serves again (it was the last to serve)", cid, back);
      changed = true;
    }
  }
  if (count_state(c, pb::MEMBER_SERVING) == 0) return changed;

  // 2b. An EC chain with fewer than K members serving can rebuild nobody
  // (a rebuild reads K others), so members returning one at a time would
  // wait for each other for good (a whole cluster stopped and started).
  // A returning data member is taken back as it is, unless a stand-in took
  // writes of its position meanwhile (stood_in, MdsNoteStandIn): otherwise
  // nothing is written to a data position while its member is away
  // (truncates wait for it), so what it holds is current but for an
  // update under way when it went, which its next write completes. Parity
  // members missed the deltas of writes meanwhile, unless none could land
  // since they went (current_while_away: the data servers take no write
  // with fewer than K serving); the others sync once K serve.
  if (ec && c.moves_size() == 0 &&
      count_state(c, pb::MEMBER_SERVING) < static_cast<int>(c.ec_data())) {
    for (int i = 0; i < c.members_size(); ++i) {
      pb::ChainMember* m = c.mutable_members(i);
      const bool data = i < static_cast<int>(c.ec_data());
      if (m->state() != pb::MEMBER_OFFLINE || !heard(m->target_id())) continue;
      if (!m->current_while_away() && (!data || m->stood_in())) continue;
      m->set_state(pb::MEMBER_SERVING);
      m->set_since_ms(now_ms);
      SLOG_INFO(
          "chain {}: target {} is back and serves {} position {} as it is (fewer than {} "
          "positions serve, so none can be rebuilt{})",
          cid, m->target_id(), data ? "data" : "parity", i, c.ec_data(),
          m->current_while_away() ? ", and none could take a write since it went" : "");
      changed = true;
    }
  }

  // 3. Finished moves: the newcomer serves, so the member it replaces goes.
  for (int i = c.moves_size() - 1; i >= 0; --i) {
    const pb::ChainMove& mv = c.moves(i);
    const pb::ChainMember* to = member_of(c, mv.to_target_id());
    if (to == nullptr || to->state() != pb::MEMBER_SERVING) continue;
    SLOG_INFO("chain {}: target {} replaced target {} ({})", cid, mv.to_target_id(),
              mv.from_target_id(), mv.reason());
    if (!ec) erase_member(c, mv.from_target_id());
    c.mutable_moves()->DeleteSubrange(i, 1);
    changed = true;
  }

  if (count_state(c, pb::MEMBER_SYNCING) > 0) return changed;  // one at a time

  // 4. A returning member resyncs at the tail.
  for (const auto& m : c.members()) {
    if (m.state() != pb::MEMBER_OFFLINE || !heard(m.target_id())) continue;
    const uint32_t back = m.target_id();
    pb::ChainMember* mm = member_of(c, back);
    mm->set_state(pb::MEMBER_SYNCING);
    mm->set_since_ms(now_ms);
    if (!ec) move_to_tail(c, back);
    SLOG_INFO("chain {}: target {} is back, syncing", cid, back);
    return true;
  }

  // 5. A member absent too long, or draining, is replaced by a newcomer
  // that syncs at the tail (EC: in its position).
  for (const auto& m : c.members()) {
    const bool absent = m.state() == pb::MEMBER_OFFLINE &&
                        now_ms >= m.since_ms() + opts_.replace_after_ms;
    bool moving = false;
    for (const auto& mv : c.moves()) moving |= mv.from_target_id() == m.target_id();
    const bool drain = !ec && m.state() == pb::MEMBER_SERVING && draining(m.target_id()) && !moving;
    if (!absent && !drain) continue;
    const uint32_t from = m.target_id();
    const uint32_t to = replacement_for(c, t, extra);
    if (to == 0) continue;  // nothing to move to yet: try again later
    pb::ChainMove* mv = c.add_moves();
    mv->set_from_target_id(from);
    mv->set_to_target_id(to);
    mv->set_reason(absent ? "absent " + std::to_string((now_ms - m.since_ms()) / 1000) + " s"
                          : "drain");
    if (ec || absent) {
      // The absent member holds nothing the chain can use: its place goes
      // to the newcomer at once (EC: same position).
      pb::ChainMember* slot = member_of(c, from);
      slot->set_target_id(to);
      slot->set_state(pb::MEMBER_SYNCING);
      slot->set_since_ms(now_ms);
      if (!ec) move_to_tail(c, to);
    } else {
      auto* nm = c.add_members();
      nm->set_target_id(to);
      nm->set_state(pb::MEMBER_SYNCING);
      nm->set_since_ms(now_ms);
    }
    SLOG_INFO("chain {}: target {} replaces target {} ({}), syncing", cid, to, from, mv->reason());
    return true;
  }

  // 6. A replicated chain short of members (a replacement died before it
  // served) takes a newcomer.
  if (!ec && static_cast<uint32_t>(c.members_size()) < c.replicas()) {
    const uint32_t to = replacement_for(c, t, extra);
    if (to != 0) {
      pb::ChainMove* mv = c.add_moves();
      mv->set_to_target_id(to);
      mv->set_reason("refill");
      auto* nm = c.add_members();
      nm->set_target_id(to);
      nm->set_state(pb::MEMBER_SYNCING);
      nm->set_since_ms(now_ms);
      SLOG_INFO("chain {}: target {} joins ({} of {} members), syncing", cid, to,
                c.members_size(), c.replicas());
      return true;
    }
  }
  return changed;
}

bool ChainTable::reconcile(const std::vector<TargetView>& targets, uint64_t now_ms) {
  std::map<uint32_t, TargetView> t;
  for (const auto& v : targets) t[v.id] = v;
  std::map<uint32_t, uint32_t> extra;  // replacements chosen in this pass
  for (auto& [id, c] : chains_) {
    if (reconcile_chain(c, t, extra, now_ms)) touch(id);
  }
  const bool changed = !pending_.empty();
  finish();
  return changed;
}

Result<pb::Chain> ChainTable::sync_report(const pb::ReportChainSyncRequest& req, uint64_t now_ms) {
  auto it = chains_.find(req.chain_id());
  if (it == chains_.end()) {
    return Status::NotFound("chain " + std::to_string(req.chain_id()) + " is not in the table");
  }
  pb::Chain& c = it->second;
  pb::ChainMember* m = member_of(c, req.target_id());
  if (m == nullptr || m->state() != pb::MEMBER_SYNCING) {
    return Status::InvalidArgument("target " + std::to_string(req.target_id()) +
                                   " is not syncing in chain " + std::to_string(req.chain_id()));
  }
  if (req.chain_version() != c.version()) {
    return Status::StaleChain("sync report for chain " + std::to_string(req.chain_id()) +
                              " under version " + std::to_string(req.chain_version()) +
                              ", the chain is at " + std::to_string(c.version()));
  }
  auto& progress = sync_[c.chain_id()];
  pb::ChainSyncProgress p;
  p.set_target_id(req.target_id());
  p.set_source_target_id(req.source_target_id());
  p.set_chunks_total(req.chunks_total());
  p.set_chunks_done(req.chunks_done());
  p.set_bytes_total(req.bytes_total());
  p.set_bytes_done(req.bytes_done());
  p.set_reported_ms(now_ms);
  auto prev = progress.find(req.target_id());
  if (prev != progress.end() && now_ms > prev->second.reported_ms() &&
      req.bytes_done() >= prev->second.bytes_done()) {
    p.set_bytes_per_sec((req.bytes_done() - prev->second.bytes_done()) * 1000 /
                        (now_ms - prev->second.reported_ms()));
  }
  progress[req.target_id()] = p;
  if (req.done()) {
    progress.erase(req.target_id());
    m->set_state(pb::MEMBER_SERVING);
    m->set_since_ms(now_ms);
    m->set_stood_in(false);  // rebuilt: it holds what its stand-in took
    touch(c.chain_id());
    finish();
    SLOG_INFO("chain {}: target {} synced from target {} ({} chunks, {} bytes), serving, version {}",
              c.chain_id(), req.target_id(), req.source_target_id(), req.chunks_done(),
              req.bytes_done(), c.version());
  }
  return shipped(c);
}

Status ChainTable::note_stand_in(const pb::NoteStandInRequest& req) {
  const std::string what = "stand-in for position " + std::to_string(req.position()) +
                           " of chain " + std::to_string(req.chain_id()) + " (target " +
                           std::to_string(req.stand_in_target_id()) + ")";
  auto it = chains_.find(req.chain_id());
  if (it == chains_.end()) return Status::NotFound(what + ": the chain is not in the table");
  pb::Chain& c = it->second;
  if (c.scheme() != pb::SCHEME_EC || req.position() >= c.ec_data() ||
      req.position() >= static_cast<uint32_t>(c.members_size())) {
    return Status::InvalidArgument(what + ": not a data position of an EC chain");
  }
  if (req.chain_version() != c.version()) {
    return Status::StaleChain(what + ": under version " + std::to_string(req.chain_version()) +
                              ", the chain is at " + std::to_string(c.version()));
  }
  pb::ChainMember* m = c.mutable_members(static_cast<int>(req.position()));
  if (m->state() != pb::MEMBER_OFFLINE) {
    return Status::StaleChain(what + ": its member, target " + std::to_string(m->target_id()) +
                              ", is " + pb::ChainMemberState_Name(m->state()));
  }
  if (!m->stood_in()) {
    m->set_stood_in(true);
    dirty_.insert(c.chain_id());
    SLOG_INFO(
        "chain {}: target {} stands in for data position {} (target {} is away): it is "
        "rebuilt when back",
        c.chain_id(), req.stand_in_target_id(), req.position(), m->target_id());
  }
  return Status::OK();
}

bool ChainTable::placeable(const pb::Chain& c, const std::map<uint32_t, TargetView>& t) const {
  const int serving = count_state(c, pb::MEMBER_SERVING);
  if (!c.placement() || serving == 0) return false;
  // An EC chain with a position out of the write chain takes new files
  // only while K + 1 positions serve (Ceph's min_size for EC pools): the
  // stand-in writes the missing data position's bytes into the parity, and
  // the file is born with one loss to spare. With fewer, a new file would
  // be born with none; with K + M equal to the targets, refusing them all
  // made every create in an EC directory NoSpace while one server was down.
  bool position_out = false;
  for (const auto& m : c.members()) {
    if (!in_write_chain(m)) {
      position_out = true;
      continue;
    }
    auto it = t.find(m.target_id());
    if (it == t.end() || !it->second.placeable()) return false;
  }
  return !(c.scheme() == pb::SCHEME_EC && position_out &&
           serving < static_cast<int>(c.ec_data()) + 1);
}

std::vector<uint32_t> ChainTable::pick(const ChainShape& shape, uint32_t chain_count,
                                       const std::vector<TargetView>& targets) {
  std::map<uint32_t, TargetView> t;
  for (const auto& v : targets) t[v.id] = v;
  std::vector<const pb::Chain*> healthy, degraded;
  for (const auto& [id, c] : chains_) {
    if (!shape.matches(c) || !placeable(c, t)) continue;
    const bool full_strength = count_state(c, pb::MEMBER_SERVING) == static_cast<int>(shape.width());
    (full_strength ? healthy : degraded).push_back(&c);
  }
  std::vector<const pb::Chain*> cand = healthy;
  if (cand.size() < chain_count) cand.insert(cand.end(), degraded.begin(), degraded.end());
  if (cand.empty() || chain_count == 0) return {};
  // Smooth weighted round robin for the first slot (weight: the free MiB of
  // the chain's emptiest member, at least 1), the rest in table order after
  // it: consecutive files start on consecutive chains, hence every head.
  int64_t total = 0;
  size_t first = 0;
  for (size_t i = 0; i < cand.size(); ++i) {
    uint64_t free = UINT64_MAX;
    for (const auto& m : cand[i]->members()) {
      if (in_write_chain(m)) free = std::min(free, t[m.target_id()].free_bytes);
    }
    const int64_t w = std::max<int64_t>(1, static_cast<int64_t>(std::min<uint64_t>(free >> 20, INT64_MAX / 1024)));
    int64_t& credit = rr_credit_[cand[i]->chain_id()];
    credit += w;
    total += w;
    if (credit > rr_credit_[cand[first]->chain_id()]) first = i;
  }
  rr_credit_[cand[first]->chain_id()] -= total;
  std::vector<uint32_t> out;
  const size_t n = std::min<size_t>(chain_count, cand.size());
  for (size_t j = 0; j < n; ++j) out.push_back(cand[(first + j) % cand.size()]->chain_id());
  return out;
}

bool chain_has_member(const pb::Chain& c, uint32_t target) {
  for (const auto& m : c.members()) {
    if (m.target_id() == target) return true;
  }
  return false;
}

}  // namespace surge::mds
