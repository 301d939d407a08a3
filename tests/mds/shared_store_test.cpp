// Two namespaces on one store: what two MDS processes serving one file
// system from one etcd prefix are (issue 17, stage 2). What they share must
// be decided by the store's conflict checks, not by either's memory (each
// has its own LockTable and rename mutex): the inode-number counter, the
// format of an empty store, the records and entries two operations read and
// change (a parent's link count, a file's, a rename's ancestors) and the
// done-op record of an op resent to the other. Runs on RocksDB and, as
// mds_concurrency_etcd_test, on etcd.
#include <barrier>
#include <functional>
#include <random>
#include <set>
#include <thread>
#include <utility>

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

// The requests the tests below send to either namespace.
pb::MkdirRequest mkdir_request(uint64_t parent, const std::string& name) {
  pb::MkdirRequest r;
  *r.mutable_cred() = root_cred();
  r.set_parent(parent);
  r.set_name(name);
  r.set_mode(0755);
  return r;
}
pb::LinkRequest link_request(uint64_t ino, uint64_t parent, const std::string& name) {
  pb::LinkRequest r;
  *r.mutable_cred() = root_cred();
  r.set_ino(ino);
  r.set_new_parent(parent);
  r.set_new_name(name);
  return r;
}
pb::RenameRequest rename_request(uint64_t from, const std::string& name, uint64_t to,
                                 const std::string& new_name, uint32_t flags = 0) {
  pb::RenameRequest r;
  *r.mutable_cred() = root_cred();
  r.set_old_parent(from);
  r.set_old_name(name);
  r.set_new_parent(to);
  r.set_new_name(new_name);
  r.set_flags(flags);
  return r;
}

// Runs fn(writer, namespace) on `writers` threads, alternating between the
// two namespaces, all starting together.
template <typename Fn>
void run_on_both(Namespace* a, Namespace* b, int writers, Fn fn) {
  std::barrier start(writers);
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      start.arrive_and_wait();
      fn(w, w % 2 == 0 ? a : b);
    });
  }
  for (auto& t : threads) t.join();
}

TEST_F(SharedStoreTest, MkdirsInOneSharedDirectoryKeepItsLinkCountExact) {
  auto second = open_second();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  auto dir = mkdir(kRoot, "shared", 0777);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  constexpr int kWriters = 4, kEach = 40;
  std::vector<Status> failed(kWriters);
  run_on_both(ns_.get(), second->get(), kWriters, [&](int w, Namespace* ns) {
    for (int i = 0; i < kEach && failed[w].ok(); ++i) {
      pb::EntryReply out;
      failed[w] = ns->mkdir(
          mkdir_request(dir->ino(), "d" + std::to_string(w) + "-" + std::to_string(i)), &out);
    }
  });
  for (int w = 0; w < kWriters; ++w) {
    ASSERT_TRUE(failed[w].ok()) << "writer " << w << ": " << failed[w].ToString();
  }
  auto after = getattr(dir->ino());
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->nlink(), 2u + kWriters * kEach) << "a mkdir's parent update was lost";
}

TEST_F(SharedStoreTest, LinksToOneFileFromBothKeepItsLinkCountExact) {
  auto second = open_second();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  auto file = create(kRoot, "target");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  constexpr int kWriters = 4, kEach = 40;
  // One directory per writer: only the file's record is shared.
  std::vector<uint64_t> dirs;
  for (int w = 0; w < kWriters; ++w) {
    auto d = mkdir(kRoot, "links" + std::to_string(w), 0777);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    dirs.push_back(d->ino());
  }
  std::vector<Status> failed(kWriters);
  run_on_both(ns_.get(), second->get(), kWriters, [&](int w, Namespace* ns) {
    for (int i = 0; i < kEach && failed[w].ok(); ++i) {
      pb::EntryReply out;
      failed[w] = ns->link(link_request(file->ino(), dirs[w], "l" + std::to_string(i)), &out);
    }
  });
  for (int w = 0; w < kWriters; ++w) {
    ASSERT_TRUE(failed[w].ok()) << "writer " << w << ": " << failed[w].ToString();
  }
  auto after = getattr(file->ino());
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->nlink(), 1u + kWriters * kEach) << "a link's update of the file was lost";
}

// Files and directories moved at random among four directories and into
// each other by both: some renames fail (the entry moved away meanwhile,
// or a directory would go into itself), none may lose, duplicate or
// disconnect anything.
TEST_F(SharedStoreTest, CrossDirectoryRenamesFromBothLeaveACleanNamespace) {
  auto second = open_second();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  std::vector<uint64_t> parents;
  for (int i = 0; i < 4; ++i) {
    auto d = mkdir(kRoot, "p" + std::to_string(i), 0777);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    parents.push_back(d->ino());
  }
  std::vector<std::string> names;
  for (int i = 0; i < 6; ++i) {
    const std::string n = "s" + std::to_string(i);
    auto d = mkdir(parents[0], n, 0777);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    parents.push_back(d->ino());  // subdirectories are destinations too
    names.push_back(n);
  }
  for (int i = 0; i < 10; ++i) {
    const std::string n = "f" + std::to_string(i);
    ASSERT_TRUE(create(parents[0], n).ok());
    names.push_back(n);
  }
  constexpr int kWriters = 4, kEach = 60;
  std::vector<std::string> unexpected(kWriters);
  std::vector<int> moved(kWriters, 0);
  run_on_both(ns_.get(), second->get(), kWriters, [&](int w, Namespace* ns) {
    std::mt19937 rng(static_cast<uint32_t>(w) * 7919u + 17u);
    for (int i = 0; i < kEach; ++i) {
      const std::string& name = names[rng() % names.size()];
      const uint64_t from = parents[rng() % parents.size()];
      const uint64_t to = parents[rng() % parents.size()];
      Status st = ns->rename(rename_request(from, name, to, name));
      if (st.ok()) {
        ++moved[w];
      } else if (st.code() != Code::kNotFound && st.code() != Code::kInvalidArgument) {
        unexpected[w] = st.ToString();
        return;
      }
    }
  });
  int total = 0;
  for (int w = 0; w < kWriters; ++w) {
    ASSERT_TRUE(unexpected[w].empty()) << "writer " << w << ": " << unexpected[w];
    total += moved[w];
  }
  EXPECT_GT(total, 0) << "no rename succeeded: the test moved nothing";
  expect_clean();
}

// The same op id sent to both at once, as a client resending to another
// MDS while the first still works on it: both answer OK, and it happens
// once.
TEST_F(SharedStoreTest, AnUnlinkAndItsResendThroughTheOtherBothAnswerOk) {
  auto second = open_second();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  auto dir = mkdir(kRoot, "resend", 0777);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  constexpr int kRounds = 200;
  for (int i = 0; i < kRounds; ++i) {
    const std::string name = "u" + std::to_string(i);
    ASSERT_TRUE(create(dir->ino(), name).ok());
    pb::UnlinkRequest r;
    *r.mutable_cred() = root_cred();
    r.set_parent(dir->ino());
    r.set_name(name);
    r.set_op_id(0x5e00000000ull + static_cast<uint64_t>(i) + 1);
    std::vector<Status> got(2);
    run_on_both(ns_.get(), second->get(), 2, [&](int w, Namespace* ns) { got[w] = ns->unlink(r); });
    ASSERT_TRUE(got[0].ok()) << "round " << i << ", first: " << got[0].ToString();
    ASSERT_TRUE(got[1].ok()) << "round " << i << ", resend: " << got[1].ToString();
  }
  expect_clean();
}

TEST_F(SharedStoreTest, AnExchangeAndItsResendThroughTheOtherHappenOnce) {
  auto second = open_second();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  auto a = create(kRoot, "a");
  auto b = create(kRoot, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  constexpr int kRounds = 200;
  constexpr uint32_t kRenameExchange = 2;
  for (int i = 0; i < kRounds; ++i) {
    auto r = rename_request(kRoot, "a", kRoot, "b", kRenameExchange);
    r.set_op_id(0xe000000000ull + static_cast<uint64_t>(i) + 1);
    std::vector<Status> got(2);
    run_on_both(ns_.get(), second->get(), 2, [&](int w, Namespace* ns) { got[w] = ns->rename(r); });
    ASSERT_TRUE(got[0].ok()) << "round " << i << ", first: " << got[0].ToString();
    ASSERT_TRUE(got[1].ok()) << "round " << i << ", resend: " << got[1].ToString();
    // Exchanged once per round: after an odd number of rounds, a is b's file.
    auto now_a = lookup(kRoot, "a");
    ASSERT_TRUE(now_a.ok()) << now_a.status().ToString();
    ASSERT_EQ(now_a->ino(), i % 2 == 0 ? b->ino() : a->ino())
        << "round " << i << ": the exchange happened twice or not at all";
  }
}

// The fixture's store, with one hook: the first read of one key runs
// `between` before it reads (another MDS acting between two of this one's
// reads).
class InterposedKv : public KvStore {
 public:
  InterposedKv(KvStore* kv, Space space, std::string key, std::function<void()> between)
      : kv_(kv), space_(space), key_(std::move(key)), between_(std::move(between)) {}
  Result<std::optional<std::string>> get(Space s, std::string_view key) override {
    if (between_ && s == space_ && key == key_) std::exchange(between_, nullptr)();
    return kv_->get(s, key);
  }
  Status scan(Space s, std::string_view begin, std::string_view end, const ScanFn& fn) override {
    return kv_->scan(s, begin, end, fn);
  }
  Status commit(const KvBatch& batch, bool durable) override { return kv_->commit(batch, durable); }
  Status make_durable() override { return kv_->make_durable(); }
  uint64_t estimate_keys(Space s) override { return kv_->estimate_keys(s); }
  Result<uint64_t> count_keys(Space s) override { return kv_->count_keys(s); }
  size_t max_batch_ops() const override { return kv_->max_batch_ops(); }
  bool fired() const { return !between_; }

 private:
  KvStore* kv_;
  Space space_;
  std::string key_;
  std::function<void()> between_;
};

// /a/n and /s; S moves into n. Its walk reads n (parent a), then a; before
// it reads a, the other MDS moves n to the root and a into s. The walk now
// sees n -> a -> s: a loop that never was. The rename must read again and
// succeed, as it does on one MDS.
TEST_F(SharedStoreTest, ARenameIsNotRefusedForALoopTheOtherMdsMadeBetweenItsReads) {
  auto a = mkdir(kRoot, "a", 0777);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto n = mkdir(a->ino(), "n", 0777);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  auto s = mkdir(kRoot, "s", 0777);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto other = open_second();
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  Status moves;
  InterposedKv kv(kv_.get(), Space::kInodes, keys::inode(a->ino()), [&] {
    moves = (*other)->rename(rename_request(a->ino(), "n", kRoot, "n"));
    if (moves.ok()) moves = (*other)->rename(rename_request(kRoot, "a", s->ino(), "a"));
  });
  auto walker = Namespace::Open(&kv, map_.get(), sessions_.get(), &objects_, ns_opts_);
  ASSERT_TRUE(walker.ok()) << walker.status().ToString();
  Status st = (*walker)->rename(rename_request(kRoot, "s", n->ino(), "s"));
  ASSERT_TRUE(kv.fired()) << "the walk never read a's record: the test did not interpose";
  ASSERT_TRUE(moves.ok()) << "the other MDS's renames: " << moves.ToString();
  EXPECT_TRUE(st.ok()) << st.ToString();
  expect_clean();
}

}  // namespace
}  // namespace surge::mds::testing
