// Reading surge-mds settings from TOML (see mds_config.h).
#include "mds/daemon/mds_config.h"

#include <toml++/toml.h>

#include <map>
#include <variant>

namespace surge::mds {
namespace {

using Field = std::variant<std::string*, bool*, int*, uint32_t*, uint64_t*>;

// section -> key -> where it goes. The one list of every key.
std::map<std::string, std::map<std::string, Field>> fields(MdsConfig& c) {
  return {
      {"server",
       {{"data_dir", &c.data_dir},
        {"listen", &c.listen},
        {"cluster_key_file", &c.cluster_key_file},
        {"expect_fs_id", &c.expect_fs_id},
        {"metrics_listen", &c.metrics_listen},
        {"io_threads", &c.io_threads},
        {"worker_threads", &c.worker_threads},
        {"credits_per_connection", &c.credits_per_connection},
        {"handshake_timeout_ms", &c.handshake_timeout_ms},
        {"max_unauthenticated_connections", &c.max_unauthenticated_connections},
        {"max_unauthenticated_per_address", &c.max_unauthenticated_per_address}}},
      {"store",
       {{"sync", &c.sync}, {"block_cache_mb", &c.block_cache_mb}, {"memtable_mb", &c.memtable_mb}}},
      {"namespace",
       {{"default_stripe_size", &c.default_stripe_size},
        {"default_stripe_count", &c.default_stripe_count},
        {"readdir_max_entries", &c.readdir_max_entries},
        {"default_replicas", &c.default_replicas}}},
      {"targets",
       {{"heartbeat_interval_ms", &c.target_heartbeat_interval_ms},
        {"timeout_ms", &c.target_timeout_ms},
        {"rpc_timeout_ms", &c.target_rpc_timeout_ms},
        {"min_free_bytes", &c.target_min_free_bytes}}},
      {"chains",
       {{"strides", &c.chain_strides},
        {"failure_probe_ms", &c.chain_failure_probe_ms},
        {"replace_after_ms", &c.chain_replace_after_ms},
        {"rebalance_max_moves", &c.chain_rebalance_max_moves}}},
      {"sessions",
       {{"heartbeat_interval_ms", &c.session_heartbeat_interval_ms},
        {"timeout_ms", &c.session_timeout_ms}}},
      {"orphans",
       {{"interval_ms", &c.orphan_interval_ms}, {"startup_grace_ms", &c.orphan_startup_grace_ms}}},
      {"log", {{"level", &c.log_level}, {"file", &c.log_file}}},
  };
}

Status read_field(const toml::node& n, const Field& f, const std::string& where) {
  if (auto* s = std::get_if<std::string*>(&f)) {
    auto v = n.value<std::string>();
    if (!v) return Status::InvalidArgument(where + " must be a string");
    **s = *v;
  } else if (auto* b = std::get_if<bool*>(&f)) {
    auto v = n.value<bool>();
    if (!v) return Status::InvalidArgument(where + " must be true or false");
    **b = *v;
  } else {
    auto v = n.value<int64_t>();
    if (!v || *v < 0) return Status::InvalidArgument(where + " must be a non-negative integer");
    if (auto* i = std::get_if<int*>(&f)) {
      if (*v > INT32_MAX) return Status::InvalidArgument(where + " is too large");
      **i = static_cast<int>(*v);
    } else if (auto* u = std::get_if<uint32_t*>(&f)) {
      if (*v > UINT32_MAX) return Status::InvalidArgument(where + " is too large");
      **u = static_cast<uint32_t>(*v);
    } else {
      **std::get_if<uint64_t*>(&f) = static_cast<uint64_t>(*v);
    }
  }
  return Status::OK();
}

}  // namespace

Status load_config_file(const std::string& path, MdsConfig& c) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return Status::InvalidArgument("config " + path + ": " + std::string(e.description()) +
                                   " at line " + std::to_string(e.source().begin.line));
  }
  auto known = fields(c);
  for (const auto& [sk, sv] : root) {
    const std::string section(sk.str());
    auto s = known.find(section);
    if (s == known.end())
      return Status::InvalidArgument(path + ": unknown section [" + section + "]");
    const toml::table* t = sv.as_table();
    if (t == nullptr) return Status::InvalidArgument(path + ": " + section + " must be a table");
    for (const auto& [kk, kv] : *t) {
      const std::string key(kk.str());
      auto f = s->second.find(key);
      if (f == s->second.end()) {
        return Status::InvalidArgument(path + ": unknown setting " + section + "." + key);
      }
      SURGE_RETURN_IF_ERROR(read_field(kv, f->second, path + ": " + section + "." + key));
    }
  }
  return Status::OK();
}

Status validate_config(const MdsConfig& c) {
  if (c.data_dir.empty()) return Status::InvalidArgument("server.data_dir is empty");
  if (c.listen.empty()) return Status::InvalidArgument("server.listen is empty");
  if (c.io_threads < 1 || c.worker_threads < 1) {
    return Status::InvalidArgument("server.io_threads and server.worker_threads must be >= 1");
  }
  if (!c.expect_fs_id.empty() &&
      c.expect_fs_id.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
    return Status::InvalidArgument("server.expect_fs_id '" + c.expect_fs_id + "' is not hex");
  }
  if (c.default_stripe_size < (64u << 10) || c.default_stripe_size % (64u << 10) != 0) {
    return Status::InvalidArgument("namespace.default_stripe_size must be a multiple of 64 KiB");
  }
  if (c.default_stripe_count < 1) {
    return Status::InvalidArgument("namespace.default_stripe_count must be >= 1");
  }
  if (c.readdir_max_entries < 1) {
    return Status::InvalidArgument("namespace.readdir_max_entries must be >= 1");
  }
  if (c.target_timeout_ms <= c.target_heartbeat_interval_ms) {
    return Status::InvalidArgument("targets.timeout_ms must exceed targets.heartbeat_interval_ms");
  }
  if (c.session_timeout_ms <= c.session_heartbeat_interval_ms) {
    return Status::InvalidArgument(
        "sessions.timeout_ms must exceed sessions.heartbeat_interval_ms");
  }
  if (c.orphan_interval_ms < 1) return Status::InvalidArgument("orphans.interval_ms must be >= 1");
  if (c.chain_strides < 1) return Status::InvalidArgument("chains.strides must be >= 1");
  if (c.chain_failure_probe_ms < 1) {
    return Status::InvalidArgument("chains.failure_probe_ms must be >= 1");
  }
  if (c.chain_rebalance_max_moves < 1) {
    return Status::InvalidArgument("chains.rebalance_max_moves must be >= 1");
  }
  return Status::OK();
}

}  // namespace surge::mds
