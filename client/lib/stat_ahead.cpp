#include "client/lib/stat_ahead.h"

#include <algorithm>

namespace surge::client {

std::optional<Attr> StatAhead::find(Ino dir, std::string_view name, Clock::duration max_age,
                                    Clock::duration* age) {
  std::lock_guard lk(mu_);
  auto it = fetched_.find(dir);
  if (it == fetched_.end()) return std::nullopt;
  const Clock::duration a = Clock::now() - it->second.began;
  if (a >= kMaxAge) {
    fetched_.erase(it);
    return std::nullopt;
  }
  if (a >= max_age) return std::nullopt;
  auto e = it->second.entries.find(std::string(name));
  if (e == it->second.entries.end()) return std::nullopt;
  auto c = changed_.find(e->second.ino);
  if (c != changed_.end() && c->second >= it->second.began) {
    it->second.entries.erase(e);
    return std::nullopt;
  }
  if (auto r = runs_.find(dir); r != runs_.end()) ++r->second.hits;
  if (age != nullptr) *age = a;
  return e->second;
}

std::optional<StatAhead::Fetch> StatAhead::note_lookup(Ino dir) {
  std::lock_guard lk(mu_);
  const auto now = Clock::now();
  if (runs_.size() >= prune_at_) prune_locked(now);
  Run& r = runs_[dir];
  if (now - r.last > kRunGap) r.lookups = 0;
  r.last = now;
  if (++r.lookups < kRun || r.fetching || now < r.no_fetch_until) return std::nullopt;
  auto f = fetched_.find(dir);
  if (f != fetched_.end() && now - f->second.began < kMaxAge / 2) return std::nullopt;
  r.lookups = 0;
  if (r.last_fetch_entries > 0 && r.hits * kMinUse < r.last_fetch_entries) {
    r.last_fetch_entries = 0;  // tried again after the backoff
    r.no_fetch_until = now + kBackoff;
    return std::nullopt;
  }
  r.fetching = true;
  ++in_flight_;
  r.fetch_began = now;
  r.changed_while_fetching.clear();
  return Fetch{dir, now};
}

void StatAhead::install(const Fetch& f, std::vector<DirEntry> entries) {
  std::lock_guard lk(mu_);
  const auto now = Clock::now();
  auto r = runs_.find(f.dir);
  if (r == runs_.end() || !r->second.fetching || r->second.fetch_began != f.began) return;
  Run& run = r->second;
  run.fetching = false;
  --in_flight_;
  std::vector<std::string> changed = std::move(run.changed_while_fetching);
  run.changed_while_fetching.clear();
  if (now - f.began >= kMaxAge) return;  // stale before it could serve
  Fetched fe;
  fe.began = f.began;
  fe.entries.reserve(entries.size());
  for (DirEntry& e : entries) {
    // An entry whose inode went while the page was read has no attributes.
    if (e.attr.nlink == 0 || e.name == "." || e.name == "..") continue;
    fe.entries.emplace(std::move(e.name), e.attr);
  }
  for (const std::string& n : changed) fe.entries.erase(n);
  run.last_fetch_entries = fe.entries.size();
  run.hits = 0;
  fetched_[f.dir] = std::move(fe);
  while (fetched_.size() > kMaxDirs) {
    auto oldest = fetched_.begin();
    for (auto it = fetched_.begin(); it != fetched_.end(); ++it) {
      if (it->second.began < oldest->second.began) oldest = it;
    }
    fetched_.erase(oldest);
  }
}

void StatAhead::abandon(const Fetch& f) {
  std::lock_guard lk(mu_);
  auto r = runs_.find(f.dir);
  if (r == runs_.end() || !r->second.fetching || r->second.fetch_began != f.began) return;
  r->second.fetching = false;
  --in_flight_;
  r->second.changed_while_fetching.clear();
  r->second.no_fetch_until = Clock::now() + kBackoff;
}

void StatAhead::name_changed(Ino dir, std::string_view name) {
  std::lock_guard lk(mu_);
  const auto now = Clock::now();
  if (auto it = fetched_.find(dir); it != fetched_.end()) {
    auto e = it->second.entries.find(std::string(name));
    if (e != it->second.entries.end()) {
      changed_locked(e->second.ino, now);  // its link count, if it has other names
      it->second.entries.erase(e);
    }
  }
  if (auto r = runs_.find(dir); r != runs_.end() && r->second.fetching) {
    r->second.changed_while_fetching.emplace_back(name);
  }
  changed_locked(dir, now);  // its times and link count moved
}

void StatAhead::inode_changed(Ino ino) {
  std::lock_guard lk(mu_);
  changed_locked(ino, Clock::now());
}

void StatAhead::expire() {
  std::lock_guard lk(mu_);
  const auto now = Clock::now();
  for (auto it = fetched_.begin(); it != fetched_.end();) {
    it = now - it->second.began >= kMaxAge ? fetched_.erase(it) : std::next(it);
  }
  if (fetched_.empty() && in_flight_ == 0) changed_.clear();  // nothing left to refuse
}

size_t StatAhead::dirs() const {
  std::lock_guard lk(mu_);
  return fetched_.size();
}

// With no fetch kept or on its way, a change needs no record: every later
// fetch begins after it and reads what it left. So creates, closes and
// chmods cost a lock and a test unless lookups are being answered here.
void StatAhead::changed_locked(Ino ino, Clock::time_point now) {
  if (fetched_.empty() && in_flight_ == 0) return;
  if (changed_.size() >= prune_at_) prune_locked(now);
  changed_[ino] = now;
}

// A change older than kMaxAge is older than every usable fetch, so it can
// no longer refuse an entry; a run that ended and waits for nothing is
// forgotten. What is left sets the next prune's size, so a second of
// changes at a high rate costs one scan per doubling, not one per change.
void StatAhead::prune_locked(Clock::time_point now) {
  for (auto it = changed_.begin(); it != changed_.end();) {
    it = now - it->second >= kMaxAge ? changed_.erase(it) : std::next(it);
  }
  for (auto it = runs_.begin(); it != runs_.end();) {
    const Run& r = it->second;
    const bool idle = !r.fetching && now - r.last > kRunGap && now >= r.no_fetch_until;
    it = idle ? runs_.erase(it) : std::next(it);
  }
  prune_at_ = std::max(kPruneAt, 2 * std::max(changed_.size(), runs_.size()));
}

}  // namespace surge::client
