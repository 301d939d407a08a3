// SessionTable: liveness and housekeeping in the store. Every MDS writes
// the beats of the sessions it heard from and their released opens
// (flush); the leader expires sessions whose beat stopped (expire) and
// sweeps stray opens; a sole MDS clears the last run's (clear_stored).
// See session_table.h.
#include <unordered_set>

#include "common/log.h"
#include "mds/cluster/session_table.h"
#include "mds/namespace/keys.h"
#include "mds/namespace/records.pb.h"

namespace surge::mds {

namespace {

constexpr uint64_t kSweepEvery = 60;  // expire() calls between stray sweeps

Result<uint64_t> beat_of(uint64_t sid, std::string_view bytes) {
  records::SessionRecord rec;
  if (!rec.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Status::Corruption(session_name(sid) + ": stored record does not parse");
  }
  return rec.beat();
}

std::string advanced(std::string_view bytes) {
  records::SessionRecord rec;
  rec.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  rec.set_beat(rec.beat() + 1);
  return rec.SerializeAsString();
}

// Deletes keys [begin, end) of the system space, at most per_batch per commit,
// keeping those keep() refuses; the number deleted.
Result<size_t> delete_keys(KvStore* kv, const std::string& begin, const std::string& end,
                           const std::function<bool(std::string_view)>& keep) {
  const size_t per_batch = std::min<size_t>(kv->max_batch_ops(), 1024);
  size_t deleted = 0;
  std::string from = begin;
  for (;;) {
    KvBatch b;
    size_t seen = 0;
    std::string last;
    SURGE_RETURN_IF_ERROR(
        kv->scan(Space::kSystem, from, end, [&](std::string_view k, std::string_view) {
          last = std::string(k);
          if (!keep(k)) b.del(Space::kSystem, std::string(k));
          return ++seen < per_batch;
        }));
    if (!b.empty()) {
      SURGE_RETURN_IF_ERROR(kv->commit(b, false));
      deleted += b.ops().size();
    }
    if (seen < per_batch) return deleted;
    from = last + '\0';
  }
}

}  // namespace

size_t SessionTable::pairs_per_batch() const {
  return std::max<size_t>(1, std::min<size_t>(kv_->max_batch_ops(), 512) / 2);
}

Status SessionTable::clear_stored() {
  const std::pair<std::string_view, std::string_view> ranges[] = {
      {keys::kSessionPrefix, keys::kSessionEnd},
      {keys::kSessionOpenPrefix, keys::kSessionOpenEnd},
      {keys::kOpenPrefix, keys::kOpenEnd}};
  size_t cleared = 0;
  for (const auto& [begin, end] : ranges) {
    SURGE_ASSIGN_OR_RETURN(size_t n, delete_keys(kv_, std::string(begin), std::string(end),
                                                 [](std::string_view) { return false; }));
    cleared += n;
  }
  if (cleared > 0) SLOG_INFO("dropped {} session records of the last run", cleared);
  return Status::OK();
}

Status SessionTable::store_beat(uint64_t sid, Served& s) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    const std::string next = advanced(s.record);
    KvBatch b;
    b.check(Space::kSystem, keys::session(sid), s.record);
    b.put(Space::kSystem, keys::session(sid), next);
    Status st = kv_->commit(b, false);
    if (st.ok()) {
      s.record = next;
      s.last_stored = Clock::now();
      return st;
    }
    if (st.code() != Code::kBusy) return st;
    // Another MDS moved it (the client talks to it too) or it expired.
    SURGE_ASSIGN_OR_RETURN(auto rec, kv_->get(Space::kSystem, keys::session(sid)));
    if (!rec) {
      s.gone = true;
      return unknown_session(sid);
    }
    s.record = *rec;
  }
  return Status::OK();  // moved by another MDS twice: alive
}

Status SessionTable::store_beats(
    const std::vector<std::pair<uint64_t, std::shared_ptr<Served>>>& heard) {
  Status first;
  for (const auto& [sid, s] : heard) {
    std::lock_guard lk(s->mu);
    if (s->gone) continue;
    Status st = store_beat(sid, *s);
    if (s->gone) {
      SLOG_WARN("{} of {} expired while its client talked to this MDS", session_name(sid),
                s->client);
      drop_opens(*s);
      forget(sid, s);
    } else if (!st.ok() && first.ok()) {
      first = st;
    }
  }
  return first;
}

Status SessionTable::flush(Clock::time_point now) {
  std::vector<std::pair<uint64_t, std::shared_ptr<Served>>> all, heard, silent, released;
  {
    std::lock_guard lk(mu_);  // never held while taking a session's mu
    all.assign(served_.begin(), served_.end());
  }
  for (const auto& [sid, s] : all) {
    std::lock_guard slk(s->mu);
    if (s->released) released.emplace_back(sid, s);
    if (s->heard) {
      s->heard = false;
      heard.emplace_back(sid, s);
    } else if (survives_restart_ &&
               now - s->last_heard > std::chrono::milliseconds(opts_.session_timeout_ms)) {
      // (One MDS: its memory holds the opens; the session stays served
      // until it expires.)
      silent.emplace_back(sid, s);
    }
  }
  // Silent here: the client went (the leader expires it) or talks to
  // another MDS now; it is adopted again if it comes back.
  for (const auto& [sid, s] : silent) forget(sid, s);
  Status first;
  for (const auto& [sid, s] : released) {
    std::lock_guard lk(s->mu);
    if (s->gone) continue;
    s->released = false;
    if (Status st = store_releases(sid, *s); !st.ok()) {
      s->released = true;  // the next pass tries again
      if (first.ok()) first = st;
    }
  }
  // One batch for all while nothing conflicts (the common case: each
  // session's beat is written by the one MDS its client talks to).
  const size_t per_batch = pairs_per_batch();
  for (size_t at = 0; at < heard.size(); at += per_batch) {
    const size_t n = std::min(per_batch, heard.size() - at);
    KvBatch b;
    std::vector<std::string> next(n);
    for (size_t i = 0; i < n; ++i) {
      const auto& [sid, s] = heard[at + i];
      std::lock_guard lk(s->mu);
      next[i] = advanced(s->record);
      b.check(Space::kSystem, keys::session(sid), s->record);
      b.put(Space::kSystem, keys::session(sid), next[i]);
    }
    Status st = kv_->commit(b, false);
    if (st.ok()) {
      for (size_t i = 0; i < n; ++i) {
        const auto& s = heard[at + i].second;
        std::lock_guard lk(s->mu);
        s->record = next[i];
        s->last_stored = Clock::now();
      }
      continue;
    }
    if (st.code() != Code::kBusy) {
      if (first.ok()) first = st;
      continue;
    }
    std::vector<std::pair<uint64_t, std::shared_ptr<Served>>> part(heard.begin() + at,
                                                                   heard.begin() + at + n);
    if (Status one = store_beats(part); !one.ok() && first.ok()) first = one;
  }
  if (!first.ok()) return first.WithContext("storing session heartbeats and closes");
  return Status::OK();
}

void SessionTable::forget_observations() {
  std::lock_guard lk(expire_mu_);
  seen_.clear();
}

Status SessionTable::delete_opens_of(uint64_t sid) {
  if (!survives_restart_) return Status::OK();  // counted in memory only
  // Both records of each open: by session, and by inode.
  std::vector<uint64_t> inos;
  const std::string from = keys::session_open(sid, 0);
  SURGE_RETURN_IF_ERROR_CTX(
      kv_->scan(Space::kSystem, from, keys::session_opens_end(sid),
                [&](std::string_view k, std::string_view) {
                  if (k.size() == from.size()) {
                    inos.push_back(keys::get_be64(k.substr(keys::kSessionOpenPrefix.size() + 8)));
                  }
                  return true;
                }),
      "listing the open files of " + session_name(sid));
  const size_t per_batch = pairs_per_batch();
  for (size_t at = 0; at < inos.size(); at += per_batch) {
    KvBatch b;
    for (size_t i = at; i < std::min(inos.size(), at + per_batch); ++i) {
      b.del(Space::kSystem, keys::open_by(inos[i], sid));
      b.del(Space::kSystem, keys::session_open(sid, inos[i]));
    }
    SURGE_RETURN_IF_ERROR_CTX(kv_->commit(b, survives_restart_),
                              "releasing the open files of " + session_name(sid));
  }
  return Status::OK();
}

Result<int> SessionTable::expire(Clock::time_point now) {
  std::lock_guard lk(expire_mu_);
  std::vector<std::pair<uint64_t, std::string>> stale;  // sid, record as seen
  std::unordered_set<uint64_t> present;
  Status parse;
  SURGE_RETURN_IF_ERROR_CTX(
      kv_->scan(Space::kSystem, keys::kSessionPrefix, keys::kSessionEnd,
                [&](std::string_view k, std::string_view v) {
                  if (k.size() != keys::kSessionPrefix.size() + 8) return true;
                  const uint64_t sid = keys::get_be64(k.substr(keys::kSessionPrefix.size()));
                  auto beat = beat_of(sid, v);
                  if (!beat.ok()) {
                    parse = beat.status();
                    return true;
                  }
                  present.insert(sid);
                  auto [it, fresh] = seen_.try_emplace(sid, Seen{*beat, now});
                  if (!fresh && it->second.beat != *beat) {
                    it->second = Seen{*beat, now};
                  } else if (!fresh && now - it->second.since >
                                           std::chrono::milliseconds(opts_.session_timeout_ms)) {
                    stale.emplace_back(sid, std::string(v));
                  }
                  return true;
                }),
      "listing sessions");
  if (!parse.ok()) SLOG_WARN("{}", parse.ToString());
  std::erase_if(seen_, [&](const auto& e) { return present.count(e.first) == 0; });
  int expired = 0;
  for (const auto& [sid, bytes] : stale) {
    KvBatch b;
    b.check(Space::kSystem, keys::session(sid), bytes);  // its beat did not move since
    b.del(Space::kSystem, keys::session(sid));
    Status st = kv_->commit(b, survives_restart_);
    if (st.code() == Code::kBusy) continue;  // it beat meanwhile
    SURGE_RETURN_IF_ERROR_CTX(st, "expiring " + session_name(sid));
    seen_.erase(sid);
    if (auto s = find(sid)) {
      std::lock_guard slk(s->mu);
      s->gone = true;
      drop_opens(*s);
      forget(sid, s);
    }
    records::SessionRecord rec;
    rec.ParseFromString(bytes);
    SLOG_WARN("{} of {} silent past {} ms: expired, its open files released", session_name(sid),
              rec.client(), opts_.session_timeout_ms);
    SURGE_RETURN_IF_ERROR(delete_opens_of(sid));
    ++expired;
  }
  if (++expire_calls_ % kSweepEvery == 0) SURGE_RETURN_IF_ERROR(sweep_stray_opens());
  return expired;
}

Status SessionTable::sweep_stray_opens() {
  // Opens whose session is gone: written as it expired, or left by an
  // expiry or close cut short. Sessions are looked up once each.
  std::unordered_map<uint64_t, bool> alive;
  auto session_alive = [&](uint64_t sid) -> bool {
    auto it = alive.find(sid);
    if (it != alive.end()) return it->second;
    auto rec = kv_->get(Space::kSystem, keys::session(sid));
    const bool a = !rec.ok() || rec->has_value();  // unsure: keep
    alive[sid] = a;
    return a;
  };
  SURGE_ASSIGN_OR_RETURN(
      size_t by_session,
      delete_keys(kv_, std::string(keys::kSessionOpenPrefix), std::string(keys::kSessionOpenEnd),
                  [&](std::string_view k) {
                    if (k.size() != keys::kSessionOpenPrefix.size() + 16) return true;
                    return session_alive(keys::get_be64(k.substr(keys::kSessionOpenPrefix.size())));
                  }));
  SURGE_ASSIGN_OR_RETURN(
      size_t by_inode,
      delete_keys(kv_, std::string(keys::kOpenPrefix), std::string(keys::kOpenEnd),
                  [&](std::string_view k) {
                    if (k.size() != keys::kOpenPrefix.size() + 16) return true;
                    return session_alive(keys::get_be64(k.substr(keys::kOpenPrefix.size() + 8)));
                  }));
  if (by_session + by_inode > 0) {
    SLOG_INFO("deleted {} open records of sessions that are gone", by_session + by_inode);
  }
  return Status::OK();
}

}  // namespace surge::mds
