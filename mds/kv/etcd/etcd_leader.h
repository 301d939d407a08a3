// EtcdLeader: elects one MDS among those on one etcd prefix to run the
// background work, and lists the MDS that serve (cluster/leadership.h).
// Each MDS holds an etcd lease it keeps alive, and a member key (its
// address) under it, so a dead MDS leaves the list when its lease
// expires; the leader is the MDS whose lease holds the leader key,
// written by a Txn that succeeds only while the key is absent. When the
// leader dies its lease expires (ttl) and etcd deletes the key; when it
// stops cleanly it revokes the lease, deleting the key at once. Every MDS
// that does not lead tries again each ttl/3.
//
// A leader counts itself leader only until (the send time of its last
// acknowledged keep-alive or grant) + ttl - one poll: etcd cannot have
// expired the lease before then, so a stalled leader stops acting before
// another can be elected.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "mds/cluster/leadership.h"

namespace surge::mds {

struct EtcdLeaderOptions {
  std::vector<std::string> endpoints;  // host:port of each member
  std::string key;                     // the full etcd key of the leader record
  std::string members_prefix;          // full etcd key prefix of the member keys
  std::chrono::seconds ttl{6};
  std::chrono::milliseconds deadline{2000};  // per gRPC call
};

class EtcdLeader : public Leadership {
 public:
  // Checks the options; begin() starts the campaign thread, which never
  // fails on etcd being down (it keeps trying, following meanwhile).
  static Result<std::unique_ptr<EtcdLeader>> Create(EtcdLeaderOptions options);
  ~EtcdLeader() override;
  // Revokes the lease (another MDS may lead at once) and joins the thread.
  void stop();

  bool is_leader() const override;
  std::string leader() const override;
  void begin(const std::string& self) override;
  std::string self() const override;
  Result<std::vector<std::string>> members() const override;

 private:
  struct Impl;
  explicit EtcdLeader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace surge::mds
