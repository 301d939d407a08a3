// ChainState: the chain table as `surgectl --json chains` prints it, parsed
// for the tests that watch chains change (rebuild, drain, rebalance): per
// chain its health and members (target id and state, head first).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "tests/client/local_cluster.h"

namespace surge::test {

struct ChainMemberState {
  uint32_t target = 0;
  std::string state;  // "serving", "syncing", "offline"
};

struct ChainState {
  uint32_t id = 0;
  std::string health;  // "healthy", "degraded", ...
  std::vector<ChainMemberState> members;
  int serving() const {
    int n = 0;
    for (const auto& m : members) n += m.state == "serving";
    return n;
  }
  bool has(uint32_t target) const {
    for (const auto& m : members) {
      if (m.target == target) return true;
    }
    return false;
  }
};

// Runs surgectl (from SURGE_BUILD_DIR) against cluster with args; its exit
// status, stdout and stderr in *out.
inline int run_surgectl(const LocalCluster& cluster, const std::string& args, std::string* out) {
  const char* b = std::getenv("SURGE_BUILD_DIR");
  if (b == nullptr) {
    *out = "SURGE_BUILD_DIR is not set (run through ctest)";
    return -1;
  }
  out->clear();
  return sh(std::string(b) + "/tools/surgectl --mds " + cluster.mds_address() + " --key-file " +
                cluster.key_file() + " " + args + " 2>&1",
            out);
}

// Makes dir through libsurge and gives it `replicas` copies over `count`
// 1 MiB slots with surgectl setstripe; "" or what failed, naming dir.
inline std::string make_replicated_dir(const LocalCluster& cluster, const std::string& dir,
                                       int replicas, int count, int io_timeout_ms) {
  auto cl = cluster.connect(io_timeout_ms);
  if (!cl.ok()) return "connect: " + cl.status().ToString();
  if (auto st = (*cl)->mkdir(dir, 0777); !st.ok()) return "mkdir " + dir + ": " + st.ToString();
  std::string out;
  const std::string args = "setstripe --replicas " + std::to_string(replicas) + " --count " +
                           std::to_string(count) + " --size 1048576 " + dir;
  if (run_surgectl(cluster, args, &out) != 0) return "surgectl " + args + ": " + out;
  return "";
}

// The chains from `surgectl --json chains` output.
inline std::vector<ChainState> parse_chains(const std::string& json) {
  static const std::regex chain_re(
      R"re(\{"id":(\d+),"version":\d+,"scheme":"[^"]*","health":"(\w+)","placement":\w+,"members":\[([^\]]*)\])re");
  static const std::regex member_re(R"re(\{"target":(\d+),"state":"(\w+)"\})re");
  std::vector<ChainState> out;
  for (std::sregex_iterator it(json.begin(), json.end(), chain_re), end; it != end; ++it) {
    ChainState c;
    c.id = static_cast<uint32_t>(std::stoul((*it)[1]));
    c.health = (*it)[2];
    const std::string members = (*it)[3];
    for (std::sregex_iterator m(members.begin(), members.end(), member_re); m != end; ++m) {
      c.members.push_back({static_cast<uint32_t>(std::stoul((*m)[1])), (*m)[2]});
    }
    out.push_back(std::move(c));
  }
  return out;
}

// Chain memberships per target id.
inline std::map<uint32_t, int> memberships(const std::vector<ChainState>& chains) {
  std::map<uint32_t, int> n;
  for (const auto& c : chains) {
    for (const auto& m : c.members) ++n[m.target];
  }
  return n;
}

// The target id data server i registered under (from `surgectl --json
// targets`, by its address); 0 when not found.
inline uint32_t target_id_of(const LocalCluster& cluster, int i) {
  std::string out;
  if (run_surgectl(cluster, "--json targets", &out) != 0) return 0;
  const std::regex t_re(R"re(\{"id":(\d+),"address":"([^"]*)")re");
  for (std::sregex_iterator it(out.begin(), out.end(), t_re), end; it != end; ++it) {
    if ((*it)[2] == cluster.ods_address(i)) return static_cast<uint32_t>(std::stoul((*it)[1]));
  }
  return 0;
}

// The members of the chain of slot 0 of path, head first, as `surgectl
// getstripe` prints them ("  slot 0: chain C version V health: T1 serving,
// T2 syncing"): target id and state; empty if it cannot be read (the
// output in *why).
inline std::vector<std::pair<uint32_t, std::string>> chain_of(const LocalCluster& cluster,
                                                              const std::string& path,
                                                              std::string* why) {
  std::string out;
  if (run_surgectl(cluster, "getstripe " + path, &out) != 0) {
    *why = "getstripe " + path + ": " + out;
    return {};
  }
  *why = out;
  const size_t slot = out.find("slot 0: chain ");
  const size_t colon = slot == std::string::npos ? slot : out.find(": ", slot + 7);
  if (colon == std::string::npos) return {};
  std::vector<std::pair<uint32_t, std::string>> members;
  const size_t eol = out.find('\n', colon);
  for (size_t at = colon + 2; at < eol;) {
    char* end = nullptr;
    const auto id = static_cast<uint32_t>(std::strtoul(out.c_str() + at, &end, 10));
    size_t next = out.find(", ", at);
    if (next == std::string::npos || next > eol) next = eol;
    const size_t st = static_cast<size_t>(end - out.c_str()) + 1;
    members.emplace_back(id, st < next ? out.substr(st, next - st) : "");
    at = next + 2;
  }
  return members;
}

// The LocalCluster index of the data server registered as target id; -1
// if none.
inline int ods_of(const LocalCluster& cluster, int count, uint32_t id) {
  for (int i = 0; i < count; ++i) {
    if (target_id_of(cluster, i) == id) return i;
  }
  return -1;
}

}  // namespace surge::test
