// ChainReport: see chain_report.h.
#include "tools/surgectl/chain_report.h"

#include <cstdio>

#include "tools/surgectl/cluster_admin.h"

namespace surge::tools {

namespace pb = proto::mds;

namespace {

unsigned long long ull(uint64_t v) { return static_cast<unsigned long long>(v); }

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

std::string members_text(const pb::Chain& c) {
  std::string s;
  for (const auto& m : c.members()) {
    if (!s.empty()) s += ", ";
    s += std::to_string(m.target_id()) + " " + member_state_name(m.state());
  }
  return s;
}

std::string scheme_text(const pb::Chain& c) {
  if (c.scheme() == pb::SCHEME_EC) {
    return "ec " + std::to_string(c.ec_data()) + "+" + std::to_string(c.ec_parity());
  }
  return "replicas " + std::to_string(c.replicas());
}

std::string sync_text(const pb::Chain& c) {
  std::string s;
  for (const auto& p : c.sync()) {
    if (!s.empty()) s += "; ";
    const uint64_t left = p.bytes_total() > p.bytes_done() ? p.bytes_total() - p.bytes_done() : 0;
    s += "target " + std::to_string(p.target_id()) + ": " + mib(left) + " left at " +
         mib(p.bytes_per_sec()) + "/s from target " + std::to_string(p.source_target_id());
  }
  return s;
}

std::string chain_json(const pb::Chain& c) {
  std::string s = "{\"id\":" + std::to_string(c.chain_id()) +
                  ",\"version\":" + std::to_string(c.version()) + ",\"scheme\":\"" +
                  json_escape(scheme_text(c)) + "\",\"health\":\"" + health_name(c.health()) +
                  "\",\"placement\":" + (c.placement() ? "true" : "false") + ",\"members\":[";
  for (int i = 0; i < c.members_size(); ++i) {
    const auto& m = c.members(i);
    s += std::string(i ? "," : "") + "{\"target\":" + std::to_string(m.target_id()) +
         ",\"state\":\"" + member_state_name(m.state()) + "\"}";
  }
  s += "],\"sync\":[";
  for (int i = 0; i < c.sync_size(); ++i) {
    const auto& p = c.sync(i);
    const uint64_t left = p.bytes_total() > p.bytes_done() ? p.bytes_total() - p.bytes_done() : 0;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%s{\"target\":%u,\"source\":%u,\"bytes_total\":%llu,\"bytes_done\":%llu,"
                  "\"bytes_left\":%llu,\"bytes_per_sec\":%llu,\"chunks_total\":%llu,"
                  "\"chunks_done\":%llu}",
                  i ? "," : "", p.target_id(), p.source_target_id(), ull(p.bytes_total()),
                  ull(p.bytes_done()), ull(left), ull(p.bytes_per_sec()), ull(p.chunks_total()),
                  ull(p.chunks_done()));
    s += buf;
  }
  s += "],\"moves\":[";
  for (int i = 0; i < c.moves_size(); ++i) {
    const auto& mv = c.moves(i);
    s += std::string(i ? "," : "") + "{\"from\":" + std::to_string(mv.from_target_id()) +
         ",\"to\":" + std::to_string(mv.to_target_id()) + ",\"reason\":\"" +
         json_escape(mv.reason()) + "\"}";
  }
  return s + "]}";
}

ChainHealthCounts count_health(const pb::ChainTable& t) {
  ChainHealthCounts n;
  for (const auto& c : t.chains()) {
    switch (c.health()) {
      case pb::CHAIN_HEALTHY: ++n.healthy; break;
      case pb::CHAIN_DEGRADED: ++n.degraded; break;
      case pb::CHAIN_RESYNCING: ++n.resyncing; break;
      case pb::CHAIN_REBUILDING: ++n.rebuilding; break;
      default: ++n.unavailable; break;
    }
  }
  return n;
}

std::string health_summary(const ChainHealthCounts& n) {
  return std::to_string(n.total()) + " chains: " + std::to_string(n.healthy) + " healthy, " +
         std::to_string(n.degraded) + " degraded, " + std::to_string(n.resyncing) +
         " resyncing, " + std::to_string(n.rebuilding) + " rebuilding, " +
         std::to_string(n.unavailable) + " unavailable";
}

std::string health_json(const ChainHealthCounts& n) {
  return "{\"total\":" + std::to_string(n.total()) + ",\"healthy\":" + std::to_string(n.healthy) +
         ",\"degraded\":" + std::to_string(n.degraded) +
         ",\"resyncing\":" + std::to_string(n.resyncing) +
         ",\"rebuilding\":" + std::to_string(n.rebuilding) +
         ",\"unavailable\":" + std::to_string(n.unavailable) + "}";
}

void print_chains(const pb::ClusterMap& m, bool json) {
  const pb::ChainTable& t = m.chains();
  if (json) {
    std::printf("{\"chain_table_version\":%llu,\"health\":%s,\"chains\":[", ull(t.version()),
                health_json(count_health(t)).c_str());
    for (int i = 0; i < t.chains_size(); ++i) {
      std::printf("%s%s", i ? "," : "", chain_json(t.chains(i)).c_str());
    }
    std::printf("]}\n");
    return;
  }
  std::printf("chain table version %llu, %s\n", ull(t.version()),
              health_summary(count_health(t)).c_str());
  std::printf("%-6s %-12s %-8s %-11s %-5s %s\n", "chain", "scheme", "version", "health", "new",
              "members (head first)");
  for (const auto& c : t.chains()) {
    std::printf("%-6u %-12s %-8llu %-11s %-5s %s\n", c.chain_id(), scheme_text(c).c_str(),
                ull(c.version()), health_name(c.health()), c.placement() ? "yes" : "no",
                members_text(c).c_str());
    const std::string sync = sync_text(c);
    if (!sync.empty()) std::printf("       syncing %s\n", sync.c_str());
  }
}

}  // namespace surge::tools
