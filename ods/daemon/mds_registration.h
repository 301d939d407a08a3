// MdsRegistration: keeps this data server known to every MDS of its file
// system.
//
// Registers (target id 0 the first time; the id the MDS assigns is kept in
// data_dir/target_id so a restart keeps its identity), then heartbeats with
// capacity, free space and load. Several MDS serving one file system from
// one etcd ("tcp://a:7100,tcp://b:7100") share the map, but each learns
// liveness and space from heartbeats of its own: this server registers with
// the first that answers, then with the others under the id it got, and
// heartbeats to each. With each MDS it registers again when that MDS
// answers a heartbeat with NotFound, and after any lost connection (the MDS
// may have restarted and forgotten us). The data server keeps serving
// whatever the MDS do: this runs on threads of its own, one per MDS (an MDS
// host that drops packets delays nobody's heartbeats but its own), and only
// logs failures. Registrations take turns, so the first id an MDS assigns
// is the one the others are told.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "net/rpc_channel.h"
#include "ods/store/object_store.h"

namespace surge::ods {

struct MdsRegistrationOptions {
  std::string mds;        // "tcp://127.0.0.1:7100", or several comma-separated
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

  // Reads the stored target id; tries one registration with each MDS now
  // (so the start line can name the id) but succeeds without them; starts
  // the thread. InvalidArgument for a malformed MDS list.
  Status start();
  void stop();

  // 0 until an MDS assigned one (or the stored id).
  uint32_t target_id() const { return target_id_.load(); }

 private:
  struct Peer {
    std::string address;
    bool registered = false;  // its thread only (and start(), before it)
    std::thread thread;
  };
  void run(Peer& peer);
  Status register_once(Peer& peer);
  Status heartbeat_once(Peer& peer);
  // One step with one MDS: register, or heartbeat and register again when
  // it forgot us.
  void tend(Peer& peer);
  Status save_target_id(uint32_t id);
  std::string id_path() const { return options_.data_dir + "/target_id"; }

  MdsRegistrationOptions options_;
  ObjectStore& store_;
  std::function<uint64_t()> load_;
  net::ChannelPool channels_;
  std::vector<Peer> peers_;  // fixed once start() returns
  std::atomic<uint32_t> target_id_{0};
  std::atomic<uint32_t> interval_ms_{1000};
  std::mutex register_mu_;  // one registration at a time: all get the same id
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
};

}  // namespace surge::ods
