// JsonOutput: the one path every `surgectl --json` document takes. Each
// command builds its document here from the wire messages or result
// structs it already has, as an nlohmann::ordered_json (keys stay in the
// order written, so the documents read like the text output), and prints
// it with print_json: one compact document and a newline on stdout. The
// library does the escaping and number formatting; no command formats
// JSON by hand. tests/tools/surgectl_json_test.cpp parses every command's
// document and checks the fields scripts use.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "net/proto/mds.pb.h"
#include "surge/client.h"
#include "tools/surgectl/chain_report.h"
#include "tools/surgectl/ec_parity_check.h"
#include "tools/surgectl/replica_compare.h"
#include "tools/surgectl/space_report.h"
#include "tools/surgectl/target_scrub.h"

namespace surge::tools {

using Json = nlohmann::ordered_json;

// Prints doc on stdout as one line.
void print_json(const Json& doc);

// {"id","address","state","draining","capacity","free","chains","drained","filesystem_id"}
Json target_json(const proto::mds::TargetInfo& t);
// {"total","healthy","degraded","resyncing","rebuilding","unavailable"}
Json health_json(const ChainHealthCounts& n);
// {"id","version","scheme","health","placement","members":[{"target","state"}],"sync":[...],"moves":[...]}
Json chain_json(const proto::mds::Chain& c);

// surgectl status / targets: the map's summary and every target.
Json map_json(const std::string& mds_address, const proto::mds::ClusterMap& m,
              const std::string& mds_leader = "");
// surgectl chains: the chain table.
Json chains_json(const proto::mds::ClusterMap& m);
// {"members","bytes_left","bytes_per_sec"} summed over every member syncing.
Json sync_totals_json(const SyncTotals& s);
// surgectl rebalance: {"moves":[{"chain","from","to"}],"in_flight","map_version",
// "targets":[{"id","chains"}]}
Json rebalance_json(const std::vector<proto::mds::ChainMoveOfChain>& moves, uint32_t in_flight,
                    const proto::mds::ClusterMap& m);
// surgectl getstripe: the layout, and each slot's chain.
Json layout_json(const std::string& path, const proto::mds::GetLayoutReply& r);
// surgectl drain / undrain: the target as it now is.
Json drain_json(const proto::mds::SetTargetDrainReply& r);
// surgectl drain --wait, once the target holds nothing (a second line
// after drain_json): {"target","drained":true,"seconds"}.
Json drained_json(uint32_t target_id, double seconds);
// surgectl scrub: every target's and chain's result and the totals.
Json scrub_json(const std::vector<TargetScrubResult>& targets,
                const std::vector<ChainCompareResult>& chains,
                const std::vector<EcChainCheckResult>& ec_chains);
Json ec_chain_check_json(const EcChainCheckResult& r);
Json chain_compare_json(const ChainCompareResult& r);
// surgectl df: the totals (each file system once) and every file system
// with the targets on it.
Json df_json(const FsStat& s, const std::vector<FileSystemSpace>& file_systems,
             const std::vector<SchemeSpace>& schemes);

}  // namespace surge::tools
