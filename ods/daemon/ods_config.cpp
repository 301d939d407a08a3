// Reading surge-ods settings from TOML (see ods_config.h).
#include "ods/daemon/ods_config.h"

#include <set>
#include <toml++/toml.h>

namespace surge::ods {
namespace {

template <typename T>
Status get(const toml::table& t, const std::string& section, const char* key, T& out,
           const std::string& path) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::OK();
  if constexpr (std::is_same_v<T, std::string>) {
    auto v = n->value<std::string>();
    if (!v) return Status::InvalidArgument(path + ": " + section + "." + key + " must be a string");
    out = *v;
  } else if constexpr (std::is_same_v<T, bool>) {
    auto v = n->value<bool>();
    if (!v) return Status::InvalidArgument(path + ": " + section + "." + key + " must be true or false");
    out = *v;
  } else {
    auto v = n->value<int64_t>();
    if (!v || *v < 0) {
      return Status::InvalidArgument(path + ": " + section + "." + key + " must be a non-negative integer");
    }
    out = static_cast<T>(*v);
  }
  return Status::OK();
}

Status check_keys(const toml::table& t, const std::string& section, const std::set<std::string>& known,
                  const std::string& path) {
  for (const auto& [k, v] : t) {
    if (!known.count(std::string(k.str()))) {
      return Status::InvalidArgument(path + ": unknown setting " + section + "." + std::string(k.str()));
    }
  }
  return Status::OK();
}

}  // namespace

Status load_config_file(const std::string& path, OdsConfig& c) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return Status::InvalidArgument("config " + path + ": " + std::string(e.description()) + " at line " +
                                   std::to_string(e.source().begin.line));
  }
  SURGE_RETURN_IF_ERROR(check_keys(root, "", {"server", "mds", "pool", "store", "log"}, path));
  auto section = [&](const char* name) -> const toml::table* { return root[name].as_table(); };
  if (const toml::table* t = section("server")) {
    SURGE_RETURN_IF_ERROR(check_keys(*t, "server",
                                     {"data_dir", "listen", "advertise", "cluster_key_file", "metrics_listen", "io_threads",
                                      "worker_threads", "forward_lanes", "forward_threads", "credits_per_connection", "handshake_timeout_ms",
                                      "max_unauthenticated_connections", "max_unauthenticated_per_address"},
                                     path));
    SURGE_RETURN_IF_ERROR(get(*t, "server", "data_dir", c.data_dir, path));
    SURGE_RETURN_IF_ERROR(get(*t, "server", "listen", c.listen, path));
    SURGE_RETURN_IF_ERROR(get(*t, "server", "advertise", c.advertise, path));
    SURGE_RETURN_IF_ERROR(get(*t, "server", "cluster_key_file", c.cluster_key_file, path));
    SURGE_RETURN_IF_ERROR(get(*t, "server", "metrics_listen", c.metrics_listen, path));
    SURGE_RETURN_IF_ERROR(get(*t, "server", "io_threads", c.io_threads, path));
    SURGE_RETURN_IF_ERROR(get(*t, "server", "worker_threads", c.worker_threads, path));
    SURGE_RETURN_IF_ERROR(get(*t, "server", "forward_lanes", c.forward_lanes, path));
    SURGE_RETURN_IF_ERROR(get(*t, "server", "forward_threads", c.forward_threads, path));
    SURGE_RETURN_IF_ERROR(get(*t, "server", "credits_per_connection", c.credits_per_connection, path));
    SURGE_RETURN_IF_ERROR(get(*t, "server", "handshake_timeout_ms", c.handshake_timeout_ms, path));
    SURGE_RETURN_IF_ERROR(
        get(*t, "server", "max_unauthenticated_connections", c.max_unauthenticated_connections, path));
    SURGE_RETURN_IF_ERROR(
        get(*t, "server", "max_unauthenticated_per_address", c.max_unauthenticated_per_address, path));
  }
  if (const toml::table* t = section("mds")) {
    SURGE_RETURN_IF_ERROR(check_keys(*t, "mds", {"address", "heartbeat_interval_ms", "retry_ms"}, path));
    SURGE_RETURN_IF_ERROR(get(*t, "mds", "address", c.mds, path));
    SURGE_RETURN_IF_ERROR(get(*t, "mds", "heartbeat_interval_ms", c.heartbeat_interval_ms, path));
    SURGE_RETURN_IF_ERROR(get(*t, "mds", "retry_ms", c.mds_retry_ms, path));
  }
  if (const toml::table* t = section("pool")) {
    SURGE_RETURN_IF_ERROR(check_keys(
        *t, "pool", {"buffers_1m", "buffers_64k", "buffers_4k", "huge_pages", "lock_memory"}, path));
    SURGE_RETURN_IF_ERROR(get(*t, "pool", "buffers_1m", c.pool_1m_buffers, path));
    SURGE_RETURN_IF_ERROR(get(*t, "pool", "buffers_64k", c.pool_64k_buffers, path));
    SURGE_RETURN_IF_ERROR(get(*t, "pool", "buffers_4k", c.pool_4k_buffers, path));
    SURGE_RETURN_IF_ERROR(get(*t, "pool", "huge_pages", c.huge_pages, path));
    SURGE_RETURN_IF_ERROR(get(*t, "pool", "lock_memory", c.lock_memory, path));
  }
  if (const toml::table* t = section("store")) {
    SURGE_RETURN_IF_ERROR(check_keys(*t, "store",
                                     {"max_object_size", "max_io_bytes", "max_open_objects", "o_direct",
                                      "reserved_free_bytes"},
                                     path));
    SURGE_RETURN_IF_ERROR(get(*t, "store", "max_object_size", c.max_object_size, path));
    SURGE_RETURN_IF_ERROR(get(*t, "store", "max_io_bytes", c.max_io_bytes, path));
    SURGE_RETURN_IF_ERROR(get(*t, "store", "max_open_objects", c.max_open_objects, path));
    SURGE_RETURN_IF_ERROR(get(*t, "store", "o_direct", c.o_direct, path));
    SURGE_RETURN_IF_ERROR(get(*t, "store", "reserved_free_bytes", c.reserved_free_bytes, path));
  }
  if (const toml::table* t = section("log")) {
    SURGE_RETURN_IF_ERROR(check_keys(*t, "log", {"level", "file"}, path));
    SURGE_RETURN_IF_ERROR(get(*t, "log", "level", c.log_level, path));
    SURGE_RETURN_IF_ERROR(get(*t, "log", "file", c.log_file, path));
  }
  return Status::OK();
}

Status validate_config(const OdsConfig& c) {
  if (c.data_dir.empty()) return Status::InvalidArgument("config: server.data_dir is empty");
  if (c.io_threads < 1 || c.worker_threads < 1) {
    return Status::InvalidArgument("config: server.io_threads and server.worker_threads must be >= 1");
  }
  if (c.forward_lanes < 1 || c.forward_lanes > 16 || c.forward_threads < 1 ||
      c.forward_threads > 256) {
    return Status::InvalidArgument("config: server.forward_lanes (" +
                                   std::to_string(c.forward_lanes) + ") must be in 1..16 and " +
                                   "server.forward_threads (" + std::to_string(c.forward_threads) +
                                   ") in 1..256");
  }
  if (c.pool_1m_buffers == 0) return Status::InvalidArgument("config: pool.buffers_1m must be >= 1");
  if (c.max_io_bytes == 0 || c.max_io_bytes > c.pool_1m_buffers * (uint64_t{1} << 20)) {
    return Status::InvalidArgument("config: store.max_io_bytes (" + std::to_string(c.max_io_bytes) +
                                   ") must be between 1 and pool.buffers_1m MiB (" +
                                   std::to_string(c.pool_1m_buffers) + " MiB)");
  }
  if (c.max_object_size == 0) return Status::InvalidArgument("config: store.max_object_size is 0");
  if (c.max_open_objects == 0) return Status::InvalidArgument("config: store.max_open_objects is 0");
  return Status::OK();
}

}  // namespace surge::ods
