// OdsConfig: every setting of surge-ods with its default. Read in order:
// these defaults, the TOML file (--config), then command-line flags.
// ods_config_table() declares each setting once (key, flag, range, note);
// the file, the flags, the checks and ods/surge-ods.toml (the output of
// surge-ods --print-config) come from it. A new setting is a member here
// and a row there. All settings are read at start; none change at run
// time.
#pragma once

#include <cstdint>
#include <string>

#include "common/config/config_table.h"
#include "common/status.h"

namespace surge::ods {

struct OdsConfig {
  // [server]
  std::string data_dir = "/var/lib/surge/ods";
  std::string listen = "tcp://127.0.0.1:7101";
  std::string advertise;  // address told to the MDS; empty: the bound listen address
  std::string cluster_key_file = "/etc/surge/cluster.key";
  std::string metrics_listen;  // "HOST:PORT" of the Prometheus endpoint; empty: off
  int io_threads = 2;
  int worker_threads = 8;
  // Worker lanes for updates forwarded down chains (ods/chain/forward_lanes.h):
  // chains of up to forward_lanes + 1 members never deadlock.
  uint32_t forward_lanes = 2;
  uint32_t forward_threads = 4;  // per lane
  // How long a member waits for its successor (below clients' io attempts).
  uint32_t forward_timeout_ms = 3000;
  uint32_t credits_per_connection = 128;
  uint32_t handshake_timeout_ms = 5000;
  uint32_t max_unauthenticated_connections = 256;  // 0: no limit
  uint32_t max_unauthenticated_per_address = 32;   // 0: no limit
  // A bulk transfer without progress for this long closes its connection.
  uint32_t bulk_stall_timeout_ms = 3000;
  // [mds]
  std::string mds = "tcp://127.0.0.1:7100";  // empty: run without an MDS
  uint32_t heartbeat_interval_ms = 0;        // 0: what the MDS asks for
  uint32_t mds_retry_ms = 1000;
  // [pool]
  uint64_t pool_1m_buffers = 32;
  uint64_t pool_64k_buffers = 128;
  uint64_t pool_4k_buffers = 512;
  bool huge_pages = true;
  bool lock_memory = true;
  // [store]
  uint64_t max_object_size = uint64_t{1} << 40;
  uint64_t max_io_bytes = 8 << 20;
  uint64_t max_open_objects = 1024;
  bool o_direct = false;
  uint64_t reserved_free_bytes = 0;
  // [ec]
  uint32_t ec_kept_deltas = 16;
  // [log]
  std::string log_level = "info";
  std::string log_file;
};

// The table of every setting, in the order of the sample file.
const config::ConfigTable<OdsConfig>& ods_config_table();

// Reads a TOML file over the defaults in cfg. Unknown keys are errors (a
// typo must not silently leave a default in place).
Status load_config_file(const std::string& path, OdsConfig& cfg);

// Checks the table's ranges, then the relations between settings.
Status validate_config(const OdsConfig& cfg);

}  // namespace surge::ods
