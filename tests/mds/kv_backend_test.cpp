// KvStore semantics, the same tests against both backends: RocksDB in a temp
// dir and etcd (a real 3-member cluster on loopback, tests/common/
// etcd_cluster.h). What the namespace relies on: ordered scans within a
// space and a range, early stop, checks that make a batch commit nothing and
// return Busy, and, for etcd, batches over its limits refused by name rather
// than split.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "mds/kv/etcd/etcd_kv_store.h"
#include "mds/kv/rocksdb_kv_store.h"
#include "tests/common/etcd_test_env.h"
#include "tests/common/loopback.h"

namespace surge::mds {
namespace {

class KvBackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (etcd()) {
      auto& e = test::shared_etcd();
      ASSERT_TRUE(e.started.ok()) << e.started.ToString();
      EtcdKvOptions o;
      o.endpoints = e.cluster->endpoints();
      o.prefix = test::fresh_etcd_prefix();
      o.scan_page_keys = 7;  // many pages even in small scans
      auto kv = EtcdKvStore::Open(o);
      ASSERT_TRUE(kv.ok()) << kv.status().ToString();
      kv_ = std::move(*kv);
    } else {
      char tmpl[] = "/tmp/surge-kv-test-XXXXXX";
      ASSERT_NE(mkdtemp(tmpl), nullptr);
      dir_ = tmpl;
      RocksKvOptions o;
      o.path = dir_ + "/db";
      auto kv = RocksKvStore::Open(o);
      ASSERT_TRUE(kv.ok()) << kv.status().ToString();
      kv_ = std::move(*kv);
    }
  }
  void TearDown() override {
    kv_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  bool etcd() const { return GetParam() == "etcd"; }

  std::vector<std::string> keys(Space s, std::string_view b = "", std::string_view e = "", size_t stop_after = 0) {
    std::vector<std::string> out;
    Status st = kv_->scan(s, b, e, [&](std::string_view k, std::string_view) {
      out.emplace_back(k);
      return stop_after == 0 || out.size() < stop_after;
    });
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }
  void put(Space s, const std::string& k, const std::string& v) {
    KvBatch b;
    b.put(s, k, v);
    Status st = kv_->commit(b);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  std::string dir_;
  std::unique_ptr<KvStore> kv_;
};

TEST_P(KvBackendTest, GetSeesCommittedPutsAndDeletes) {
  auto r = kv_->get(Space::kInodes, "a");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->has_value());
  put(Space::kInodes, "a", "1");
  r = kv_->get(Space::kInodes, "a");
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ(**r, "1");
  // The same key in another space is another key.
  EXPECT_FALSE(kv_->get(Space::kDentries, "a")->has_value());
  KvBatch b;
  b.del(Space::kInodes, "a");
  ASSERT_TRUE(kv_->commit(b).ok());
  EXPECT_FALSE(kv_->get(Space::kInodes, "a")->has_value());
}

TEST_P(KvBackendTest, ScanIsOrderedWithinSpaceAndRange) {
  KvBatch b;
  for (std::string k : std::vector<std::string>{"d", "b", "a", "c", "e", std::string("b\0x", 3), "\xff"}) b.put(Space::kDentries, k, "v" + k);
  b.put(Space::kInodes, "c", "other space");
  b.put(Space::kXattrs, "a", "other space");
  ASSERT_TRUE(kv_->commit(b).ok());
  EXPECT_EQ(keys(Space::kDentries),
            (std::vector<std::string>{"a", "b", std::string("b\0x", 3), "c", "d", "e", "\xff"}));
  EXPECT_EQ(keys(Space::kDentries, "b", "d"), (std::vector<std::string>{"b", std::string("b\0x", 3), "c"}));
  EXPECT_EQ(keys(Space::kDentries, "bb"), (std::vector<std::string>{"c", "d", "e", "\xff"}));
  EXPECT_EQ(keys(Space::kDentries, "", "", 2), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(keys(Space::kInodes), (std::vector<std::string>{"c"}));
  EXPECT_TRUE(keys(Space::kSystem).empty());
  std::string v;
  ASSERT_TRUE(kv_->scan(Space::kDentries, "e", "f", [&](std::string_view, std::string_view val) {
                   v = val;
                   return true;
                 }).ok());
  EXPECT_EQ(v, "ve");
}

TEST_P(KvBackendTest, ScanVisitsManyKeysInOrderAcrossPages) {
  constexpr int kKeys = 1000;
  for (int first = 0; first < kKeys; first += 100) {
    KvBatch b;
    for (int i = first; i < first + 100; i++) {
      char k[16];
      snprintf(k, sizeof k, "k%05d", i);
      b.put(Space::kDentries, k, std::to_string(i));
    }
    ASSERT_TRUE(kv_->commit(b).ok());
  }
  auto all = keys(Space::kDentries);
  ASSERT_EQ(all.size(), size_t(kKeys));
  for (int i = 0; i < kKeys; i++) {
    char k[16];
    snprintf(k, sizeof k, "k%05d", i);
    ASSERT_EQ(all[i], k);
  }
  // A stop in the middle of a page and of the range.
  EXPECT_EQ(keys(Space::kDentries, "k00500", "", 10).back(), "k00509");
  EXPECT_GE(kv_->estimate_keys(Space::kDentries), uint64_t(kKeys) / 2);
}

TEST_P(KvBackendTest, ChecksThatHoldCommit) {
  put(Space::kSystem, "hwm", "100");
  KvBatch b;
  b.check(Space::kSystem, "hwm", std::string("100"));
  b.check(Space::kDentries, "new", std::nullopt);
  b.put(Space::kSystem, "hwm", "200");
  b.put(Space::kDentries, "new", "x");
  Status st = kv_->commit(b);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(**kv_->get(Space::kSystem, "hwm"), "200");
  EXPECT_EQ(**kv_->get(Space::kDentries, "new"), "x");
}

TEST_P(KvBackendTest, AFailedCheckCommitsNothingAndIsBusy) {
  put(Space::kSystem, "hwm", "100");
  put(Space::kDentries, "taken", "x");
  struct Case {
    const char* what;
    Space space;
    std::string key;
    std::optional<std::string> expected;
  };
  for (const Case& c : {Case{"changed value", Space::kSystem, "hwm", std::string("99")},
                        Case{"present but must be absent", Space::kDentries, "taken", std::nullopt},
                        Case{"absent but expected", Space::kDentries, "gone", std::string("x")},
                        Case{"same key, other space", Space::kInodes, "hwm", std::string("100")}}) {
    KvBatch b;
    b.check(Space::kSystem, "hwm", std::string("100"));  // holds
    b.check(c.space, c.key, c.expected);                 // does not
    b.put(Space::kSystem, "hwm", "300");
    b.put(Space::kXattrs, "side", "effect");
    b.del(Space::kDentries, "taken");
    EXPECT_EQ(kv_->commit(b).code(), Code::kBusy) << c.what;
    EXPECT_EQ(**kv_->get(Space::kSystem, "hwm"), "100") << c.what;
    EXPECT_FALSE(kv_->get(Space::kXattrs, "side")->has_value()) << c.what;
    EXPECT_TRUE(kv_->get(Space::kDentries, "taken")->has_value()) << c.what;
  }
}

TEST_P(KvBackendTest, TheLastOpOnAKeyWins) {
  KvBatch b;
  b.put(Space::kInodes, "k", "first");
  b.del(Space::kInodes, "k");
  b.put(Space::kInodes, "j", "1");
  b.put(Space::kInodes, "j", "2");
  Status st = kv_->commit(b);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(kv_->get(Space::kInodes, "k")->has_value());
  EXPECT_EQ(**kv_->get(Space::kInodes, "j"), "2");
}

TEST_P(KvBackendTest, BigValuesRoundTrip) {
  std::string big(1 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>(i / 4096);
  put(Space::kXattrs, "big", big);
  put(Space::kXattrs, "big2", big);
  EXPECT_EQ(**kv_->get(Space::kXattrs, "big"), big);
  size_t seen = 0;
  ASSERT_TRUE(kv_->scan(Space::kXattrs, "", "", [&](std::string_view, std::string_view v) {
                   EXPECT_EQ(v, big);
                   seen++;
                   return true;
                 }).ok());
  EXPECT_EQ(seen, 2u);
}

TEST_P(KvBackendTest, ABatchOverEtcdsOpLimitIsRefusedByNameNotSplit) {
  KvBatch b;
  for (int i = 0; i < 129; i++) b.put(Space::kInodes, "k" + std::to_string(i), "v");
  Status st = kv_->commit(b);
  if (!etcd()) {
    EXPECT_TRUE(st.ok()) << st.ToString();  // RocksDB has no such limit
    return;
  }
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("max-txn-ops limit of 128"), std::string::npos) << st.ToString();
  EXPECT_TRUE(keys(Space::kInodes).empty());
}

TEST_P(KvBackendTest, ABatchOverEtcdsRequestSizeIsRefusedByName) {
  KvBatch b;
  b.put(Space::kXattrs, "a", std::string(1 << 20, 'a'));
  b.put(Space::kXattrs, "b", std::string(1 << 20, 'b'));
  Status st = kv_->commit(b);
  if (!etcd()) {
    EXPECT_TRUE(st.ok()) << st.ToString();
    return;
  }
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("max-request-bytes"), std::string::npos) << st.ToString();
  EXPECT_FALSE(kv_->get(Space::kXattrs, "a")->has_value());
}

TEST_P(KvBackendTest, EstimateKeysCountsOneSpace) {
  KvBatch b;
  for (int i = 0; i < 50; i++) b.put(Space::kInodes, "i" + std::to_string(i), "v");
  b.put(Space::kSystem, "s", "v");
  ASSERT_TRUE(kv_->commit(b).ok());
  if (etcd()) {
    EXPECT_EQ(kv_->estimate_keys(Space::kInodes), 50u);  // etcd counts exactly
    EXPECT_EQ(kv_->estimate_keys(Space::kSystem), 1u);
  } else {
    EXPECT_GT(kv_->estimate_keys(Space::kInodes), 0u);
  }
  EXPECT_TRUE(kv_->make_durable().ok());
}

INSTANTIATE_TEST_SUITE_P(Backends, KvBackendTest, ::testing::Values("rocksdb", "etcd"),
                         [](const auto& info) { return info.param; });

// Two stores under different prefixes share one etcd without seeing each
// other (several file systems on one cluster).
TEST(EtcdKvPrefix, PrefixesAreSeparateFileSystems) {
  auto& e = test::shared_etcd();
  ASSERT_TRUE(e.started.ok()) << e.started.ToString();
  EtcdKvOptions o;
  o.endpoints = e.cluster->endpoints();
  o.prefix = test::fresh_etcd_prefix();
  auto a = EtcdKvStore::Open(o);
  o.prefix = test::fresh_etcd_prefix();
  auto b = EtcdKvStore::Open(o);
  ASSERT_TRUE(a.ok() && b.ok());
  KvBatch w;
  w.put(Space::kInodes, "1", "a's");
  ASSERT_TRUE((*a)->commit(w).ok());
  EXPECT_FALSE((*b)->get(Space::kInodes, "1")->has_value());
  EXPECT_EQ((*b)->estimate_keys(Space::kInodes), 0u);
}

// Endpoints nobody listens on: the error names etcd, the endpoints and the
// work, and no exception escapes.
TEST(EtcdKvErrors, UnreachableEndpointsAreNamed) {
  EtcdKvOptions o;
  o.endpoints = {"127.0.0.1:" + std::to_string(test::free_port()), "127.0.0.1:" + std::to_string(test::free_port())};
  o.deadline = std::chrono::milliseconds(500);
  auto kv = EtcdKvStore::Open(o);
  ASSERT_TRUE(kv.ok());
  KvBatch b;
  b.put(Space::kInodes, "1", "x");
  Status st = (*kv)->commit(b);
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  for (const auto& ep : o.endpoints) EXPECT_NE(st.message().find(ep), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("committing batch of 1 ops"), std::string::npos) << st.ToString();
  auto g = (*kv)->get(Space::kDentries, "name");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("key 'name' of space dentries"), std::string::npos) << g.status().ToString();
}

TEST(EtcdKvErrors, BadOptionsAreRefused) {
  EtcdKvOptions o;
  EXPECT_EQ(EtcdKvStore::Open(o).status().code(), Code::kInvalidArgument);
  o.endpoints = {"no-port"};
  auto r = EtcdKvStore::Open(o);
  EXPECT_NE(r.status().message().find("'no-port'"), std::string::npos);
}

}  // namespace
}  // namespace surge::mds
