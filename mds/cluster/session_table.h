// SessionTable: client sessions and the files they hold open, recorded in
// the KvStore so that every MDS of a file system sees them
// (mds/kv/etcd/README.md, "Sessions and open files in the store"). The orphan collector asks
// is_open() before it removes an unlinked file's objects, whichever MDS the file was opened
// through.
//
// Records (system space, mds/namespace/keys.h):
//   "s/"  sid            -> SessionRecord {client, beat}
//   "so/" sid ino        -> count of opens of ino by the session
//   "os/" ino sid        -> ""  (the same open, found by inode)
// An open is in the store before the open (or create) is answered. A close
// only lowers the count in memory; the background pass writes it (a late
// release only delays a collection, never loses data), and an open of a
// file whose release is not written yet needs no store write at all. The
// MDS a client talks to keeps that session's counts in memory; a session it
// has not served yet (the client failed over from another MDS) is adopted
// on first contact: read from the store, with its opens, so nothing needs
// reporting again.
//
// Liveness is a lease judged by one clock: a heartbeat is noted in memory,
// and each MDS's background pass writes one batch that advances `beat` for
// every session heard from since the last pass. The leader alone expires:
// a session whose stored beat has not moved for session_timeout_ms, by the
// leader's own steady clock since it first saw that beat, is deleted (its
// opens with it), so clock differences between hosts cannot expire a live
// session early. A new leader starts its observations afresh.
//
// survives_restart (etcd: every commit is durable and other MDS serve the
// same sessions): the records outlive this process. Otherwise (one MDS on
// RocksDB) nobody else reads them and nothing survives: open counts stay in
// memory (no store write per open, as before sessions were shared), session
// records are written unsynced, clear_stored() drops the previous run's at
// start, clients open new sessions and report their open files again, and
// the collector waits its startup grace for them.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "mds/kv/kv_store.h"

namespace surge::mds {

// "session 1f2e...", and the error for a session the store does not hold.
std::string session_name(uint64_t sid);
Status unknown_session(uint64_t sid);

struct SessionOptions {
  uint32_t heartbeat_interval_ms = 2000;
  uint32_t session_timeout_ms = 30000;
};

class SessionTable {
 public:
  using Clock = std::chrono::steady_clock;
  SessionTable(KvStore* kv, SessionOptions o, bool survives_restart);

  // Deletes every stored session and open (at start, when sessions do not
  // survive a restart).
  Status clear_stored();

  Result<uint64_t> open_session(const std::string& client_name);
  // Notes the client alive; adopts a stored session this MDS did not serve.
  // NotFound when the session is not stored (expired, or never opened).
  Status heartbeat(uint64_t session_id);
  Status close_session(uint64_t session_id);

  // Counts one open of ino by the session, in the store before it returns;
  // NotFound for an unknown session.
  Status add_open(uint64_t session_id, uint64_t ino);
  // For a file created in `batch`: the session's first open of the new
  // inode goes into the same commit (no second round trip to the store).
  // After the batch committed, call opened() with the same arguments.
  void add_open_to(KvBatch& batch, uint64_t session_id, uint64_t ino) const;
  void opened(uint64_t session_id, uint64_t ino);
  // Releases one open (no-op when not held), in memory: the next flush()
  // writes it.
  void release_open(uint64_t session_id, uint64_t ino);
  // Whether any session, served by any MDS, holds ino open.
  Result<bool> is_open(uint64_t ino) const;
  // Whether this session holds ino open at least once (adopting it).
  bool holds_open(uint64_t session_id, uint64_t ino);
  // Whether a session other than session_id (0: any) holds ino open, as
  // far as this table or the store knows (an open whose release is not
  // written yet still counts); true for every file until the time set by
  // opens_unknown_until.
  Result<bool> held_by_others(uint64_t ino, uint64_t session_id);
  // Sessions lost with a restart (one MDS on RocksDB): until `until` their
  // clients may not have recorded their opens again. Call before serving.
  void opens_unknown_until(Clock::time_point until) { opens_unknown_until_ = until; }

  // Every MDS, each background pass: stores the beat of every session heard
  // from here since the last call and the releases of its opens, and
  // forgets sessions silent here past the timeout (their records stay for
  // the leader to judge).
  Status flush(Clock::time_point now);
  // The leader, each background pass: expires stored sessions whose beat
  // has not moved for the timeout since this table first saw it; returns
  // how many. Every 60th call also deletes opens left by a session that is
  // gone (an open written as its session expired, or an expiry cut short).
  Result<int> expire(Clock::time_point now);
  // Leadership moved: observations start again.
  void forget_observations();

  const SessionOptions& options() const { return opts_; }
  bool survives_restart() const { return survives_restart_; }
  // Sessions this MDS serves (heard from within the timeout).
  size_t session_count() const;

 private:
  // A session this MDS serves, and its records as this MDS last read or
  // wrote them. mu serialises the session's own changes, so a store round
  // trip of one session never waits on another's.
  struct Served {
    std::mutex mu;
    std::string client;
    std::string record;  // SessionRecord bytes, as stored
    Clock::time_point last_heard;
    // When the store last confirmed the session (written or read): an open
    // answered from memory alone must be recent enough that the leader
    // cannot have expired the session meanwhile.
    Clock::time_point last_stored;
    bool heard = false;     // a heartbeat or open since the last flush
    bool released = false;  // an open released since the last flush
    bool gone = false;      // no longer stored (expired or closed)
    // ino -> opens held (live) and as stored (>= live; above it until the
    // releases are written).
    struct Count {
      uint32_t live = 0;
      uint32_t stored = 0;
    };
    std::unordered_map<uint64_t, Count> opens;
  };
  struct Seen {
    uint64_t beat = 0;
    Clock::time_point since;
  };

  std::shared_ptr<Served> find(uint64_t sid) const;
  // The served entry of sid, adopted from the store when this MDS does not
  // serve it yet; NotFound when it is not stored.
  Result<std::shared_ptr<Served>> serve(uint64_t sid);
  void forget(uint64_t sid, const std::shared_ptr<Served>& s);
  // Under s.mu: one open more of ino, in the store (unless it still holds
  // a higher count) then in s.
  Status add_count(Served& s, uint64_t sid, uint64_t ino);
  // Under s.mu: writes the counts released since the last flush.
  Status store_releases(uint64_t sid, Served& s);
  // Not survives_restart: the opens of every session, by inode.
  void count_locally(uint64_t ino, bool add);
  // Under s.mu, the session gone: its opens no longer count.
  void drop_opens(Served& s);
  // Writes advanced beats of these sessions (one batch; one by one when it
  // conflicts).
  Status store_beats(const std::vector<std::pair<uint64_t, std::shared_ptr<Served>>>& heard);
  Status store_beat(uint64_t sid, Served& s);
  Status delete_opens_of(uint64_t sid);
  // Sessions (or opens, two keys each) per batch, within the store's limit.
  size_t pairs_per_batch() const;
  Status sweep_stray_opens();

  KvStore* kv_;
  SessionOptions opts_;
  bool survives_restart_;
  mutable std::mutex mu_;
  std::mt19937_64 rng_;
  std::unordered_map<uint64_t, std::shared_ptr<Served>> served_;
  Clock::time_point opens_unknown_until_{};
  mutable std::mutex local_mu_;                         // taken last
  std::unordered_map<uint64_t, uint32_t> local_opens_;  // ino -> opens (not survives_restart)
  std::mutex expire_mu_;  // the leader's observations
  std::unordered_map<uint64_t, Seen> seen_;
  uint64_t expire_calls_ = 0;
};

}  // namespace surge::mds
