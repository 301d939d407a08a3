// OrphanCollector implementation; see orphan_collector.h.
#include "mds/cluster/orphan_collector.h"

#include <vector>

#include "common/log.h"
#include "mds/cluster/file_chunks.h"
#include "mds/cluster/truncate_intents.h"
#include "mds/namespace/record_wire.h"

namespace surge::mds {

OrphanCollector::OrphanCollector(Namespace* ns, ClusterMap* map, SessionTable* sessions,
                                 ObjectTargets* objects, OrphanCollectorOptions options,
                                 const Leadership* leadership)
    : ns_(ns),
      map_(map),
      sessions_(sessions),
      objects_(objects),
      opts_(options),
      leadership_(leadership),
      started_(std::chrono::steady_clock::now()) {}

OrphanCollector::~OrphanCollector() {
  stop();
}

Result<CollectStats> OrphanCollector::collect_once() {
  CollectStats st;
  // Resume after the last orphan looked at, so orphans that must wait (a
  // target down for good, a file still open) never keep the ones behind
  // them from being collected; past the end, start over.
  SURGE_ASSIGN_OR_RETURN(auto orphans, ns_->list_orphans_after(cursor_, opts_.batch));
  cursor_ = orphans.size() < opts_.batch ? 0 : orphans.back();
  std::vector<uint64_t> closed;  // by every session, through every MDS
  for (uint64_t ino : orphans) {
    auto open = sessions_->is_open(ino);
    if (!open.ok()) {
      SLOG_WARN("orphan {} waits: {}", ino, open.status().ToString());
      ++st.deferred;
    } else if (*open) {
      ++st.still_open;
    } else {
      closed.push_back(ino);
    }
  }
  for (uint64_t ino : closed) {
    records::InodeRecord rec;
    SURGE_ASSIGN_OR_RETURN(bool found, ns_->orphan_record(ino, &rec));
    bool removed_all = true;
    if (found && rec.attr().has_layout()) {
      Status s = remove_file_data(to_wire(rec.attr().layout()), ino, *map_, *objects_);
      if (!s.ok()) {
        removed_all = false;
        if (s.code() == Code::kUnavailable) {
          SLOG_DEBUG("orphan {}: {}; retrying later", ino, s.ToString());
        } else {
          SLOG_WARN("orphan {}: removing its data: {}", ino, s.ToString());
        }
      }
    }
    if (!removed_all) {
      ++st.deferred;
      continue;
    }
    Status s = ns_->purge_orphan(ino);
    if (s.code() == Code::kBusy) {
      ++st.still_open;  // opened again meanwhile (not possible today; harmless)
      continue;
    }
    SURGE_RETURN_IF_ERROR_CTX(s, "purging orphan inode " + std::to_string(ino));
    ++st.collected;
  }
  return st;
}

void OrphanCollector::start() {
  started_ = std::chrono::steady_clock::now();
  leading_ = leadership_ == nullptr || leadership_->is_leader();
  thread_ = std::thread([this] { loop(); });
}

void OrphanCollector::stop() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void OrphanCollector::loop() {
  std::unique_lock lk(mu_);
  while (!stopping_) {
    cv_.wait_for(lk, std::chrono::milliseconds(opts_.interval_ms));
    if (stopping_) break;
    lk.unlock();
    const auto now = std::chrono::steady_clock::now();
    if (Status fs = sessions_->flush(now); !fs.ok()) SLOG_WARN("{}", fs.ToString());
    if (Status rs = map_->refresh(); !rs.ok()) {
      SLOG_WARN("reading the cluster map again: {}", rs.ToString());
    }
    const bool leading = leadership_ == nullptr || leadership_->is_leader();
    if (leading != leading_) sessions_->forget_observations();  // judge silence afresh
    leading_ = leading;
    if (!leading) {
      lk.lock();
      continue;
    }
    map_->check_liveness(ClusterMap::now_ms());
    if (auto ex = sessions_->expire(now); !ex.ok()) SLOG_WARN("{}", ex.status().ToString());
    // Truncates need no grace: clients carry their generation.
    if (auto t = apply_truncate_intents(*ns_, *map_, *objects_, opts_.batch); !t.ok()) {
      SLOG_ERROR("truncate intents: {}", t.status().ToString());
    } else if (t->applied > 0) {
      SLOG_INFO("truncate intents: {} applied, {} waiting for data servers", t->applied,
                t->deferred);
    }
    // Sessions lost with a restart: their clients report their open files
    // again within a session timeout; wait for them.
    if (sessions_->survives_restart() ||
        now - started_ >= std::chrono::milliseconds(opts_.startup_grace_ms)) {
      auto r = collect_once();
      if (!r.ok()) {
        SLOG_ERROR("orphan collection: {}", r.status().ToString());
      } else if (r->collected > 0) {
        SLOG_INFO("orphan collection: {} removed, {} still open, {} waiting for data servers",
                  r->collected, r->still_open, r->deferred);
      }
    }
    lk.lock();
  }
}

}  // namespace surge::mds
