// Leadership: whether this MDS runs the background work that must run once
// per file system (marking silent data servers down, chain reconfiguration
// and orphan collection), and which MDS serve the file system now. One MDS on RocksDB is always the
// leader (the data dir's lock already makes it the only MDS of its file system); several on one
// etcd prefix elect one with an etcd lease (kv/etcd/etcd_leader.h), and the work moves to another
// when the leader dies or stops.
//
// is_leader() is conservative: it turns false before the lease can have
// expired in etcd, so two MDS never both believe they lead (within the
// clock rate drift of one lease period).
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"

namespace surge::mds {

class Leadership {
 public:
  virtual ~Leadership() = default;
  virtual bool is_leader() const = 0;
  // The leader's address as last seen ("" when none is known); this MDS's
  // own address when it leads.
  virtual std::string leader() const = 0;
  // Starts taking part under this MDS's address, known once its server
  // listens (the handlers that report the leader exist before that).
  virtual void begin(const std::string& self) = 0;
  // This MDS's address as begin() gave it.
  virtual std::string self() const = 0;
  // The addresses of every MDS serving the file system now, this one
  // included once it has begun (on etcd: those whose lease lives).
  virtual Result<std::vector<std::string>> members() const = 0;
};

// The only MDS of its store: always the leader.
class SoleLeader : public Leadership {
 public:
  bool is_leader() const override { return true; }
  std::string leader() const override {
    std::lock_guard lk(mu_);
    return self_;
  }
  void begin(const std::string& self) override {
    std::lock_guard lk(mu_);
    self_ = self;
  }
  std::string self() const override { return leader(); }
  Result<std::vector<std::string>> members() const override {
    std::lock_guard lk(mu_);
    return std::vector<std::string>{self_};
  }

 private:
  mutable std::mutex mu_;
  std::string self_;
};

}  // namespace surge::mds
