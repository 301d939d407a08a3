// ChainReport: see chain_report.h.
#include "tools/surgectl/chain_report.h"

#include <cstdio>

#include "tools/surgectl/cluster_admin.h"
#include "tools/surgectl/ec_report.h"

namespace surge::tools {

namespace pb = proto::mds;

namespace {

unsigned long long ull(uint64_t v) { return static_cast<unsigned long long>(v); }

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

std::string members_text(const pb::Chain& c) {
  if (c.scheme() == pb::SCHEME_EC) return ec_positions_text(c);
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
    if (c.scheme() == pb::SCHEME_EC) {
      // Rebuilt by the member itself from the other positions; the bytes
      // to write are known only as it goes.
      s += "target " + std::to_string(p.target_id()) + ": " + std::to_string(p.chunks_done()) +
           " of " + std::to_string(p.chunks_total()) +
           " chunks rebuilt from the other positions, " + mib(p.bytes_per_sec()) + "/s";
      continue;
    }
    const uint64_t left = p.bytes_total() > p.bytes_done() ? p.bytes_total() - p.bytes_done() : 0;
    s += "target " + std::to_string(p.target_id()) + ": " + mib(left) + " left at " +
         mib(p.bytes_per_sec()) + "/s from target " + std::to_string(p.source_target_id());
  }
  return s;
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

SyncTotals sync_totals(const pb::ChainTable& t) {
  SyncTotals n;
  for (const auto& c : t.chains()) {
    for (const auto& p : c.sync()) {
      ++n.members;
      n.bytes_left += p.bytes_total() > p.bytes_done() ? p.bytes_total() - p.bytes_done() : 0;
      n.bytes_per_sec += p.bytes_per_sec();
    }
  }
  return n;
}

std::string sync_totals_text(const SyncTotals& s) {
  if (s.members == 0) return "";
  return std::to_string(s.members) + (s.members == 1 ? " member" : " members") +
         " syncing: " + mib(s.bytes_left) + " left at " + mib(s.bytes_per_sec) + "/s";
}

std::string unhealthy_text(const pb::ChainTable& t) {
  std::string out;
  for (const auto& c : t.chains()) {
    if (c.health() == pb::CHAIN_HEALTHY) continue;
    out += "  chain " + std::to_string(c.chain_id()) + " " + health_name(c.health()) + ": " +
           members_text(c);
    const std::string sync = sync_text(c);
    if (!sync.empty()) out += "; " + sync;
    out += '\n';
  }
  return out;
}

void print_chains(const pb::ClusterMap& m) {
  const pb::ChainTable& t = m.chains();
  std::printf("chain table version %llu, %s\n", ull(t.version()),
              health_summary(count_health(t)).c_str());
  const std::string totals = sync_totals_text(sync_totals(t));
  if (!totals.empty()) std::printf("%s\n", totals.c_str());
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
