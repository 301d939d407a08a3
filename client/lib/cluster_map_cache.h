// ClusterMapCache: the client's copy of the MDS cluster map (target id ->
// address and state, chain id -> members and version). Refreshed when the session heartbeat reports a newer
// map version and whenever a data-server request fails on its connection,
// so a data server that restarted (possibly on a new address) is found
// again without remounting. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/status.h"
#include "net/proto/mds.pb.h"

namespace surge::client {

class ClusterMapCache {
 public:
  // fetch() asks the MDS for the current map.
  using Fetch = std::function<Result<proto::mds::ClusterMap>()>;
  ClusterMapCache(Fetch fetch, std::string default_scheme);

  Status refresh();
  // Refreshes when `version` is newer than what we hold.
  void note_version(uint64_t version);
  // The next address_of() refetches the map first.
  void mark_stale();

  // "tcp://127.0.0.1:7101" for a target; NotFound / Unavailable (down).
  Result<std::string> address_of(uint32_t target_id);
  // The chain as the map shows it (refetched first when stale or unknown);
  // IOError when the map cannot be had or does not hold it.
  Result<proto::mds::Chain> chain(uint32_t chain_id);
  uint64_t version() const;
  proto::mds::ClusterMap snapshot() const;

 private:
  Fetch fetch_;
  std::string scheme_;
  mutable std::mutex mu_;
  proto::mds::ClusterMap map_;
  std::unordered_map<uint32_t, proto::mds::TargetInfo> targets_;
  std::unordered_map<uint32_t, proto::mds::Chain> chains_;
  bool stale_ = true;
};

}  // namespace surge::client
