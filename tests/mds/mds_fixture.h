// Test fixture for the namespace: a real RocksDB in a fresh temp dir (or,
// with SURGE_TEST_KV=etcd, a fresh key prefix on a real 3-member etcd
// cluster shared by the test process: the same tests against both
// backends, see tests/mds/CMakeLists.txt), a
// cluster map with three registered (fake-address) data servers, a session
// table and FakeObjectTargets recording what the MDS asked of the data
// servers. Helpers return Status/Result so each test states its one check.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "mds/cluster/cluster_map.h"
#include "mds/cluster/object_targets.h"
#include "mds/cluster/orphan_collector.h"
#include "mds/cluster/session_table.h"
#include "mds/kv/etcd/etcd_kv_store.h"
#include "mds/kv/rocksdb_kv_store.h"
#include "mds/namespace/checker.h"
#include "mds/namespace/namespace.h"
#include "net/proto/mds_methods.h"
#include "tests/common/etcd_test_env.h"

namespace surge::mds::testing {

namespace pb = ::surge::proto::mds;
inline constexpr uint64_t kRoot = pb::kRootIno;

class FakeObjectTargets : public ObjectTargets {
 public:
  Status truncate(uint32_t target, const std::string& address, uint64_t object_id, uint64_t size,
                  uint64_t truncate_seq) override {
    wait_before_truncate();
    std::lock_guard lk(mu);
    if (failing.count(target)) return Status::Unavailable("fake target " + address + " fails");
    truncates.emplace_back(target, object_id, size);
    truncate_seqs.push_back(truncate_seq);
    return Status::OK();
  }
  Status remove(uint32_t target, const std::string& address, uint64_t object_id,
                uint64_t truncate_seq) override {
    std::lock_guard lk(mu);
    if (failing.count(target)) return Status::Unavailable("fake target " + address + " fails");
    removed.emplace(target, object_id);
    remove_seqs.push_back(truncate_seq);
    return Status::OK();
  }
  Status truncate_chunk(const ChunkAddress& a, uint64_t size, uint64_t truncate_seq) override {
    wait_before_truncate();
    std::lock_guard lk(mu);
    if (failing.count(a.target_id)) return Status::Unavailable("fake target " + a.address + " fails");
    chunk_truncates.emplace_back(a, size);
    chunk_truncate_seqs.push_back(truncate_seq);
    return Status::OK();
  }
  Status remove_chunk(const ChunkAddress& a, uint64_t truncate_seq) override {
    std::lock_guard lk(mu);
    if (failing.count(a.target_id)) return Status::Unavailable("fake target " + a.address + " fails");
    removed_chunks.push_back(a);
    remove_seqs.push_back(truncate_seq);
    return Status::OK();
  }
  Status probe(const std::string& address) override {
    std::lock_guard lk(mu);
    if (dead_addresses.count(address)) return Status(Code::kConnectionRefused, "fake " + address + ": refused");
    return Status::OK();
  }
  // A slow data server: while held, truncates wait (outside mu) until
  // release_truncates().
  void hold_truncates() {
    std::lock_guard lk(mu);
    held = true;
  }
  void release_truncates() {
    {
      std::lock_guard lk(mu);
      held = false;
    }
    held_cv.notify_all();
  }
  size_t truncates_waiting() {
    std::lock_guard lk(mu);
    return waiting;
  }
  void wait_before_truncate() {
    std::unique_lock lk(mu);
    ++waiting;
    held_cv.wait(lk, [&] { return !held; });
    --waiting;
  }
  std::mutex mu;
  std::condition_variable held_cv;
  bool held = false;
  size_t waiting = 0;
  std::set<std::string> dead_addresses;  // probe() fails for these
  std::vector<std::pair<ChunkAddress, uint64_t>> chunk_truncates;
  std::vector<uint64_t> chunk_truncate_seqs;  // beside chunk_truncates
  std::vector<ChunkAddress> removed_chunks;
  std::vector<std::tuple<uint32_t, uint64_t, uint64_t>> truncates;  // target, object, size
  std::vector<uint64_t> truncate_seqs;                              // beside truncates
  std::vector<uint64_t> remove_seqs;  // of every remove and remove_chunk, in order
  std::set<std::pair<uint32_t, uint64_t>> removed;                  // target, object
  std::set<uint32_t> failing;
};

inline pb::Credentials cred(uint32_t uid, uint32_t gid, std::vector<uint32_t> groups = {}) {
  pb::Credentials c;
  c.set_uid(uid);
  c.set_gid(gid);
  for (uint32_t g : groups) c.add_groups(g);
  return c;
}
inline pb::Credentials root_cred() {
  return cred(0, 0);
}

class NamespaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/surge-mds-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    open_all();
    // Tests act as ordinary users in the root directory: make it 0777 (the
    // freshly formatted attributes are kept in fresh_root_).
    auto a = getattr(kRoot);
    ASSERT_TRUE(a.ok());
    fresh_root_ = *a;
    pb::SetAttrRequest r;
    *r.mutable_cred() = root_cred();
    r.set_ino(kRoot);
    r.set_valid(pb::SETATTR_MODE);
    r.set_mode(0777);
    ASSERT_TRUE(setattr(r).ok());
  }
  void TearDown() override {
    close_all();
    std::filesystem::remove_all(dir_);
  }

  void open_all() {
    if (test::test_kv_is_etcd()) {
      ASSERT_NO_FATAL_FAILURE(open_etcd_kv());
    } else {
      ASSERT_NO_FATAL_FAILURE(open_rocks_kv());
    }
    auto id = Namespace::FormatOrLoad(kv_.get(), 0);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    auto map = ClusterMap::Load(kv_.get(), *id, map_opts_);
    ASSERT_TRUE(map.ok()) << map.status().ToString();
    map_ = std::move(*map);
    if (register_targets_) {
      ASSERT_NO_FATAL_FAILURE(register_targets(1, 3));
    }
    sessions_ = std::make_unique<SessionTable>(kv_.get(), session_opts_, sessions_shared_);
    auto ns = Namespace::Open(kv_.get(), map_.get(), sessions_.get(), &objects_, ns_opts_);
    ASSERT_TRUE(ns.ok()) << ns.status().ToString();
    ns_ = std::move(*ns);
  }
  void open_etcd_kv() {
    auto& etcd = test::shared_etcd();
    ASSERT_TRUE(etcd.started.ok()) << etcd.started.ToString();
    // The store "lives" in dir_ as with RocksDB: dir_/etcd-prefix names this
    // test's file system and survives reopen(); a test that wipes dir_ gets
    // a fresh, empty store on the next open.
    const std::string marker = dir_ + "/etcd-prefix";
    if (!std::filesystem::exists(marker)) {
      std::ofstream(marker) << test::fresh_etcd_prefix();
    }
    std::string etcd_prefix;
    std::ifstream(marker) >> etcd_prefix;
    ASSERT_FALSE(etcd_prefix.empty()) << "cannot read " << marker;
    EtcdKvOptions ko;
    ko.endpoints = etcd.cluster->endpoints();
    ko.prefix = etcd_prefix;
    auto kv = EtcdKvStore::Open(ko);
    ASSERT_TRUE(kv.ok()) << kv.status().ToString();
    kv_ = std::move(*kv);
  }
  void open_rocks_kv() {
    RocksKvOptions ko;
    ko.path = dir_ + "/db";
    ko.sync = sync_;
    auto kv = RocksKvStore::Open(ko);
    ASSERT_TRUE(kv.ok()) << kv.status().ToString();
    kv_ = std::move(*kv);
  }
  // Registers data servers first..last (ids) at fake loopback addresses
  // (id n listens on port 7100 + n), each 100 GiB with 50 GiB free.
  void register_targets(uint32_t first, uint32_t last) {
    for (uint32_t id = first; id <= last; ++id) {
      pb::RegisterTargetRequest r;
      r.set_target_id(id);
      r.set_address("tcp://127.0.0.1:" + std::to_string(7100 + id));
      r.set_capacity_bytes(100ull << 30);
      r.set_free_bytes(50ull << 30);
      ASSERT_TRUE(map_->register_target(r).ok()) << "register target " << id;
    }
  }
  void close_all() {
    ns_.reset();
    sessions_.reset();
    map_.reset();
    kv_.reset();
  }
  void reopen() {
    close_all();
    open_all();
  }
  // The leader's expiry, seeing every session now and again an hour later
  // with no beat stored between: those not stored meanwhile expire.
  int expire_silent_sessions() {
    const auto now = SessionTable::Clock::now();
    auto first = sessions_->expire(now);
    EXPECT_TRUE(first.ok()) << first.status().ToString();
    auto later = sessions_->expire(now + std::chrono::hours(1));
    EXPECT_TRUE(later.ok()) << later.status().ToString();
    return later.ok() ? *later : -1;
  }

  Result<pb::Attr> mkdir(uint64_t parent, const std::string& name, uint32_t mode = 0755,
                         pb::Credentials c = root_cred()) {
    pb::MkdirRequest r;
    *r.mutable_cred() = c;
    r.set_parent(parent);
    r.set_name(name);
    r.set_mode(mode);
    pb::EntryReply out;
    SURGE_RETURN_IF_ERROR(ns_->mkdir(r, &out));
    return out.attr();
  }
  Result<pb::Attr> create(uint64_t parent, const std::string& name, uint32_t mode = 0644,
                          pb::Credentials c = root_cred(), bool excl = true, uint64_t session = 0,
                          uint32_t flags = 0) {
    pb::CreateRequest r;
    *r.mutable_cred() = c;
    r.set_parent(parent);
    r.set_name(name);
    r.set_mode(mode);
    r.set_exclusive(excl);
    r.set_session_id(session);
    r.set_flags(flags);
    pb::EntryReply out;
    SURGE_RETURN_IF_ERROR(ns_->create(r, &out));
    return out.attr();
  }
  Result<pb::Attr> mknod(uint64_t parent, const std::string& name, uint32_t mode,
                         pb::Credentials c = root_cred(), uint64_t rdev = 0) {
    pb::MknodRequest r;
    *r.mutable_cred() = c;
    r.set_parent(parent);
    r.set_name(name);
    r.set_mode(mode);
    r.set_rdev(rdev);
    pb::EntryReply out;
    SURGE_RETURN_IF_ERROR(ns_->mknod(r, &out));
    return out.attr();
  }
  Result<pb::Attr> symlink(uint64_t parent, const std::string& name, const std::string& target,
                           pb::Credentials c = root_cred()) {
    pb::SymlinkRequest r;
    *r.mutable_cred() = c;
    r.set_parent(parent);
    r.set_name(name);
    r.set_target(target);
    pb::EntryReply out;
    SURGE_RETURN_IF_ERROR(ns_->symlink(r, &out));
    return out.attr();
  }
  Result<pb::Attr> lookup(uint64_t parent, const std::string& name,
                          pb::Credentials c = root_cred()) {
    pb::LookupRequest r;
    *r.mutable_cred() = c;
    r.set_parent(parent);
    r.set_name(name);
    pb::EntryReply out;
    SURGE_RETURN_IF_ERROR(ns_->lookup(r, &out));
    return out.attr();
  }
  Result<pb::Attr> getattr(uint64_t ino) {
    pb::GetAttrRequest r;
    *r.mutable_cred() = root_cred();
    r.set_ino(ino);
    pb::EntryReply out;
    SURGE_RETURN_IF_ERROR(ns_->getattr(r, &out));
    return out.attr();
  }
  Status unlink(uint64_t parent, const std::string& name, pb::Credentials c = root_cred()) {
    pb::UnlinkRequest r;
    *r.mutable_cred() = c;
    r.set_parent(parent);
    r.set_name(name);
    return ns_->unlink(r);
  }
  Status rmdir(uint64_t parent, const std::string& name, pb::Credentials c = root_cred()) {
    pb::UnlinkRequest r;
    *r.mutable_cred() = c;
    r.set_parent(parent);
    r.set_name(name);
    return ns_->rmdir(r);
  }
  Status rename(uint64_t op, const std::string& on, uint64_t np, const std::string& nn,
                uint32_t flags = 0, pb::Credentials c = root_cred()) {
    pb::RenameRequest r;
    *r.mutable_cred() = c;
    r.set_old_parent(op);
    r.set_old_name(on);
    r.set_new_parent(np);
    r.set_new_name(nn);
    r.set_flags(flags);
    return ns_->rename(r);
  }
  Result<pb::Attr> link(uint64_t ino, uint64_t np, const std::string& nn,
                        pb::Credentials c = root_cred()) {
    pb::LinkRequest r;
    *r.mutable_cred() = c;
    r.set_ino(ino);
    r.set_new_parent(np);
    r.set_new_name(nn);
    pb::EntryReply out;
    SURGE_RETURN_IF_ERROR(ns_->link(r, &out));
    return out.attr();
  }
  Result<pb::Attr> setattr(const pb::SetAttrRequest& req) {
    pb::EntryReply out;
    SURGE_RETURN_IF_ERROR(ns_->setattr(req, &out));
    return out.attr();
  }
  // setstripe as root: the directory or file's layout becomes `layout`.
  Status set_layout(uint64_t ino, const pb::Layout& layout) {
    pb::SetLayoutRequest r;
    *r.mutable_cred() = root_cred();
    r.set_ino(ino);
    *r.mutable_layout() = layout;
    pb::SetLayoutReply out;
    return ns_->set_layout(r, &out);
  }
  // getstripe as root.
  Result<pb::GetLayoutReply> get_layout(uint64_t ino) {
    pb::GetLayoutRequest r;
    *r.mutable_cred() = root_cred();
    r.set_ino(ino);
    pb::GetLayoutReply out;
    SURGE_RETURN_IF_ERROR(ns_->get_layout(r, &out));
    return out;
  }
  // Every name in a directory, paging with the given page size.
  Result<std::vector<std::string>> list(uint64_t dir, uint32_t page = 1000,
                                        pb::Credentials c = root_cred()) {
    std::vector<std::string> names;
    uint64_t cookie = 0;
    for (;;) {
      pb::ReadDirRequest r;
      *r.mutable_cred() = c;
      r.set_ino(dir);
      r.set_cookie(cookie);
      r.set_max_entries(page);
      pb::ReadDirReply out;
      SURGE_RETURN_IF_ERROR(ns_->readdir(r, &out));
      for (const auto& e : out.entries()) {
        names.push_back(e.name());
        cookie = e.cookie();
      }
      if (out.eof()) break;
    }
    std::sort(names.begin(), names.end());
    return names;
  }
  void expect_clean() {
    auto r = check_namespace(kv_.get());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    std::string all;
    for (const auto& p : r->problems) all += p + "\n";
    EXPECT_TRUE(r->clean()) << all;
  }

  std::string dir_;
  pb::Attr fresh_root_;
  // Logic tests skip the WAL fsync (a process that does not crash loses
  // nothing either way); the KV and concurrency tests turn it on.
  bool sync_ = false;
  bool register_targets_ = true;
  ClusterMapOptions map_opts_;
  SessionOptions session_opts_;
  // Sessions as several MDS share them (in the store), as on etcd; else as
  // one MDS on RocksDB keeps them (open counts in memory).
  bool sessions_shared_ = test::test_kv_is_etcd();
  NamespaceOptions ns_opts_;
  std::unique_ptr<KvStore> kv_;
  std::unique_ptr<ClusterMap> map_;
  std::unique_ptr<SessionTable> sessions_;
  FakeObjectTargets objects_;
  std::unique_ptr<Namespace> ns_;
};

// The chain with this id in a shipped cluster map, or nullptr.
inline const pb::Chain* find_chain(const pb::ClusterMap& m, uint32_t id) {
  for (const auto& c : m.chains().chains()) {
    if (c.chain_id() == id) return &c;
  }
  return nullptr;
}

inline Code code_of(const Status& s) {
  return s.code();
}
template <typename T>
Code code_of(const Result<T>& r) {
  return r.status().code();
}

}  // namespace surge::mds::testing
