// MdsRegistration: keeps this data server known to the MDS.
//
// Registers (target id 0 the first time; the id the MDS assigns is kept in
// data_dir/target_id so a restart keeps its identity), then heartbeats with
// capacity, free space and load. It registers again when the MDS answers a
// heartbeat with NotFound, and after any lost connection (the MDS may have
// restarted and forgotten us). The data server keeps serving whatever the
// MDS does: this runs on its own thread and only logs failures.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "common/status.h"
#include "net/rpc_channel.h"
#include "ods/store/object_store.h"

namespace surge::ods {

struct MdsRegistrationOptions {
  std::string mds;        // "tcp://127.0.0.1:7100"
  std::string advertise;  // our address as clients should dial it
  std::string data_dir;   // where target_id lives
  std::string cluster_key;
  uint32_t heartbeat_interval_ms = 0;  // 0: the MDS's choice
  uint32_t retry_ms = 1000;
  // Called with the cluster map version of every heartbeat reply (on this
  // class's thread), so the chain view refetches the map when it moves.
  std::function<void(uint64_t)> on_map_version;
};

class MdsRegistration {
 public:
  MdsRegistration(MdsRegistrationOptions options, ObjectStore& store, std::function<uint64_t()> load);
  ~MdsRegistration();

  // Reads the stored target id; tries one registration now (so the start
  // line can name the id) but succeeds without the MDS; starts the thread.
  Status start();
  void stop();

  // 0 until the MDS assigned one (or the stored id).
  uint32_t target_id() const { return target_id_.load(); }
  bool registered() const { return registered_.load(); }

 private:
  void run();
  Status register_once();
  Status heartbeat_once();
  Status save_target_id(uint32_t id);
  std::string id_path() const { return options_.data_dir + "/target_id"; }

  MdsRegistrationOptions options_;
  ObjectStore& store_;
  std::function<uint64_t()> load_;
  net::ChannelPool channels_;
  std::atomic<uint32_t> target_id_{0};
  std::atomic<bool> registered_{false};
  uint32_t interval_ms_ = 1000;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace surge::ods
