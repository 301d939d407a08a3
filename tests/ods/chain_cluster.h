// ChainCluster: a real surge-mds and N real surge-ods processes on loopback
// for the chain tests (docs/redundancy.md), with helpers to create a file
// whose layout names chains, read the chain table the MDS ships, and send
// chained requests (a ChunkRef to one member) straight to any member.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "net/proto/mds_methods.h"
#include "net/proto/ods_write_pieces.h"
#include "tests/common/time_scale.h"
#include "tests/ods/ods_fixture.h"

namespace surge::ods::testing {

namespace mpb = surge::proto::mds;

struct ChainClusterOptions {
  int data_servers = 3;
  uint32_t replicas = 3;
  // Heartbeat silence before the MDS marks a target DOWN, as Release would
  // use it: start() scales it for sanitized builds (tests/common/time_scale.h),
  // where a healthy but slowed data server can miss 1 s of heartbeats and
  // be marked down, and its chains resync under the test's feet.
  uint32_t target_timeout_ms = 60000;
  // Non-empty: data server 0's data dir is a tmpfs of this size ("40m"),
  // mounted for the test (needs root; throws without), so it fills.
  std::string ods0_tmpfs_size = {};
};

class ChainCluster {
 public:
  ~ChainCluster() {
    ods_.clear();  // the data servers go before the file systems they use
    for (const std::string& m : mounts_) ::umount2(m.c_str(), MNT_DETACH);
  }

  struct Ods {
    DaemonProcess proc;
    std::string dir, address, log;
    uint32_t id = 0;
  };

  void start(const ChainClusterOptions& o) {
    opts_ = o;
    key_file_ = make_key(dir_);
    key_ = key_of(key_file_);
    const std::string mds_config = dir_.path() + "/mds.toml";
    std::ofstream(mds_config)
        << "[namespace]\ndefault_replicas = " << o.replicas
        << "\ndefault_stripe_count = 1\n[targets]\nheartbeat_interval_ms = 100\n"
        << "timeout_ms = " << surge::test::sanitizer_scaled(o.target_timeout_ms)
        << "\n"
        // A small disk is not "full" to placement.
        << (o.ods0_tmpfs_size.empty() ? "" : "min_free_bytes = 1048576\n");
    const std::string line = mds_.start(
        build_dir() + "/mds/surge-mds",
        {"--config", mds_config, "--data-dir", dir_.path() + "/mds", "--listen", listen_address(),
         "--cluster-key-file", key_file_},
        dir_.path() + "/mds.log");
    mds_address_ = address_of(line);
    net::ChannelOptions co;
    co.cluster_key = key_;
    auto ch = net::RpcChannel::Connect(mds_address_, co);
    if (!ch.ok()) throw std::runtime_error("connect to the MDS: " + ch.status().ToString());
    mds_ch_ = *ch;
    ods_.resize(o.data_servers);
    for (int i = 0; i < o.data_servers; ++i) {
      ods_[i] = std::make_unique<Ods>();
      ods_[i]->dir = dir_.path() + "/ods" + std::to_string(i);
      ods_[i]->log = dir_.path() + "/ods" + std::to_string(i) + ".log";
      if (i == 0 && !o.ods0_tmpfs_size.empty()) mount_tmpfs(ods_[i]->dir, o.ods0_tmpfs_size);
      start_ods(i, listen_address());
    }
  }

  void mount_tmpfs(const std::string& path, const std::string& size) {
    std::filesystem::create_directories(path);
    const std::string opts = "size=" + size;
    if (::mount("tmpfs", path.c_str(), "tmpfs", 0, opts.c_str()) != 0) {
      throw std::runtime_error("mount a tmpfs of " + size + " on " + path +
                               " (needs root): " + std::strerror(errno));
    }
    mounts_.push_back(path);
  }

  // Starts (or restarts, on its old data dir) data server i.
  void start_ods(int i, const std::string& listen) {
    Ods& d = *ods_[i];
    const std::string cfg = dir_.path() + "/ods.toml";
    std::ofstream(cfg) << "[mds]\nretry_ms = 100\nheartbeat_interval_ms = 100\n";
    const std::string line = d.proc.start(
        build_dir() + "/ods/surge-ods",
        {"--config", cfg, "--data-dir", d.dir, "--listen", listen, "--mds", mds_address_,
         "--cluster-key-file", key_file_, "--pool-1m-buffers", "16", "--log-level", log_level_},
        d.log);
    d.address = address_of(line);
    auto p = line.find(" target ");
    d.id = p == std::string::npos ? 0 : static_cast<uint32_t>(std::stoul(line.substr(p + 8)));
    if (d.id == 0) throw std::runtime_error("surge-ods " + std::to_string(i) + " did not register: " + line);
    clients_.erase(d.id);
  }

  // Restarts data server i on its old address and data.
  void restart_ods(int i) {
    std::string listen = ods_[i]->address;
    start_ods(i, listen);
  }

  mpb::ClusterMap map() {
    mpb::GetClusterMapRequest q;
    mpb::GetClusterMapReply a;
    Status st = mds_ch_->call<mpb::MdsGetClusterMap>(q, &a);
    if (!st.ok()) throw std::runtime_error("cluster map: " + st.ToString());
    return a.map();
  }

  mpb::Chain chain(uint32_t id) {
    const mpb::ClusterMap m = map();
    for (const auto& c : m.chains().chains()) {
      if (c.chain_id() == id) return c;
    }
    throw std::runtime_error("no chain " + std::to_string(id) + " in the map");
  }

  // Waits until pred(chain) holds (the MDS acts on heartbeats and reports).
  template <typename P>
  mpb::Chain wait_chain(uint32_t id, P pred, std::chrono::seconds limit = std::chrono::seconds(60)) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (true) {
      mpb::Chain c = chain(id);
      if (pred(c)) return c;
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("chain " + std::to_string(id) + " never reached the state wanted: " +
                                 c.DebugString());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  void wait_targets_up() {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      int up = 0;
      const mpb::ClusterMap m = map();
      for (const auto& t : m.targets()) up += t.state() == mpb::TARGET_UP;
      if (up == static_cast<int>(ods_.size())) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw std::runtime_error("not every data server is UP at the MDS");
  }

  // Makes /name an EC K+M directory (one slot per file); returns its inode.
  uint64_t mkdir_ec(const std::string& name, uint32_t k, uint32_t m) {
    mpb::MkdirRequest q;
    q.mutable_cred();
    q.set_parent(1);
    q.set_name(name);
    q.set_mode(0755);
    mpb::EntryReply a;
    Status st = mds_ch_->call<mpb::MdsMkdir>(q, &a);
    if (!st.ok()) throw std::runtime_error("mkdir " + name + ": " + st.ToString());
    mpb::SetLayoutRequest lq;
    lq.mutable_cred();
    lq.set_ino(a.attr().ino());
    lq.mutable_layout()->set_stripe_count(1);
    lq.mutable_layout()->set_scheme(mpb::SCHEME_EC);
    lq.mutable_layout()->set_ec_data(k);
    lq.mutable_layout()->set_ec_parity(m);
    mpb::SetLayoutReply la;
    st = mds_ch_->call<mpb::MdsSetLayout>(lq, &la);
    if (!st.ok()) throw std::runtime_error("setstripe --ec on " + name + ": " + st.ToString());
    return a.attr().ino();
  }

  // Creates name in directory parent (default /); returns (ino, chain of
  // slot 0).
  std::pair<uint64_t, uint32_t> create(const std::string& name, uint64_t parent = 1) {
    mpb::CreateRequest cq;
    cq.mutable_cred();
    cq.set_parent(parent);
    cq.set_name(name);
    cq.set_mode(0644);
    cq.set_exclusive(true);
    mpb::EntryReply ca;
    Status st = mds_ch_->call<mpb::MdsCreate>(cq, &ca);
    if (!st.ok()) throw std::runtime_error("create " + name + ": " + st.ToString());
    const auto& l = ca.attr().layout();
    if (l.format() != 2 || l.chains_size() < 1) {
      throw std::runtime_error("create " + name + ": not a chained layout: " + l.DebugString());
    }
    return {ca.attr().ino(), l.chains(0)};
  }

  // Members of the write chain (SERVING or SYNCING) in order.
  static std::vector<uint32_t> write_chain(const mpb::Chain& c) {
    std::vector<uint32_t> out;
    for (const auto& m : c.members()) {
      if (m.state() == mpb::MEMBER_SERVING || m.state() == mpb::MEMBER_SYNCING) out.push_back(m.target_id());
    }
    return out;
  }

  int index_of(uint32_t target) const {
    for (size_t i = 0; i < ods_.size(); ++i) {
      if (ods_[i]->id == target) return static_cast<int>(i);
    }
    throw std::runtime_error("no data server is target " + std::to_string(target));
  }
  Ods& ods(int i) { return *ods_[i]; }
  Ods& target(uint32_t id) { return *ods_[index_of(id)]; }

  // Safe from several threads at once (one connection per target, shared).
  OdsClient& client(uint32_t target_id) {
    std::lock_guard lk(clients_mu_);
    auto& c = clients_[target_id];
    if (!c) c = std::make_unique<OdsClient>(target(target_id).address, key_);
    return *c;
  }
  void drop_client(uint32_t target_id) {
    std::lock_guard lk(clients_mu_);
    clients_.erase(target_id);
  }

  static pb::ChunkRef ref(uint32_t target, const mpb::Chain& c, uint64_t ino, uint32_t slot = 0) {
    pb::ChunkRef r;
    r.set_target_id(target);
    r.set_chain_id(c.chain_id());
    r.set_chain_version(c.version());
    r.set_ino(ino);
    r.set_slot(slot);
    return r;
  }
  // EC chains: position p's chunk at its member (member p).
  static pb::ChunkRef ec_ref(const mpb::Chain& c, uint64_t ino, uint32_t p) {
    pb::ChunkRef r = ref(c.members(static_cast<int>(p)).target_id(), c, ino);
    r.set_position(p);
    return r;
  }

  Result<pb::WriteReply> write(const pb::ChunkRef& ref, uint64_t off, std::span<const std::byte> d,
                               bool sync = false) {
    pb::WriteRequest q;
    q.set_sync(sync);
    return write(ref, off, d, std::move(q));
  }
  // As write, with q's other fields (the EC group steps: ec_hold,
  // ec_group_versions) as given.
  Result<pb::WriteReply> write(const pb::ChunkRef& ref, uint64_t off, std::span<const std::byte> d,
                               pb::WriteRequest q) {
    q.set_offset(off);
    q.set_length(d.size());
    pb::set_piece_crcs(q, d.data(), d.size());
    *q.mutable_ref() = ref;
    net::BulkRegion r{const_cast<std::byte*>(d.data()), d.size(), net::BulkAccess::kServerPull};
    pb::WriteReply a;
    SURGE_RETURN_IF_ERROR(client(ref.target_id()).channel().call<pb::OdsWrite>(q, &a, {&r, 1}));
    return a;
  }

  // Step 3 of an EC full-group write at ref's data position.
  Status ec_commit(const pb::ChunkRef& ref, uint64_t version,
                   std::vector<uint32_t> parity_applied) {
    pb::EcCommitRequest q;
    *q.mutable_ref() = ref;
    pb::EcHeldUpdate* u = q.add_updates();
    u->set_version(version);
    for (uint32_t p : parity_applied) u->add_parity_applied(p);
    pb::EcCommitReply a;
    return client(ref.target_id()).channel().call<pb::OdsEcCommit>(q, &a);
  }

  // Reads [off, +len) of the chunk at ref's member; checks the reply CRC.
  Result<std::vector<std::byte>> read(const pb::ChunkRef& ref, uint64_t off, uint64_t len) {
    std::vector<std::byte> buf(len);
    pb::ReadRequest q;
    q.set_offset(off);
    q.set_length(len);
    *q.mutable_ref() = ref;
    net::BulkRegion r{buf.data(), buf.size(), net::BulkAccess::kServerPush};
    pb::ReadReply a;
    SURGE_RETURN_IF_ERROR(client(ref.target_id()).channel().call<pb::OdsRead>(q, &a, {&r, 1}));
    if (surge::crc32c(buf.data(), a.length()) != a.crc32c()) {
      return Status::Corruption("read reply CRC does not match the bytes received");
    }
    buf.resize(a.length());
    return buf;
  }

  Result<pb::StatReply> stat(const pb::ChunkRef& ref) {
    pb::StatRequest q;
    *q.mutable_ref() = ref;
    pb::StatReply a;
    SURGE_RETURN_IF_ERROR(client(ref.target_id()).channel().call<pb::OdsStat>(q, &a));
    return a;
  }

  Status truncate(const pb::ChunkRef& ref, uint64_t size) {
    pb::TruncateRequest q;
    q.set_size(size);
    *q.mutable_ref() = ref;
    pb::TruncateReply a;
    return client(ref.target_id()).channel().call<pb::OdsTruncate>(q, &a);
  }

  Result<bool> remove(const pb::ChunkRef& ref) {
    pb::RemoveRequest q;
    *q.mutable_ref() = ref;
    pb::RemoveReply a;
    SURGE_RETURN_IF_ERROR(client(ref.target_id()).channel().call<pb::OdsRemove>(q, &a));
    return a.existed();
  }

  Status sync(const pb::ChunkRef& ref) {
    pb::SyncRequest q;
    *q.add_refs() = ref;
    pb::SyncReply a;
    return client(ref.target_id()).channel().call<pb::OdsSync>(q, &a);
  }

  // SIGSTOPs pid and waits until the kernel shows it stopped.
  static bool stop_process(pid_t pid) {
    if (::kill(pid, SIGSTOP) != 0) return false;
    for (int i = 0; i < 500; ++i) {
      std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
      std::string line;
      std::getline(in, line);
      auto rp = line.rfind(')');
      if (rp != std::string::npos && rp + 2 < line.size() && line[rp + 2] == 'T') return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

  // The targets the MDS marked down (heartbeats silent past its timeout),
  // in order, from its log: a test that kills one expects only that one.
  std::vector<uint32_t> marked_down() {
    std::vector<uint32_t> ids;
    std::ifstream in(dir_.path() + "/mds.log");
    for (std::string line; std::getline(in, line);) {
      const size_t end = line.find(": marked down");
      const size_t p = line.rfind("] target ", end);
      if (end == std::string::npos || p == std::string::npos) continue;
      ids.push_back(static_cast<uint32_t>(std::stoul(line.substr(p + 9))));
    }
    return ids;
  }
  // The MDS's log lines on targets and chains: what moved the chain versions.
  std::string chain_events() {
    std::ifstream in(dir_.path() + "/mds.log");
    std::string out = "\nsurge-mds on targets and chains:\n";
    for (std::string line; std::getline(in, line);) {
      if (line.find("] chain") != std::string::npos || line.find("] target") != std::string::npos) {
        out += line + "\n";
      }
    }
    return out;
  }

  std::string log_of(int i) {
    std::ifstream in(ods_[i]->log);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  const std::string& key() const { return key_; }

 private:
  ChainClusterOptions opts_;
  std::string log_level_ = std::getenv("SURGE_TEST_ODS_LOG") ? std::getenv("SURGE_TEST_ODS_LOG") : "info";
  TempDir dir_;
  std::string key_file_, key_, mds_address_;
  DaemonProcess mds_;
  std::shared_ptr<net::RpcChannel> mds_ch_;
  std::vector<std::unique_ptr<Ods>> ods_;
  std::mutex clients_mu_;
  std::map<uint32_t, std::unique_ptr<OdsClient>> clients_;
  std::vector<std::string> mounts_;  // tmpfs mounts to undo
};

}  // namespace surge::ods::testing
