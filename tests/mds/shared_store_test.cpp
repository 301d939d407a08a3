// Two namespaces on one store: what two MDS processes serving one file
// system from one etcd prefix are (issue 17, stage 2). What they share must
// be decided by the store's conflict checks, not by either's memory: here,
// the inode-number counter and the format of an empty store. Runs on
// RocksDB and, as mds_concurrency_etcd_test, on etcd.
#include <barrier>
#include <set>
#include <thread>

#include "tests/mds/mds_fixture.h"

namespace surge::mds::testing {
namespace {

class SharedStoreTest : public NamespaceTest {
 protected:
  void SetUp() override {
    // Small blocks: the two claim the counter many times in one test.
    ns_opts_.inode_batch = 8;
    NamespaceTest::SetUp();
  }
  // A second namespace on the fixture's store, as a second MDS would open it.
  Result<std::unique_ptr<Namespace>> open_second() {
    return Namespace::Open(kv_.get(), map_.get(), sessions_.get(), &objects_, ns_opts_);
  }
  // A store nobody has formatted.
  Result<std::unique_ptr<KvStore>> fresh_store() {
    if (test::test_kv_is_etcd()) {
      auto& etcd = test::shared_etcd();
      SURGE_RETURN_IF_ERROR(etcd.started);
      EtcdKvOptions ko;
      ko.endpoints = etcd.cluster->endpoints();
      ko.prefix = test::fresh_etcd_prefix();
      SURGE_ASSIGN_OR_RETURN(auto kv, EtcdKvStore::Open(ko));
      return std::unique_ptr<KvStore>(std::move(kv));
    }
    RocksKvOptions ko;
    ko.path = dir_ + "/fresh-" + std::to_string(++fresh_stores_);
    SURGE_ASSIGN_OR_RETURN(auto kv, RocksKvStore::Open(ko));
    return std::unique_ptr<KvStore>(std::move(kv));
  }
  int fresh_stores_ = 0;
};

pb::CreateRequest create_request(uint64_t parent, const std::string& name) {
  pb::CreateRequest r;
  *r.mutable_cred() = root_cred();
  r.set_parent(parent);
  r.set_name(name);
  r.set_mode(0644);
  r.set_exclusive(true);
  return r;
}

TEST_F(SharedStoreTest, TwoNamespacesNeverHandOutOneInodeNumberTwice) {
  auto second = open_second();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  std::vector<Namespace*> namespaces = {ns_.get(), second->get()};
  // One directory per writer: what is tested is the counter, not the
  // checks on a shared parent.
  std::vector<uint64_t> dirs;
  for (int w = 0; w < 4; ++w) {
    auto d = mkdir(kRoot, "w" + std::to_string(w), 0777);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    dirs.push_back(d->ino());
  }
  constexpr int kFiles = 100;
  std::vector<std::vector<uint64_t>> inos(dirs.size());
  std::vector<Status> failed(dirs.size());
  std::barrier start(static_cast<std::ptrdiff_t>(dirs.size()));
  std::vector<std::thread> writers;
  for (size_t w = 0; w < dirs.size(); ++w) {
    writers.emplace_back([&, w] {
      Namespace* ns = namespaces[w % 2];
      start.arrive_and_wait();
      for (int i = 0; i < kFiles; ++i) {
        pb::EntryReply out;
        Status st = ns->create(create_request(dirs[w], "f" + std::to_string(i)), &out);
        if (!st.ok()) {
          failed[w] = st;
          return;
        }
        inos[w].push_back(out.attr().ino());
      }
    });
  }
  for (auto& t : writers) t.join();
  std::set<uint64_t> seen(dirs.begin(), dirs.end());
  seen.insert(kRoot);
  size_t handed_out = 0;
  for (size_t w = 0; w < dirs.size(); ++w) {
    ASSERT_TRUE(failed[w].ok()) << "writer " << w << ": " << failed[w].ToString();
    for (uint64_t ino : inos[w]) {
      ++handed_out;
      EXPECT_TRUE(seen.insert(ino).second) << "inode " << ino << " handed out twice";
    }
  }
  EXPECT_EQ(handed_out, dirs.size() * kFiles);
}

TEST_F(SharedStoreTest, ConcurrentFormatsOfOneEmptyStoreAgreeOnOneFileSystem) {
  auto kv = fresh_store();
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  constexpr int kOpeners = 4;
  std::vector<Result<uint64_t>> ids(kOpeners, Result<uint64_t>(Status::Internal("not run")));
  std::barrier start(kOpeners);
  std::vector<std::thread> openers;
  for (int i = 0; i < kOpeners; ++i) {
    openers.emplace_back([&, i] {
      start.arrive_and_wait();
      ids[static_cast<size_t>(i)] = Namespace::FormatOrLoad(kv->get(), 0);
    });
  }
  for (auto& t : openers) t.join();
  auto stored = Namespace::FormatOrLoad(kv->get(), 0);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  for (int i = 0; i < kOpeners; ++i) {
    ASSERT_TRUE(ids[static_cast<size_t>(i)].ok()) << ids[static_cast<size_t>(i)].status().ToString();
    EXPECT_EQ(*ids[static_cast<size_t>(i)], *stored)
        << "opener " << i << " formatted a file system the store does not hold";
  }
}

}  // namespace
}  // namespace surge::mds::testing
