// EtcdKvStore: KvStore on an etcd v3 cluster, reached over its gRPC API
// (KV.Range and KV.Txn). A key is stored as <prefix><space byte><key>, so
// several file systems can share one etcd under different prefixes.
//
// Guarantees (README.md in this folder): a commit is one etcd Txn, applied
// all-or-nothing, and etcd acknowledges it only after a quorum of members
// has it in their fsynced Raft logs, so every commit is durable when it
// returns and make_durable() has nothing left to do. Every KvBatch::Check is
// a Compare in that Txn; a failed compare commits nothing and returns Busy.
// Reads are linearizable (etcd's default), scans read one revision across
// their pages.
//
// Limits: etcd refuses a Txn with more than --max-txn-ops compares or ops
// (default 128) and a request over --max-request-bytes (default 1.5 MiB).
// A batch over either fails here with an error naming the limit; an atomic
// batch is never split.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mds/kv/kv_store.h"

namespace surge::mds {

struct EtcdKvOptions {
  std::vector<std::string> endpoints;  // host:port of each member's client URL
  std::string prefix = "surge/";       // prepended to every key
  std::chrono::milliseconds deadline{5000};  // per gRPC call
  // A call that reached members that could not commit it (no leader: an
  // election, after the leader died) is tried again over every member for
  // this long before it fails: one member down stays invisible even when
  // it was the leader. A lost quorum fails after it.
  std::chrono::milliseconds election_wait{5000};
  // Must not exceed the members' --max-txn-ops / --max-request-bytes.
  uint32_t max_txn_ops = 128;
  uint64_t max_request_bytes = 1536 * 1024;
  uint32_t scan_page_keys = 256;  // keys per Range page of a scan
};

class EtcdKvStore : public KvStore {
 public:
  // Connects lazily: Open fails only on bad options, never on etcd being
  // down (the first call reports that, naming the endpoints).
  static Result<std::unique_ptr<EtcdKvStore>> Open(const EtcdKvOptions& options);
  ~EtcdKvStore() override;

  Result<std::optional<std::string>> get(Space s, std::string_view key) override;
  Status scan(Space s, std::string_view begin, std::string_view end, const ScanFn& fn) override;
  Status commit(const KvBatch& batch, bool durable = true) override;
  Status make_durable() override;
  uint64_t estimate_keys(Space s) override;
  size_t max_batch_ops() const override { return options().max_txn_ops; }

  // A count_only range: exact, one round trip.
  Result<uint64_t> count_keys(Space s) override;

  const EtcdKvOptions& options() const;
  // The etcd key that holds key of space s (the prefix and the space's
  // byte before it), for what keeps records outside batches (leases).
  std::string etcd_key(Space s, std::string_view key) const;

 private:
  struct Impl;
  explicit EtcdKvStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace surge::mds
