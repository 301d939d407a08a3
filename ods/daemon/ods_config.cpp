// surge-ods settings: the field table (common/config/config_table.h) that
// the TOML file, the flags, the range checks and ods/surge-ods.toml all
// come from, and the relations between settings.
#include "ods/daemon/ods_config.h"

#include "net/address_list.h"

namespace surge::ods {

using config::Field;
using F = Field<OdsConfig>;

const config::ConfigTable<OdsConfig>& ods_config_table() {
  static const config::ConfigTable<OdsConfig> table(
      "# surge-ods: the object data server. Every setting is listed at its default\n"
      "# (surge-ods --print-config writes this file).\n",
      {
          F{{"server", "data_dir",
             "Where the objects live (objects/HH/HH/<id>.dat + .crc), with the target id\n"
             "the MDS assigned (target_id) and the store FORMAT file. One target per dir.",
             "--data-dir", 1},
            &OdsConfig::data_dir},
          F{{"server", "listen",
             "Address to serve on: \"tcp://HOST:PORT\" or \"rdma://HOST:PORT\"; port 0 picks one.",
             "--listen"},
            &OdsConfig::listen},
          F{{"server", "advertise",
             "Address given to the MDS for clients to reach; empty: the bound listen address.",
             "--advertise"},
            &OdsConfig::advertise},
          F{{"server", "cluster_key_file",
             "Shared secret of the cluster; connections prove they know it.", "--cluster-key-file"},
            &OdsConfig::cluster_key_file},
          F{{"server", "metrics_listen",
             "Prometheus endpoint, \"HOST:PORT\" (GET /metrics): request and error counts\n"
             "by method, bytes, checksum errors, buffers in use, space. \"\" turns it off\n"
             "(the default, so several data servers on one host never collide).",
             "--metrics-listen"},
            &OdsConfig::metrics_listen},
          F{{"server", "io_threads", "Transport threads (sockets / completion queues).",
             "--io-threads", 1},
            &OdsConfig::io_threads},
          F{{"server", "worker_threads",
             "Threads that run requests (and do their disk IO). Requests beyond these\n"
             "wait in arrival order.",
             "--worker-threads", 1},
            &OdsConfig::worker_threads},
          F{{"server", "forward_lanes",
             "Updates forwarded down replicated chains run on lanes of their own, one\n"
             "per place in the chain (the head's successor, the next, ...), so members\n"
             "waiting on each other (each server is head of some chains and middle or\n"
             "tail of others) always leave the next one a thread: chains of up to\n"
             "forward_lanes + 1 members never deadlock, longer ones may wait out the\n"
             "forward timeout under full load. Each lane has forward_threads\n"
             "threads; the lanes take (2 * forward_lanes * forward_threads +\n"
             "worker_threads + 1) 1 MiB pool buffers on top of buffers_1m.",
             "", 1, 16},
            &OdsConfig::forward_lanes},
          F{{"server", "forward_threads", "", "", 1, 256}, &OdsConfig::forward_threads},
          F{{"server", "forward_timeout_ms",
             "How long a chain member waits for its successor to take an update. Then\n"
             "it reports the successor to the MDS (which probes it and takes it out of\n"
             "the chain if it does not answer) and the writer retries. Keep it below\n"
             "the clients' io attempt timeout (half their io timeout, 5 s by default):\n"
             "a client whose attempt runs out first reports the member it wrote to,\n"
             "which was only waiting, and its retry meets the same stalled successor.",
             "--forward-timeout-ms", 100, 600000},
            &OdsConfig::forward_timeout_ms},
          F{{"server", "credits_per_connection", "Requests one connection may have in flight."},
            &OdsConfig::credits_per_connection},
          F{{"server", "handshake_timeout_ms",
             "A connection that has not proven the cluster key within this many ms is\n"
             "closed. Until then its frames may be handshake-sized only."},
            &OdsConfig::handshake_timeout_ms},
          F{{"server", "max_unauthenticated_connections",
             "Connections still in the handshake, in total and from one peer address\n"
             "(0: no limit). One more is refused at once; these bound what peers that\n"
             "never prove the key can make this server hold."},
            &OdsConfig::max_unauthenticated_connections},
          F{{"server", "max_unauthenticated_per_address", ""},
            &OdsConfig::max_unauthenticated_per_address},
          F{{"server", "bulk_stall_timeout_ms",
             "A write's payload that stops arriving, or a read's data the peer stops\n"
             "taking, for this many ms closes the connection (logged with the peer and\n"
             "the object) and frees the IO buffers it held. Keep it well inside the\n"
             "clients' IO timeout (10 s), so a stalled peer's buffers are back before\n"
             "a well-behaved client waiting for them gives up. TCP only.",
             "--bulk-stall-timeout-ms", 1, 600000},
            &OdsConfig::bulk_stall_timeout_ms},
          F{{"mds", "address",
             "The metadata server to register with and heartbeat; \"\" runs without one.\n"
             "Several MDS serving one file system from one etcd: every one of them,\n"
             "comma-separated (\"tcp://a:7100,tcp://b:7100\"); the server heartbeats to\n"
             "each, and each needs that to know it is alive.",
             "--mds"},
            &OdsConfig::mds},
          F{{"mds", "heartbeat_interval_ms",
             "Heartbeat period in ms; 0 uses what the MDS asks for at registration."},
            &OdsConfig::heartbeat_interval_ms},
          F{{"mds", "retry_ms", "Wait between attempts while the MDS is unreachable, in ms."},
            &OdsConfig::mds_retry_ms},
          F{{"pool", "buffers_1m",
             "Registered, pinned IO buffers by size class. The 1 MiB class bounds the\n"
             "bytes of data in flight: buffers_1m MiB at most, whatever the load.",
             "--pool-1m-buffers", 1},
            &OdsConfig::pool_1m_buffers},
          F{{"pool", "buffers_64k", "", "--pool-64k-buffers"}, &OdsConfig::pool_64k_buffers},
          F{{"pool", "buffers_4k", ""}, &OdsConfig::pool_4k_buffers},
          F{{"pool", "huge_pages", "Back the pool with huge pages when the system has them."},
            &OdsConfig::huge_pages},
          F{{"pool", "lock_memory", "mlock the pool (a failure is logged once, not fatal)."},
            &OdsConfig::lock_memory},
          F{{"store", "max_object_size",
             "Largest object (offset + length of any write), in bytes: 1 TiB.", "", 1},
            &OdsConfig::max_object_size},
          F{{"store", "max_io_bytes",
             "Largest single Write or Read request, in bytes (<= buffers_1m MiB).",
             "--max-io-bytes", 1},
            &OdsConfig::max_io_bytes},
          F{{"store", "max_open_objects",
             "Objects kept open (3 descriptors each at most); least recently used close.",
             "--max-open-objects", 1},
            &OdsConfig::max_open_objects},
          F{{"store", "o_direct",
             "Aligned (4 KiB) IO bypasses the page cache; unaligned IO stays buffered.",
             "--o-direct"},
            &OdsConfig::o_direct},
          F{{"store", "reserved_free_bytes",
             "Writes fail with NoSpace once free space would drop below this, in bytes.",
             "--reserved-free-bytes"},
            &OdsConfig::reserved_free_bytes},
          F{{"ec", "kept_deltas",
             "Parity deltas of EC writes that failed to reach a parity server, kept in\n"
             "memory (up to 1 MiB each) for the chunk's next write or a sweeper to send\n"
             "again. Past this many, a failed one is rebuilt from the stripe group when\n"
             "it is sent (reads of K - 1 other data chunks and of a parity chunk).",
             "--ec-kept-deltas", 0, 65536},
            &OdsConfig::ec_kept_deltas},
          F{{"log", "level", "trace, debug, info, warn, error or off.", "--log-level"},
            &OdsConfig::log_level},
          F{{"log", "file", "Log file; \"\" logs to stderr.", "--log-file"}, &OdsConfig::log_file},
      });
  return table;
}

Status load_config_file(const std::string& path, OdsConfig& c) {
  return ods_config_table().load_file(path, c);
}

Status validate_config(const OdsConfig& c) {
  SURGE_RETURN_IF_ERROR(ods_config_table().check(c));
  if (c.max_io_bytes > c.pool_1m_buffers * (uint64_t{1} << 20)) {
    return Status::InvalidArgument("store.max_io_bytes (" + std::to_string(c.max_io_bytes) +
                                   ") must be between 1 and pool.buffers_1m MiB (" +
                                   std::to_string(c.pool_1m_buffers) + " MiB)");
  }
  if (!c.mds.empty()) {
    SURGE_RETURN_IF_ERROR(net::parse_address_list(c.mds, "mds.address: the MDS address").status());
  }
  return Status::OK();
}

}  // namespace surge::ods
