// SessionTable: sessions served here and the records they keep in the store;
// see session_table.h. The leader's expiry is in session_expiry.cpp.
#include "mds/cluster/session_table.h"

#include <cstdio>

#include "common/log.h"
#include "mds/namespace/keys.h"
#include "mds/namespace/records.pb.h"

namespace surge::mds {

namespace {

constexpr int kCountAttempts = 8;

std::string encode_count(uint32_t n) {
  std::string s;
  keys::put_be32(s, n);
  return s;
}

uint32_t decode_count(std::string_view v) {
  return v.size() == 4 ? keys::get_be32(v) : 0;
}

}  // namespace

std::string session_name(uint64_t sid) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(sid));
  return std::string("session ") + buf;
}

Status unknown_session(uint64_t sid) {
  return Status::NotFound(session_name(sid) +
                          " unknown (expired, or the MDS restarted): open a new session and "
                          "report open files again");
}

SessionTable::SessionTable(KvStore* kv, SessionOptions o, bool survives_restart)
    : kv_(kv), opts_(o), survives_restart_(survives_restart), rng_(std::random_device{}()) {}

Result<uint64_t> SessionTable::open_session(const std::string& client_name) {
  for (int attempt = 0; attempt < kCountAttempts; ++attempt) {
    uint64_t id = 0;
    {
      std::lock_guard lk(mu_);
      // Random ids: a session from before a restart, or of another MDS,
      // is never mistaken for a new one (the store check below settles it).
      while (id == 0 || served_.count(id) != 0) id = rng_();
    }
    records::SessionRecord rec;
    rec.set_client(client_name);
    rec.set_beat(1);
    const std::string bytes = rec.SerializeAsString();
    KvBatch b;
    b.check(Space::kSystem, keys::session(id), std::nullopt);
    b.put(Space::kSystem, keys::session(id), bytes);
    Status st = kv_->commit(b, survives_restart_);
    if (st.code() == Code::kBusy) continue;
    SURGE_RETURN_IF_ERROR_CTX(st, "recording a session for " + client_name);
    auto s = std::make_shared<Served>();
    s->client = client_name;
    s->record = bytes;
    s->last_heard = s->last_stored = Clock::now();
    {
      std::lock_guard lk(mu_);
      served_[id] = s;
    }
    SLOG_INFO("{} opened by {}", session_name(id), client_name);
    return id;
  }
  return Status::Busy("opening a session for " + client_name + ": no free session id");
}

std::shared_ptr<SessionTable::Served> SessionTable::find(uint64_t sid) const {
  std::lock_guard lk(mu_);
  auto it = served_.find(sid);
  return it == served_.end() ? nullptr : it->second;
}

void SessionTable::forget(uint64_t sid, const std::shared_ptr<Served>& s) {
  std::lock_guard lk(mu_);
  auto it = served_.find(sid);
  if (it != served_.end() && it->second == s) served_.erase(it);
}

Result<std::shared_ptr<SessionTable::Served>> SessionTable::serve(uint64_t sid) {
  if (auto s = find(sid)) return s;
  // Not served here: a client that failed over from another MDS, or after
  // this one restarted. Read the session and its opens from the store.
  SURGE_ASSIGN_OR_RETURN(auto bytes, kv_->get(Space::kSystem, keys::session(sid)));
  if (!bytes) return unknown_session(sid);
  records::SessionRecord rec;
  if (!rec.ParseFromString(*bytes)) {
    return Status::Corruption(session_name(sid) + ": stored record does not parse");
  }
  auto s = std::make_shared<Served>();
  s->client = rec.client();
  s->record = *bytes;
  s->last_heard = s->last_stored = Clock::now();
  const std::string from = keys::session_open(sid, 0);
  SURGE_RETURN_IF_ERROR_CTX(
      kv_->scan(Space::kSystem, from, keys::session_opens_end(sid),
                [&](std::string_view k, std::string_view v) {
                  if (k.size() == from.size()) {
                    const uint32_t n = decode_count(v);
                    s->opens[keys::get_be64(k.substr(keys::kSessionOpenPrefix.size() + 8))] =
                        Served::Count{n, n};
                  }
                  return true;
                }),
      "reading the open files of " + session_name(sid));
  std::lock_guard lk(mu_);
  auto [it, inserted] = served_.emplace(sid, s);
  if (inserted) {
    SLOG_INFO("{} of {} taken over here, {} open files", session_name(sid), s->client,
              s->opens.size());
  }
  return it->second;
}

Status SessionTable::heartbeat(uint64_t session_id) {
  SURGE_ASSIGN_OR_RETURN(auto s, serve(session_id));
  std::lock_guard lk(s->mu);
  if (s->gone) return unknown_session(session_id);
  s->last_heard = Clock::now();
  s->heard = true;
  return Status::OK();
}

Status SessionTable::close_session(uint64_t session_id) {
  SURGE_ASSIGN_OR_RETURN(auto s, serve(session_id));
  std::lock_guard lk(s->mu);
  if (s->gone) return unknown_session(session_id);
  KvBatch b;
  b.del(Space::kSystem, keys::session(session_id));
  SURGE_RETURN_IF_ERROR_CTX(kv_->commit(b, survives_restart_),
                            "closing " + session_name(session_id));
  s->gone = true;
  drop_opens(*s);
  forget(session_id, s);
  SLOG_INFO("{} of {} closed", session_name(session_id), s->client);
  return delete_opens_of(session_id);
}

void SessionTable::count_locally(uint64_t ino, bool add) {
  std::lock_guard lk(local_mu_);
  if (add) {
    ++local_opens_[ino];
    return;
  }
  auto it = local_opens_.find(ino);
  if (it != local_opens_.end() && --it->second == 0) local_opens_.erase(it);
}

void SessionTable::drop_opens(Served& s) {
  if (!survives_restart_) {
    for (const auto& [ino, c] : s.opens) {
      for (uint32_t i = 0; i < c.live; ++i) count_locally(ino, false);
    }
  }
  s.opens.clear();
}

Status SessionTable::add_count(Served& s, uint64_t sid, uint64_t ino) {
  Served::Count& c = s.opens[ino];
  if (!survives_restart_) {  // one MDS: memory is the record
    c.stored = ++c.live;
    count_locally(ino, true);
    return Status::OK();
  }
  for (int attempt = 0; attempt < kCountAttempts; ++attempt) {
    // A release not written yet: the store holds it open, and the session
    // was confirmed well within the timeout, so it is still stored.
    if (c.stored > c.live &&
        Clock::now() - s.last_stored < std::chrono::milliseconds(opts_.session_timeout_ms / 2)) {
      ++c.live;
      return Status::OK();
    }
    KvBatch b;
    // The session as last read or written here: an expired session takes
    // no new open. Then the count as stored (another MDS serving the same
    // client meanwhile changes it: read again).
    b.check(Space::kSystem, keys::session(sid), s.record);
    const std::string key = keys::session_open(sid, ino);
    b.check(Space::kSystem, key,
            c.stored == 0 ? std::nullopt : std::optional(encode_count(c.stored)));
    b.put(Space::kSystem, key, encode_count(c.live + 1));
    if (c.stored == 0) b.put(Space::kSystem, keys::open_by(ino, sid), "");
    Status st = kv_->commit(b, survives_restart_);
    if (st.ok()) {
      ++c.live;
      c.stored = c.live;
      s.last_stored = Clock::now();
      return Status::OK();
    }
    if (st.code() != Code::kBusy) {
      if (c.live == 0 && c.stored == 0) s.opens.erase(ino);
      return st;
    }
    SURGE_ASSIGN_OR_RETURN(auto rec, kv_->get(Space::kSystem, keys::session(sid)));
    if (!rec) {
      s.gone = true;
      return unknown_session(sid);
    }
    s.record = *rec;
    s.last_stored = Clock::now();
    SURGE_ASSIGN_OR_RETURN(auto stored, kv_->get(Space::kSystem, key));
    c.stored = stored ? decode_count(*stored) : 0;
  }
  return Status::Busy(session_name(sid) + ": the open count of inode " + std::to_string(ino) +
                      " keeps changing");
}

Status SessionTable::store_releases(uint64_t sid, Served& s) {
  std::vector<uint64_t> inos;
  for (const auto& [ino, c] : s.opens) {
    if (c.stored > c.live) inos.push_back(ino);
  }
  const size_t per_batch = pairs_per_batch();
  for (size_t at = 0; at < inos.size(); at += per_batch) {
    KvBatch b;
    const size_t end = std::min(inos.size(), at + per_batch);
    for (size_t i = at; i < end; ++i) {
      const Served::Count& c = s.opens[inos[i]];
      const std::string key = keys::session_open(sid, inos[i]);
      b.check(Space::kSystem, key, encode_count(c.stored));
      if (c.live == 0) {
        b.del(Space::kSystem, key);
        b.del(Space::kSystem, keys::open_by(inos[i], sid));
      } else {
        b.put(Space::kSystem, key, encode_count(c.live));
      }
    }
    Status st = kv_->commit(b, survives_restart_);
    if (st.code() == Code::kBusy) {
      // Another MDS changed these counts (the client talks to it too):
      // take the stored counts as held. That can only keep a file open
      // longer (until the session ends), never release one still held.
      for (size_t i = at; i < end; ++i) {
        SURGE_ASSIGN_OR_RETURN(auto v, kv_->get(Space::kSystem, keys::session_open(sid, inos[i])));
        const uint32_t n = v ? decode_count(*v) : 0;
        if (n == 0) {
          s.opens.erase(inos[i]);
        } else {
          s.opens[inos[i]] = Served::Count{n, n};
        }
      }
      continue;
    }
    SURGE_RETURN_IF_ERROR_CTX(st, "storing the closes of " + session_name(sid));
    for (size_t i = at; i < end; ++i) {
      Served::Count& c = s.opens[inos[i]];
      if (c.live == 0) {
        s.opens.erase(inos[i]);
      } else {
        c.stored = c.live;
      }
    }
  }
  return Status::OK();
}

Status SessionTable::add_open(uint64_t session_id, uint64_t ino) {
  SURGE_ASSIGN_OR_RETURN(auto s, serve(session_id));
  std::lock_guard lk(s->mu);
  if (s->gone) return unknown_session(session_id);
  Status st = add_count(*s, session_id, ino);
  if (s->gone) forget(session_id, s);
  SURGE_RETURN_IF_ERROR_CTX(st, "recording an open of inode " + std::to_string(ino));
  s->last_heard = Clock::now();
  s->heard = true;
  return Status::OK();
}

void SessionTable::add_open_to(KvBatch& batch, uint64_t session_id, uint64_t ino) const {
  if (!survives_restart_) return;  // counted in memory by opened()
  // A new inode: no count to check. Should the session expire before the
  // batch commits, its open is a stray the leader's sweep deletes.
  batch.put(Space::kSystem, keys::session_open(session_id, ino), encode_count(1));
  batch.put(Space::kSystem, keys::open_by(ino, session_id), "");
}

void SessionTable::opened(uint64_t session_id, uint64_t ino) {
  auto s = find(session_id);
  if (!s) return;  // adopted from the store when it is next used
  std::lock_guard lk(s->mu);
  if (s->gone) return;  // its opens went with it
  Served::Count& c = s->opens[ino];
  ++c.live;
  ++c.stored;  // the create's commit stored its count
  if (!survives_restart_) count_locally(ino, true);
  s->last_heard = Clock::now();
  s->heard = true;
}

void SessionTable::release_open(uint64_t session_id, uint64_t ino) {
  auto s = serve(session_id);
  if (!s.ok()) return;  // unknown: its opens went with it
  std::lock_guard lk((*s)->mu);
  auto it = (*s)->opens.find(ino);
  if ((*s)->gone || it == (*s)->opens.end() || it->second.live == 0) return;
  --it->second.live;
  (*s)->heard = true;
  if (!survives_restart_) {
    it->second.stored = it->second.live;
    count_locally(ino, false);
    if (it->second.live == 0) (*s)->opens.erase(it);
    return;
  }
  (*s)->released = true;
}

Result<bool> SessionTable::is_open(uint64_t ino) const {
  if (!survives_restart_) {
    std::lock_guard lk(local_mu_);
    return local_opens_.count(ino) != 0;
  }
  bool open = false;
  SURGE_RETURN_IF_ERROR_CTX(
      kv_->scan(Space::kSystem, keys::open_by(ino, 0), keys::opens_of_end(ino),
                [&](std::string_view, std::string_view) {
                  open = true;
                  return false;
                }),
      "looking up the opens of inode " + std::to_string(ino));
  return open;
}

bool SessionTable::holds_open(uint64_t session_id, uint64_t ino) {
  auto s = serve(session_id);
  if (!s.ok()) return false;
  std::lock_guard lk((*s)->mu);
  if ((*s)->gone) return false;
  auto it = (*s)->opens.find(ino);
  return it != (*s)->opens.end() && it->second.live > 0;
}

Result<bool> SessionTable::held_by_others(uint64_t ino, uint64_t session_id) {
  if (Clock::now() < opens_unknown_until_) return true;
  if (!survives_restart_) {
    uint32_t own = 0;
    if (auto s = find(session_id); s && session_id != 0) {
      std::lock_guard lk(s->mu);
      if (auto it = s->opens.find(ino); it != s->opens.end()) own = it->second.live;
    }
    std::lock_guard lk(local_mu_);
    auto it = local_opens_.find(ino);
    return it != local_opens_.end() && it->second > own;
  }
  bool others = false;
  const std::string from = keys::open_by(ino, 0);
  SURGE_RETURN_IF_ERROR_CTX(
      kv_->scan(Space::kSystem, from, keys::opens_of_end(ino),
                [&](std::string_view k, std::string_view) {
                  if (k.size() == from.size() &&
                      keys::get_be64(k.substr(from.size() - 8)) != session_id) {
                    others = true;
                  }
                  return !others;
                }),
      "looking up the opens of inode " + std::to_string(ino));
  return others;
}

size_t SessionTable::session_count() const {
  std::lock_guard lk(mu_);
  return served_.size();
}

}  // namespace surge::mds
