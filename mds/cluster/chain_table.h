// ChainTable: the chains of targets that hold the chunks of format 2 files
// (docs/redundancy.md has the design: formation, member states, resync,
// replacement, drain, placement). ClusterMap owns it and calls it under its
// own lock, with the targets as it sees them; this class keeps the chains,
// applies the state changes and persists the chains that changed.
//
// Invariants: chain ids are never reused; the table version grows with
// every change and a changed chain's version becomes the new table version;
// a target is at most once in a chain; a replicated chain has at most one
// SYNCING member, its tail, and never a SYNCING member without a SERVING
// one before it; an EC chain's members keep their positions.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "mds/kv/kv_store.h"
#include "net/proto/mds.pb.h"

namespace surge::mds {

struct ChainTableOptions {
  uint32_t strides = 4;                // chains per target per width (formation)
  uint64_t replace_after_ms = 600000;  // an OFFLINE member this long is replaced
  uint32_t rebalance_max_moves = 4;    // rebalance moves in flight at once
};

// A target as placement and replacement see it.
struct TargetView {
  uint32_t id = 0;
  bool alive = false;      // not DOWN
  bool draining = false;
  bool full = false;       // free space below the floor
  uint64_t free_bytes = 0;
  // Heard from (registered or heartbeated) since this MDS started. A
  // restarted MDS assumes its targets alive until the timeout says
  // otherwise, so new files place at once; but a chain takes back a member
  // it lost, or a newcomer, only once that target has been heard.
  bool heard = true;
  bool placeable() const { return alive && !draining && !full; }
  bool can_join() const { return placeable() && heard; }
};

// The width a chain is formed for: replicas N, or EC K + M.
struct ChainShape {
  proto::mds::RedundancyScheme scheme = proto::mds::SCHEME_REPLICAS;
  uint32_t replicas = 1;
  uint32_t ec_data = 0;
  uint32_t ec_parity = 0;
  uint32_t width() const {
    return scheme == proto::mds::SCHEME_EC ? ec_data + ec_parity : replicas;
  }
  bool operator<(const ChainShape& o) const;
  bool matches(const proto::mds::Chain& c) const;
  std::string describe() const;  // "replicas 2", "ec 4+2"
};

class ChainTable {
 public:
  explicit ChainTable(ChainTableOptions o) : opts_(o) {}

  // Reads the chains, the table version and the id high-water mark,
  // replacing what the table held.
  Status load(KvStore* kv);
  // Adds the records of every chain changed since the last call (and the
  // version and high-water mark) to b.
  void persist(KvBatch& b);
  bool dirty() const { return !dirty_.empty() || meta_dirty_; }

  uint64_t version() const { return version_; }
  // The table as the cluster map ships it (health and sync filled in).
  void fill(proto::mds::ChainTable* out) const;
  // One chain with health, or nullptr.
  const proto::mds::Chain* find(uint32_t chain_id) const;
  proto::mds::Chain shipped(const proto::mds::Chain& c) const;  // with health

  // Forms the chains of shape over targets (formation in
  // docs/redundancy.md) and adds those whose member set the table lacks;
  // clears `placement` on chains of that shape the formation no longer
  // has. Returns whether anything changed. NoSpace when there are fewer
  // targets than the shape is wide.
  Result<bool> form(const ChainShape& shape, const std::vector<uint32_t>& target_ids,
                    uint64_t now_ms);
  // Whether any chain of shape exists (formed before).
  bool has_shape(const ChainShape& shape) const;
  // Forms again, for every shape the table holds (a target joined).
  bool reform_all(const std::vector<uint32_t>& target_ids, uint64_t now_ms);

  // Brings the chains in line with the targets: members of dead targets go
  // OFFLINE, a returning member syncs (or serves, when it was the last to
  // serve), members absent past replace_after_ms and draining members are
  // replaced, finished moves complete. Returns whether anything changed.
  bool reconcile(const std::vector<TargetView>& targets, uint64_t now_ms);

  // A resync source's report (MdsReportChainSync). done under the chain's
  // current version makes the member SERVING. StaleChain when the chain
  // moved on, NotFound / InvalidArgument for a chain or member that is not
  // syncing.
  Result<proto::mds::Chain> sync_report(const proto::mds::ReportChainSyncRequest& req,
                                        uint64_t now_ms);
  // MdsNoteStandIn: marks the offline member of an EC data position
  // stood_in (persisted with the table, no new chain version: only the
  // MDS acts on it). StaleChain when the chain moved or the member is not
  // offline; NotFound / InvalidArgument for a chain or position that is
  // not an EC data position.
  Status note_stand_in(const proto::mds::NoteStandInRequest& req);

  // chain_count placeable chains of shape for a new layout (fewer when the
  // table has fewer), rotating so consecutive files start on different
  // chains, the first weighted by free space. Empty when none is placeable.
  std::vector<uint32_t> pick(const ChainShape& shape, uint32_t chain_count,
                             const std::vector<TargetView>& targets);

  // Rebalance (chain_rebalance.cpp): a target's load is the sum over its
  // chains of (the chain's bytes, chain_bytes, + 1); starts moves of
  // memberships from the heaviest targets that can take members to the
  // lightest while a move narrows the gap, up to max_moves rebalance moves
  // in flight; only chains whose members all serve and that have no move
  // under way give one up. dry_run changes nothing. Returns the moves
  // started (or that would be).
  static constexpr const char* kRebalanceReason = "rebalance";
  std::vector<proto::mds::ChainMoveOfChain> rebalance(
      const std::vector<TargetView>& targets, const std::map<uint32_t, uint64_t>& chain_bytes,
      uint32_t max_moves, bool dry_run, uint64_t now_ms);
  // Rebalance moves not yet finished.
  uint32_t rebalance_in_flight() const;

  // How many chains list target (any state).
  uint32_t memberships(uint32_t target_id) const;
  // Chains listing target, in id order.
  std::vector<uint32_t> chains_of(uint32_t target_id) const;

 private:
  // Marks a chain changed; finish() gives every chain changed since the
  // last finish() the next table version.
  void touch(uint32_t chain_id);
  void finish();
  bool placeable(const proto::mds::Chain& c, const std::map<uint32_t, TargetView>& t) const;
  // A target for chain c: placeable and heard, not in c, fewest memberships (counting
  // `extra`), most free; 0 when none.
  uint32_t replacement_for(const proto::mds::Chain& c, const std::map<uint32_t, TargetView>& t,
                           std::map<uint32_t, uint32_t>& extra) const;
  bool reconcile_chain(proto::mds::Chain& c, const std::map<uint32_t, TargetView>& t,
                       std::map<uint32_t, uint32_t>& extra, uint64_t now_ms);

  ChainTableOptions opts_;
  std::map<uint32_t, proto::mds::Chain> chains_;
  std::set<uint32_t> dirty_;    // changed since the last persist()
  std::set<uint32_t> pending_;  // changed since the last finish()
  bool meta_dirty_ = false;
  uint64_t version_ = 0;
  uint32_t next_id_ = 1;
  std::map<uint32_t, int64_t> rr_credit_;  // smooth weighted round robin, per chain
  // Resync progress by chain, then syncing target: reported, not persisted.
  std::map<uint32_t, std::map<uint32_t, proto::mds::ChainSyncProgress>> sync_;
};

// Whether `target` is one of the chain's members, in any state.
bool chain_has_member(const proto::mds::Chain& c, uint32_t target);

}  // namespace surge::mds
