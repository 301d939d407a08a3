// ChainReport: how surgectl shows chains (surgectl chains, status,
// getstripe) as text; their JSON is json_output.h's. Pure formatting of
// the cluster map's chain table (docs/redundancy.md).
#pragma once

#include <string>

#include "net/proto/mds.pb.h"

namespace surge::tools {

// "1 serving, 2 serving, 3 syncing"; an EC chain names each position:
// "data 0 target 1 serving, ..., parity 0 target 3 serving"
std::string members_text(const proto::mds::Chain& c);
// "replicas 2" / "ec 4+2"
std::string scheme_text(const proto::mds::Chain& c);
// "120 MiB left at 45 MiB/s from target 2" for each syncing member, or "".
std::string sync_text(const proto::mds::Chain& c);

struct ChainHealthCounts {
  int healthy = 0, degraded = 0, resyncing = 0, rebuilding = 0, unavailable = 0;
  int total() const { return healthy + degraded + resyncing + rebuilding + unavailable; }
};
ChainHealthCounts count_health(const proto::mds::ChainTable& t);
// "12 chains: 10 healthy, 1 degraded, 1 resyncing, 0 rebuilding, 0 unavailable"
std::string health_summary(const ChainHealthCounts& n);

// Bytes left and rate summed over every member being synced (resync or
// rebuild), as the resync sources last reported them.
struct SyncTotals {
  int members = 0;
  uint64_t bytes_left = 0;
  uint64_t bytes_per_sec = 0;
};
SyncTotals sync_totals(const proto::mds::ChainTable& t);
// "2 members syncing: 120 MiB left at 45 MiB/s", or "" when none.
std::string sync_totals_text(const SyncTotals& s);
// One line per chain that is not healthy (surgectl status), or "".
std::string unhealthy_text(const proto::mds::ChainTable& t);

// The whole table, one line per chain (JSON: json_output.h).
void print_chains(const proto::mds::ClusterMap& m);

}  // namespace surge::tools
