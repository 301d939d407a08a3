// ChainView: this data server's copy of the MDS's chain table, and the
// judge of every request's ChunkRef against it (docs/redundancy.md, "What
// every data-server request carries, and the refusals").
//
// The table comes from the MDS's cluster map (MdsGetClusterMap): fetched
// when the map version in a heartbeat reply moves past the one held, and
// when a request names a chain version newer than ours (or a chain we do
// not know). A request is refused, with a code of its own and never served
// under a stale map or a reused address, when:
//   * ref.target_id is set and is not our own id: WrongTarget (a client or
//     peer with a stale map, or our address reused by another target). A
//     server with an MDS that has not registered since it started is no
//     target yet and refuses too; one started without an MDS (tests, a
//     standalone store) does not check;
//   * it names a chain that, after a fresh fetch, does not list us as a
//     member in the write chain (SERVING or SYNCING): WrongTarget;
//   * its chain version is older than ours: StaleChain;
//   * its chain version is newer than ours even after a fetch (the MDS is
//     unreachable or behind): Unavailable.
// A caller on a transport thread (a read run in place) never waits for the
// MDS there: it learns that a fetch is needed and moves to a worker
// (RpcContext::defer_to_worker), which judges the ref again. Legacy
// requests (chain_id 0) get only the target check. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "net/proto/mds.pb.h"
#include "net/proto/ods.pb.h"
#include "net/rpc_channel.h"

namespace surge::ods {

// Where this server stands in one chain, under one chain version.
struct ChainPlace {
  uint32_t chain_id = 0;
  uint64_t version = 0;
  proto::mds::ChainMemberState state = proto::mds::MEMBER_UNKNOWN;
  uint32_t position = 0;      // members of the write chain before us (0: the head)
  bool head = false;          // first of the write chain
  bool tail = false;          // last of the write chain
  bool last_serving = false;  // the last SERVING member (serves dirty chunks)
  uint32_t successor = 0;     // next member of the write chain (0: we are the tail)
  std::string successor_address;
  bool successor_syncing = false;  // it is SYNCING: we are its resync source
  // EC chains: member i holds position i of every group (K data, then M
  // parity), so the chain order above means nothing for them.
  struct EcMember {
    uint32_t target_id = 0;
    std::string address;
    proto::mds::ChainMemberState state = proto::mds::MEMBER_UNKNOWN;
  };
  bool ec = false;
  uint32_t ec_data = 0;              // K
  uint32_t ec_parity = 0;            // M
  uint32_t ec_position = 0;          // the position we hold
  std::vector<EcMember> ec_members;  // by position
};

struct ChainViewOptions {
  // "" : no MDS, so no chains (every chained request is refused). Several,
  // comma-separated: each call goes to the one that answered last and
  // moves on to the next when it cannot be reached.
  std::string mds;
  std::string cluster_key;
  std::string scheme = "tcp";  // of peer addresses without one
};

class ChainView {
 public:
  // own_id: this server's target id as the MDS assigned it (0 until then).
  ChainView(ChainViewOptions options, std::function<uint32_t()> own_id);

  // A heartbeat reply said the cluster map is at `version`: fetch it when
  // ours is older (on the caller's thread: the heartbeat's).
  void note_map_version(uint64_t version);
  // Fetches the map from the MDS now (or takes the result of a fetch that
  // began after this call and ended while it waited for its turn).
  Status refresh();

  // Judges ref for operation `op` ("write", "read", ...; for messages).
  // Legacy refs (chain_id 0): OK or WrongTarget; place is left empty.
  // Chained: this server's place in the chain under the ref's version.
  // would_fetch set (a caller that must not wait): a ref that needs a fetch
  // from the MDS first is Unavailable with *would_fetch true, and nothing
  // is fetched.
  Result<ChainPlace> admit(const proto::ods::ChunkRef& ref, const char* op,
                           bool* would_fetch = nullptr);

  uint64_t map_version() const;

  // Our place in chain_id under the version we hold now (no fetch), or
  // WrongTarget / NotFound.
  Result<ChainPlace> place(uint32_t chain_id);
  // The chains whose write chain lists us, under the versions we hold.
  std::vector<ChainPlace> places();
  // Reports to the MDS that target_id, our successor in chain_id, failed
  // (MdsReportTargetFailure) and fetches the map again. OK when the report
  // reached the MDS.
  Status report_failure(uint32_t target_id, uint32_t chain_id, uint64_t chain_version,
                        const Status& seen);
  // MdsReportChainSync for a resync this server is the source of.
  Result<proto::mds::ReportChainSyncReply> report_sync(
      const proto::mds::ReportChainSyncRequest& req);
  // MdsNoteStandIn before this server stands in for an EC data position.
  Status note_stand_in(const proto::mds::NoteStandInRequest& req);
  // Called (on the fetching thread) after every fetch that moved the map.
  void on_change(std::function<void()> fn);
  uint32_t own_id() const { return own_id_(); }

 private:
  // Under mu_: our place in chain_id, or WrongTarget.
  Result<ChainPlace> place_locked(uint32_t chain_id, uint32_t me) const;
  // Calls M on the MDS that answered last, then on each other one that
  // cannot be reached; `what` names the call in errors.
  template <typename M>
  Status call_mds(const typename M::Request& req, typename M::Response* resp,
                  const std::string& what);

  ChainViewOptions options_;
  std::function<uint32_t()> own_id_;
  net::ChannelPool channels_;
  std::vector<std::string> mds_;        // options_.mds, split
  std::atomic<size_t> current_mds_{0};  // index of the MDS that answered last
  std::mutex fetch_mu_;  // one fetch at a time
  // Fetches begun so far, and the number of the last that succeeded (under
  // fetch_mu_): a caller that waited for the lock while a fetch begun after
  // its call succeeded has what it asked for and does not fetch again, so a
  // burst of requests needing a newer map costs one round trip, not one each.
  std::atomic<uint64_t> fetches_begun_{0};
  uint64_t last_ok_fetch_ = 0;
  mutable std::mutex mu_;
  uint64_t map_version_ = 0;
  std::unordered_map<uint32_t, proto::mds::Chain> chains_;
  std::unordered_map<uint32_t, std::string> addresses_;  // target id -> address
  std::function<void()> on_change_;
};

}  // namespace surge::ods
