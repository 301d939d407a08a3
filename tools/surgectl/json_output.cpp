// JsonOutput: see json_output.h. Field names and their order are what the
// documents have always had (scripts read them); a new field is appended.
#include "tools/surgectl/json_output.h"

#include <cstdio>

#include "tools/surgectl/cluster_admin.h"
#include "tools/surgectl/ec_report.h"

namespace surge::tools {

namespace pb = proto::mds;

void print_json(const Json& doc) {
  // replace: a byte sequence that is not UTF-8 (a path, an error text)
  // becomes U+FFFD instead of making dump() throw.
  const std::string text = doc.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::printf("%s\n", text.c_str());
}

Json target_json(const pb::TargetInfo& t) {
  return Json{{"id", t.target_id()},
              {"address", t.address()},
              {"state", state_name(t.state())},
              {"draining", t.draining()},
              {"capacity", t.capacity_bytes()},
              {"free", t.free_bytes()},
              {"chains", t.chain_memberships()},
              {"drained", t.drained()},
              {"filesystem_id", t.filesystem_id()}};
}

Json health_json(const ChainHealthCounts& n) {
  return Json{{"total", n.total()},           {"healthy", n.healthy},
              {"degraded", n.degraded},       {"resyncing", n.resyncing},
              {"rebuilding", n.rebuilding},   {"unavailable", n.unavailable}};
}

Json chain_json(const pb::Chain& c) {
  Json members = Json::array();
  for (const auto& m : c.members()) {
    Json member{{"target", m.target_id()}, {"state", member_state_name(m.state())}};
    if (m.stood_in()) member["stood_in"] = true;
    members.push_back(std::move(member));
  }
  Json sync = Json::array();
  for (const auto& p : c.sync()) {
    const uint64_t left = p.bytes_total() > p.bytes_done() ? p.bytes_total() - p.bytes_done() : 0;
    sync.push_back(Json{{"target", p.target_id()},
                        {"source", p.source_target_id()},
                        {"bytes_total", p.bytes_total()},
                        {"bytes_done", p.bytes_done()},
                        {"bytes_left", left},
                        {"bytes_per_sec", p.bytes_per_sec()},
                        {"chunks_total", p.chunks_total()},
                        {"chunks_done", p.chunks_done()}});
  }
  Json moves = Json::array();
  for (const auto& mv : c.moves()) {
    moves.push_back(Json{
        {"from", mv.from_target_id()}, {"to", mv.to_target_id()}, {"reason", mv.reason()}});
  }
  return Json{{"id", c.chain_id()},
              {"version", c.version()},
              {"scheme", scheme_text(c)},
              {"health", health_name(c.health())},
              {"placement", c.placement()},
              {"members", members},
              {"sync", sync},
              {"moves", moves}};
}

Json map_json(const std::string& mds_address, const pb::ClusterMap& m,
              const std::string& mds_leader) {
  int up = 0, down = 0, draining = 0;
  Json targets = Json::array();
  for (const auto& t : m.targets()) {
    up += t.state() != pb::TARGET_DOWN;  // alive: up or draining
    down += t.state() == pb::TARGET_DOWN;
    draining += t.draining();
    targets.push_back(target_json(t));
  }
  Json not_healthy = Json::array();
  for (const auto& c : m.chains().chains()) {
    if (c.health() != pb::CHAIN_HEALTHY) not_healthy.push_back(chain_json(c));
  }
  return Json{{"mds", mds_address},
              {"mds_leader", mds_leader},
              {"fs_id", m.fs_id()},
              {"map_version", m.version()},
              {"targets_up", up},
              {"targets_down", down},
              {"targets_draining", draining},
              {"chains", health_json(count_health(m.chains()))},
              {"sync", sync_totals_json(sync_totals(m.chains()))},
              {"chains_not_healthy", not_healthy},
              {"targets", targets}};
}

Json sync_totals_json(const SyncTotals& s) {
  return Json{{"members", s.members}, {"bytes_left", s.bytes_left},
              {"bytes_per_sec", s.bytes_per_sec}};
}

Json rebalance_json(const std::vector<pb::ChainMoveOfChain>& moves, uint32_t in_flight,
                    const pb::ClusterMap& m) {
  Json mv = Json::array();
  for (const auto& x : moves) {
    mv.push_back(Json{{"chain", x.chain_id()},
                      {"from", x.move().from_target_id()},
                      {"to", x.move().to_target_id()}});
  }
  Json targets = Json::array();
  for (const auto& t : m.targets()) {
    targets.push_back(Json{{"id", t.target_id()}, {"chains", t.chain_memberships()}});
  }
  return Json{{"moves", mv},
              {"in_flight", in_flight},
              {"map_version", m.version()},
              {"targets", targets}};
}

Json chains_json(const pb::ClusterMap& m) {
  const pb::ChainTable& t = m.chains();
  Json chains = Json::array();
  for (const auto& c : t.chains()) chains.push_back(chain_json(c));
  return Json{{"chain_table_version", t.version()},
              {"health", health_json(count_health(t))},
              {"sync", sync_totals_json(sync_totals(t))},
              {"chains", chains}};
}

Json layout_json(const std::string& path, const pb::GetLayoutReply& r) {
  const pb::Layout& l = r.layout();
  std::string scheme = "replicas 1";
  if (l.scheme() == pb::SCHEME_REPLICAS) scheme = "replicas " + std::to_string(l.replicas());
  if (l.scheme() == pb::SCHEME_EC) {
    scheme = "ec " + std::to_string(l.ec_data()) + "+" + std::to_string(l.ec_parity());
  }
  Json slots = Json::array();
  for (int i = 0; i < l.chains_size(); ++i) {
    Json chain = Json{{"id", l.chains(i)}};  // not in the map: its id alone
    Json positions = Json::array();
    for (const auto& c : r.chains()) {
      if (c.chain_id() != l.chains(i)) continue;
      chain = chain_json(c);
      if (l.scheme() != pb::SCHEME_EC) continue;
      for (int p = 0; p < c.members_size(); ++p) {
        const uint32_t pos = static_cast<uint32_t>(p);
        positions.push_back(Json{{"position", pos},
                                 {"chunk", ec_position_name(pos, l.ec_data())},
                                 {"target", c.members(p).target_id()},
                                 {"state", member_state_name(c.members(p).state())}});
      }
    }
    Json slot = Json{{"slot", i}, {"chain", chain}};
    if (l.scheme() == pb::SCHEME_EC) slot["positions"] = positions;
    slots.push_back(slot);
  }
  Json doc = Json{{"path", path},
              {"format", l.format() == 0 ? 1u : l.format()},
              {"stripe_size", l.stripe_size()},
              {"stripe_count", l.stripe_count()},
              {"scheme", scheme},
              {"targets", Json(std::vector<uint32_t>(l.targets().begin(), l.targets().end()))},
              {"slots", slots},
              {"inherited", r.inherited()}};
  if (l.scheme() == pb::SCHEME_EC) {
    doc["ec"] = Json{{"data", l.ec_data()},
                     {"parity", l.ec_parity()},
                     {"chunk_size", l.stripe_size()},
                     {"group_bytes", uint64_t{l.stripe_size()} * l.ec_data()}};
  }
  return doc;
}

Json drain_json(const pb::SetTargetDrainReply& r) {
  return Json{{"target", target_json(r.target())}, {"map_version", r.map_version()}};
}

Json drained_json(uint32_t target_id, double seconds) {
  // Tenths of a second, as the text says it.
  return Json{{"target", target_id},
              {"drained", true},
              {"seconds", static_cast<double>(static_cast<int64_t>(seconds * 10 + 0.5)) / 10}};
}

Json chain_compare_json(const ChainCompareResult& r) {
  Json differ = Json::array();
  for (const auto& m : r.mismatches) {
    Json copies = Json::array();
    for (const auto& c : m.copies) {
      copies.push_back(Json{{"target", c.target_id},
                            {"address", c.address},
                            {"present", c.present},
                            {"version", c.version},
                            {"committed_version", c.committed_version},
                            {"size", c.size},
                            {"crc32c", c.crc32c},
                            {"incomplete", c.incomplete}});
    }
    differ.push_back(Json{{"ino", m.ino},
                          {"slot", m.slot},
                          {"position", m.position},
                          {"what", m.what},
                          {"first_differing_byte", m.first_differing_byte},
                          {"copies", copies}});
  }
  return Json{{"id", r.chain_id},
              {"version", r.chain_version},
              {"members", Json(r.members)},
              {"compared", r.compared},
              {"corrupt", r.corrupt},
              {"error", r.error},
              {"chunks_compared", r.chunks_compared},
              {"bytes_compared", r.bytes_compared},
              {"bytes_read", r.bytes_read},
              {"differ", differ}};
}

Json ec_chain_check_json(const EcChainCheckResult& r) {
  Json bad = Json::array();
  for (const auto& x : r.mismatches) {
    Json j{{"ino", x.ino},
           {"slot", x.slot},
           {"parity", x.parity},
           {"chunk_offset", x.chunk_offset},
           {"what", x.what}};
    if (x.what == "bytes") j["first_differing_byte"] = x.first_differing_byte;
    if (x.what == "versions") {
      j["data_position"] = x.data_position;
      j["applied"] = x.applied;
      j["data_version"] = x.data_version;
    }
    bad.push_back(j);
  }
  return Json{{"id", r.chain_id},
              {"version", r.chain_version},
              {"ec_data", r.k},
              {"ec_parity", r.m},
              {"checked", r.checked},
              {"error", r.error},
              {"chunk_sets_checked", r.groups_checked},
              {"bytes_checked", r.bytes_checked},
              {"inconsistent", bad}};
}

Json scrub_json(const std::vector<TargetScrubResult>& results,
                const std::vector<ChainCompareResult>& chains,
                const std::vector<EcChainCheckResult>& ec_chains) {
  uint64_t bad = 0, objects = 0, bytes = 0, differ = 0, chunks_compared = 0;
  int unscrubbed = 0, uncompared = 0;
  Json targets = Json::array();
  for (const auto& r : results) {
    bad += r.bad_blocks.size();
    objects += r.objects_checked;
    bytes += r.bytes_checked;
    unscrubbed += !r.scrubbed;
    Json corrupt = Json::array();
    for (const auto& b : r.bad_blocks) {
      Json block{{"object_id", b.object_id}, {"offset", b.offset}};
      if (b.object_id == 0) {  // a chained chunk: which one
        block["chain"] = b.chain_id;
        block["ino"] = b.ino;
        block["slot"] = b.slot;
        block["position"] = b.position;
      }
      corrupt.push_back(block);
    }
    targets.push_back(Json{{"id", r.target_id},
                           {"address", r.address},
                           {"state", r.state},
                           {"scrubbed", r.scrubbed},
                           {"error", r.error},
                           {"objects_checked", r.objects_checked},
                           {"bytes_checked", r.bytes_checked},
                           {"corrupt", corrupt}});
  }
  Json chain_docs = Json::array();
  for (const auto& c : chains) {
    differ += c.mismatches.size() + (c.corrupt ? 1 : 0);
    chunks_compared += c.chunks_compared;
    uncompared += !c.compared && !c.corrupt;
    chain_docs.push_back(chain_compare_json(c));
  }
  Json ec_docs = Json::array();
  uint64_t inconsistent = 0;
  int unchecked = 0;
  for (const auto& c : ec_chains) {
    inconsistent += c.mismatches.size();
    unchecked += !c.checked;
    ec_docs.push_back(ec_chain_check_json(c));
  }
  return Json{{"targets", targets},
              {"chains", chain_docs},
              {"ec_chains", ec_docs},
              {"objects_checked", objects},
              {"bytes_checked", bytes},
              {"corrupt_blocks", bad},
              {"unscrubbed_targets", unscrubbed},
              {"chunks_compared", chunks_compared},
              {"replica_differences", differ},
              {"uncompared_chains", uncompared},
              {"parity_inconsistent", inconsistent},
              {"unchecked_ec_chains", unchecked}};
}

Json df_json(const FsStat& s, const std::vector<FileSystemSpace>& file_systems,
             const std::vector<SchemeSpace>& schemes) {
  Json fs_docs = Json::array();
  for (const auto& fs : file_systems) {
    fs_docs.push_back(Json{{"filesystem_id", fs.filesystem_id},
                           {"targets", Json(fs.targets)},
                           {"capacity", fs.capacity_bytes},
                           {"free", fs.free_bytes},
                           {"up", fs.up}});
  }
  Json usable = Json::array();
  for (const auto& u : schemes) {
    usable.push_back(Json{{"scheme", u.scheme},
                          {"usable_bytes", u.usable_bytes},
                          {"usable_free_bytes", u.usable_free_bytes}});
  }
  return Json{{"total_bytes", s.total_bytes},
              {"free_bytes", s.free_bytes},
              {"total_inodes", s.total_inodes},
              {"free_inodes", s.free_inodes},
              {"file_systems", fs_docs},
              {"usable", usable}};
}

}  // namespace surge::tools
