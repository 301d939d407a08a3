// OrphanCollector: removes the objects of unlinked files and then their
// inodes. An orphan (nlink 0, in the orphan list) is collected once no live
// session holds it open: its object is removed from every target of its
// layout (OdsRemove is idempotent, so a retry after a crash or a failed
// target is safe), then the inode, its xattrs and the orphan entry go in
// one batch. An orphan whose targets are down or failing stays listed and
// is retried on a later pass: objects never leak, they wait. Each pass
// looks at up to `batch` orphans after where the last one stopped, so those
// that wait never hold up the rest.
//
// The background thread also runs the periodic housekeeping that needs a
// clock: storing the heartbeats of the sessions this MDS serves and reading
// the cluster map again when another MDS changed it (every MDS), expiring
// silent sessions, marking silent targets down, applying truncate intents
// (truncate_intents.h) and collecting orphans (the leader only,
// cluster/leadership.h). Where sessions do not survive a
// restart (one MDS on RocksDB) the collector waits startup_grace_ms after
// start, for clients to open new sessions and report their open files
// again; where they do (etcd) every open is in the store before it is
// answered, and a new leader collects at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "common/status.h"
#include "mds/cluster/cluster_map.h"
#include "mds/cluster/leadership.h"
#include "mds/cluster/object_targets.h"
#include "mds/cluster/session_table.h"
#include "mds/namespace/namespace.h"

namespace surge::mds {

struct OrphanCollectorOptions {
  uint32_t interval_ms = 1000;        // between passes
  uint32_t startup_grace_ms = 30000;  // no collection this long after start (sessions lost)
  size_t batch = 1024;                // orphans looked at per pass
};

struct CollectStats {
  uint64_t collected = 0;  // inodes deleted
  uint64_t still_open = 0;
  uint64_t deferred = 0;  // a target was down or failed; retried later
};

class OrphanCollector {
 public:
  // leadership nullptr: this MDS always leads (tests, one MDS).
  OrphanCollector(Namespace* ns, ClusterMap* map, SessionTable* sessions, ObjectTargets* objects,
                  OrphanCollectorOptions options, const Leadership* leadership = nullptr);
  ~OrphanCollector();

  // One pass over the next batch of the orphan list (tests call this directly).
  Result<CollectStats> collect_once();

  void start();
  void stop();

 private:
  void loop();

  Namespace* ns_;
  ClusterMap* map_;
  SessionTable* sessions_;
  ObjectTargets* objects_;
  OrphanCollectorOptions opts_;
  const Leadership* leadership_;
  bool leading_ = false;                           // as of the last pass
  std::chrono::steady_clock::time_point started_;  // start, or the pass that found it leading
  uint64_t cursor_ = 0;  // list orphans after this inode next (0: from the start)
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace surge::mds
