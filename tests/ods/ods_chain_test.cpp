// Chained chunks on real data servers (docs/redundancy.md): a real
// surge-mds forms the chains and hands out the map; every request goes
// straight to one member with a ChunkRef naming it, and every member's copy
// is read back directly.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "tests/ods/chain_cluster.h"

namespace surge::ods::testing {
namespace {

using namespace std::chrono_literals;

// A chain of one member (replicas 1): the chunk's whole life.
TEST(OdsChainOneMember, WriteReadTruncateSyncStatRemove) {
  ChainCluster cl;
  cl.start({.data_servers = 1, .replicas = 1});
  cl.wait_targets_up();
  auto [ino, chain_id] = cl.create("one");
  const mpb::Chain c = cl.chain(chain_id);
  ASSERT_EQ(ChainCluster::write_chain(c).size(), 1u) << c.DebugString();
  const pb::ChunkRef ref = ChainCluster::ref(c.members(0).target_id(), c, ino);

  auto d = pattern(3 << 20, 1);  // three updates of one buffer each
  auto w = cl.write(ref, 4096, d, true);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->object_size(), 4096 + d.size());
  EXPECT_GT(w->chunk_version(), 0u);
  auto r = cl.read(ref, 4096, d.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, d);
  auto s = cl.stat(ref);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->size(), 4096 + d.size());
  EXPECT_FALSE(s->dirty());
  EXPECT_EQ(s->chunk_version(), w->chunk_version());

  ASSERT_TRUE(cl.truncate(ref, 10000).ok());
  s = cl.stat(ref);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->size(), 10000u);
  EXPECT_GT(s->chunk_version(), w->chunk_version()) << "a truncate is an update with a version";
  ASSERT_TRUE(cl.sync(ref).ok());

  // The legacy object of the same inode number is another thing.
  EXPECT_EQ(cl.client(ref.target_id()).stat(ino).status().code(), Code::kNotFound);

  auto gone = cl.remove(ref);
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_TRUE(*gone);
  EXPECT_EQ(cl.stat(ref).status().code(), Code::kNotFound);
  r = cl.read(ref, 0, 100);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty()) << "a removed chunk reads as a hole";
}

TEST(OdsChainOneMember, FallocateReservesAndGrowsTheChunk) {
  ChainCluster cl;
  cl.start({.data_servers = 1, .replicas = 1});
  cl.wait_targets_up();
  auto [ino, chain_id] = cl.create("reserved");
  const mpb::Chain c = cl.chain(chain_id);
  const pb::ChunkRef ref = ChainCluster::ref(c.members(0).target_id(), c, ino);
  pb::FallocateRequest fq;
  *fq.mutable_ref() = ref;
  fq.set_offset(0);
  fq.set_length(1 << 20);
  fq.set_mode(pb::FALLOCATE_RESERVE);
  pb::FallocateReply fa;
  Status st = cl.client(ref.target_id()).channel().call<pb::OdsFallocate>(fq, &fa);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(fa.object_size(), 1u << 20);
  auto s = cl.stat(ref);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->size(), 1u << 20);
  EXPECT_GT(s->chunk_version(), 0u) << "a fallocate is an update with a version";
}

TEST(OdsChainOneMember, ChunksSurviveARestart) {
  ChainCluster cl;
  cl.start({.data_servers = 1, .replicas = 1});
  cl.wait_targets_up();
  auto [ino, chain_id] = cl.create("durable");
  mpb::Chain c = cl.chain(chain_id);
  const auto d = pattern(200000, 2);
  auto w = cl.write(ChainCluster::ref(c.members(0).target_id(), c, ino), 0, d, true);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  cl.ods(0).proc.kill(SIGKILL);
  cl.restart_ods(0);
  c = cl.wait_chain(chain_id, [](const mpb::Chain& x) {
    return x.members(0).state() == mpb::MEMBER_SERVING;
  });
  const pb::ChunkRef ref = ChainCluster::ref(c.members(0).target_id(), c, ino);
  auto s = cl.stat(ref);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->chunk_version(), w->chunk_version()) << "the version is kept with the chunk";
  auto r = cl.read(ref, 0, d.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, d);
}

class OdsChainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cl_.start({.data_servers = 3, .replicas = 3});
    cl_.wait_targets_up();
    auto [ino, chain_id] = cl_.create("f");
    ino_ = ino;
    chain_ = cl_.chain(chain_id);
    members_ = ChainCluster::write_chain(chain_);
    ASSERT_EQ(members_.size(), 3u) << chain_.DebugString();
  }
  pb::ChunkRef ref(uint32_t target) { return ChainCluster::ref(target, chain_, ino_); }

  // d at off through the head, on connection c (with piece CRCs).
  Status write_at(OdsClient& c, uint64_t off, std::vector<std::byte>& d) {
    pb::WriteRequest q;
    q.set_offset(off);
    q.set_length(d.size());
    pb::set_piece_crcs(q, d.data(), d.size());
    *q.mutable_ref() = ref(members_[0]);
    net::BulkRegion r{d.data(), d.size(), net::BulkAccess::kServerPull};
    pb::WriteReply a;
    return c.channel().call<pb::OdsWrite>(q, &a, {&r, 1});
  }

  // Every member's copy of [0, len), read from that member.
  void expect_identical(uint64_t len, const std::vector<std::byte>* want = nullptr) {
    std::vector<std::byte> first;
    for (size_t i = 0; i < members_.size(); ++i) {
      auto r = cl_.read(ref(members_[i]), 0, len);
      ASSERT_TRUE(r.ok()) << "target " << members_[i] << ": " << r.status().ToString();
      if (want != nullptr) {
        EXPECT_TRUE(*r == *want) << "target " << members_[i] << " differs from what was written";
      }
      if (i == 0) {
        first = *r;
      } else {
        EXPECT_TRUE(*r == first) << "target " << members_[i] << " differs from the head";
      }
      auto s = cl_.stat(ref(members_[i]));
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      EXPECT_FALSE(s->dirty()) << "target " << members_[i];
    }
  }

  ChainCluster cl_;
  uint64_t ino_ = 0;
  mpb::Chain chain_;
  std::vector<uint32_t> members_;
};

TEST_F(OdsChainTest, AWriteAtTheHeadIsOnEveryMember) {
  auto d = pattern((2 << 20) + 12345, 3);
  auto w = cl_.write(ref(members_[0]), 0, d);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  expect_identical(d.size(), &d);
  for (uint32_t m : members_) {
    auto s = cl_.stat(ref(m));
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->chunk_version(), w->chunk_version()) << "target " << m;
    EXPECT_EQ(s->size(), d.size());
  }
  // Truncate and sync travel the chain too.
  ASSERT_TRUE(cl_.truncate(ref(members_[0]), 5000).ok());
  ASSERT_TRUE(cl_.sync(ref(members_[0])).ok());
  for (uint32_t m : members_) {
    auto s = cl_.stat(ref(m));
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->size(), 5000u) << "target " << m;
  }
  auto gone = cl_.remove(ref(members_[0]));
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  for (uint32_t m : members_) {
    EXPECT_EQ(cl_.stat(ref(m)).status().code(), Code::kNotFound) << "target " << m;
  }
}

TEST_F(OdsChainTest, AFallocateAtTheHeadZeroesEveryMembersCopy) {
  auto d = pattern((2 << 20) + 12345, 8);
  ASSERT_TRUE(cl_.write(ref(members_[0]), 0, d).ok());
  pb::FallocateRequest fq;
  *fq.mutable_ref() = ref(members_[0]);
  fq.set_offset(1 << 20);
  fq.set_length(300000);
  fq.set_mode(pb::FALLOCATE_ZERO);
  fq.set_keep_size(true);
  pb::FallocateReply fa;
  Status st = cl_.client(members_[0]).channel().call<pb::OdsFallocate>(fq, &fa);
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::fill(d.begin() + (1 << 20), d.begin() + (1 << 20) + 300000, std::byte{0});
  expect_identical(d.size(), &d);
}

TEST_F(OdsChainTest, OverlappingConcurrentWritesEndIdenticalOnEveryMember) {
  constexpr int kWriters = 4, kWrites = 20;
  constexpr uint64_t kSpan = 3 << 20;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kWriters; ++t) {
    threads.emplace_back([&, t] {
      // One connection per writer, so the writes really are concurrent.
      OdsClient c(cl_.target(members_[0]).address, cl_.key());
      for (int i = 0; i < kWrites; ++i) {
        const uint64_t off = (static_cast<uint64_t>(t * 7919 + i * 104729) * 4096) % kSpan;
        auto d = pattern(700000 + 4096 * t, t * 100 + i);
        Status st = write_at(c, off, d);
        if (!st.ok()) {
          ADD_FAILURE() << st.ToString();
          failures++;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);
  expect_identical(kSpan + (1 << 20));
}

// IOR hard's shape: small records side by side in one chunk, from several
// writers at once. The head sends a chunk's updates down the chain without
// waiting for the previous one's reply, and members take them on several
// lane threads, so they can arrive out of turn: every member must still end
// with every record, clean.
TEST_F(OdsChainTest, SmallRecordsOfOneChunkFromManyWritersReachEveryMember) {
  constexpr int kWriters = 4, kRecords = 40;
  constexpr uint64_t kRecord = 47008;
  std::vector<std::byte> want(kWriters * kRecords * kRecord);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kWriters; ++t) {
    threads.emplace_back([&, t] {
      OdsClient c(cl_.target(members_[0]).address, cl_.key());
      for (int i = 0; i < kRecords; ++i) {
        // Interleaved: record i of writer t is record i * kWriters + t.
        const uint64_t off = (static_cast<uint64_t>(i) * kWriters + t) * kRecord;
        auto d = pattern(kRecord, t * 1000 + i);
        std::copy(d.begin(), d.end(), want.begin() + off);
        Status st = write_at(c, off, d);
        if (!st.ok()) {
          ADD_FAILURE() << "record at " << off << ": " << st.ToString();
          failures++;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);
  expect_identical(want.size(), &want);
}

TEST_F(OdsChainTest, StaleVersionWrongTargetAndNonHeadWritesAreRefused) {
  const auto d = pattern(10000, 4);
  pb::ChunkRef stale = ref(members_[0]);
  stale.set_chain_version(chain_.version() - 1);
  auto w = cl_.write(stale, 0, d);
  EXPECT_EQ(w.status().code(), Code::kStaleChain) << w.status().ToString();

  pb::ChunkRef wrong = ref(members_[0]);
  wrong.set_target_id(members_[1]);  // sent to the head, naming another member
  pb::WriteRequest q;
  q.set_length(d.size());
  pb::set_piece_crcs(q, d.data(), d.size());
  *q.mutable_ref() = wrong;
  net::BulkRegion r{const_cast<std::byte*>(d.data()), d.size(), net::BulkAccess::kServerPull};
  pb::WriteReply a;
  Status st = cl_.client(members_[0]).channel().call<pb::OdsWrite>(q, &a, {&r, 1});
  EXPECT_EQ(st.code(), Code::kWrongTarget) << st.ToString();

  w = cl_.write(ref(members_[1]), 0, d);  // a member that is not the head
  EXPECT_EQ(w.status().code(), Code::kStaleChain) << w.status().ToString();
  for (uint32_t m : members_) {
    EXPECT_EQ(cl_.stat(ref(m)).status().code(), Code::kNotFound)
        << "a refused write stored something on target " << m;
  }
}

TEST_F(OdsChainTest, ADirtyChunkIsReadOnlyAtTheLastServingMember) {
  const auto before = pattern(8192, 5);
  ASSERT_TRUE(cl_.write(ref(members_[0]), 0, before).ok());
  // The tail stops: the next write reaches the head and the middle and
  // waits there for the tail, dirty on both meanwhile.
  ChainCluster::Ods& tail = cl_.target(members_[2]);
  ASSERT_TRUE(ChainCluster::stop_process(tail.proc.pid()));
  const auto after = pattern(8192, 6);
  Status written;
  std::thread writer([&] {
    OdsClient c(cl_.target(members_[0]).address, cl_.key());
    pb::WriteRequest q;
    q.set_offset(0);
    q.set_length(after.size());
    pb::set_piece_crcs(q, after.data(), after.size());
    *q.mutable_ref() = ref(members_[0]);
    net::BulkRegion r{const_cast<std::byte*>(after.data()), after.size(),
                      net::BulkAccess::kServerPull};
    pb::WriteReply a;
    written = c.channel().call<pb::OdsWrite>(q, &a, {&r, 1});
  });
  for (uint32_t m : {members_[0], members_[1]}) {
    for (;;) {  // until the update reached it
      auto s = cl_.stat(ref(m));
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      if (s->dirty()) break;
      std::this_thread::sleep_for(2ms);
    }
    auto r = cl_.read(ref(m), 0, 8192);
    EXPECT_EQ(r.status().code(), Code::kChunkDirty) << "target " << m << ": " << r.status().ToString();
  }
  ::kill(tail.proc.pid(), SIGCONT);
  writer.join();
  ASSERT_TRUE(written.ok()) << written.ToString();
  expect_identical(after.size(), &after);
}

// The tail dies under a write: the update reached the head and the middle
// and was refused (the chain moved). After the chain change the new
// chain's head rolls it forward: both survivors commit it, serve it, and
// hold the bytes of the refused write (never rolled back), with no other
// write to push it.
TEST_F(OdsChainTest, ADirtyChunkLeftByAKilledTailIsRolledForwardAtTheChainChange) {
  const auto before = pattern(8192, 5);
  ASSERT_TRUE(cl_.write(ref(members_[0]), 0, before).ok());
  cl_.target(members_[2]).proc.kill(SIGKILL);
  const auto after = pattern(8192, 6);
  auto w = cl_.write(ref(members_[0]), 0, after);
  ASSERT_TRUE(w.status().code() == Code::kStaleChain || w.status().code() == Code::kUnavailable)
      << w.status().ToString();
  mpb::Chain now = cl_.wait_chain(chain_.chain_id(), [](const mpb::Chain& c) {
    return ChainCluster::write_chain(c).size() == 2;
  });
  const auto live = ChainCluster::write_chain(now);
  ASSERT_EQ(live[0], members_[0]);
  ASSERT_EQ(live[1], members_[1]);
  // A wait for the roll-forward, not a timed assertion: the bound only
  // keeps a chunk dirty for ever from hanging the test.
  const auto give_up = std::chrono::steady_clock::now() + 30s;
  for (uint32_t m : live) {
    for (;;) {
      auto s = cl_.stat(ChainCluster::ref(m, now, ino_));
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      if (!s->dirty()) break;
      ASSERT_LT(std::chrono::steady_clock::now(), give_up)
          << "target " << m << " still holds the chunk dirty at version " << s->chunk_version();
      std::this_thread::sleep_for(20ms);
    }
  }
  for (uint32_t m : live) {
    auto r = cl_.read(ChainCluster::ref(m, now, ino_), 0, 8192);
    ASSERT_TRUE(r.ok()) << "target " << m << ": " << r.status().ToString();
    EXPECT_TRUE(*r == after) << "target " << m << " does not hold the rolled-forward bytes";
  }
  EXPECT_NE(cl_.log_of(cl_.index_of(live[0])).find("rolled 1 dirty chunks forward"),
            std::string::npos);
}

// A member SIGKILLed while writes stream: every write the head acknowledged
// is on every surviving member; the others were refused with StaleChain or
// Unavailable, never acknowledged with a copy missing.
TEST_F(OdsChainTest, AMemberKilledMidStreamNeverYieldsASilentSuccess) {
  constexpr size_t kLen = 1 << 20;
  std::atomic<bool> stop{false};
  std::vector<uint64_t> acked;  // offsets whose write was acknowledged
  std::vector<Status> refused;
  std::thread writer([&] {
    OdsClient c(cl_.target(members_[0]).address, cl_.key());
    for (uint64_t i = 0; !stop.load() && i < 64; ++i) {
      auto d = pattern(kLen, 1000 + i);
      pb::WriteRequest q;
      q.set_offset(i * kLen);
      q.set_length(kLen);
      pb::set_piece_crcs(q, d.data(), d.size());
      *q.mutable_ref() = ref(members_[0]);
      net::BulkRegion r{d.data(), d.size(), net::BulkAccess::kServerPull};
      pb::WriteReply a;
      Status st = c.channel().call<pb::OdsWrite>(q, &a, {&r, 1});
      if (st.ok()) {
        acked.push_back(i);
      } else {
        refused.push_back(st);
        return;  // the map moved: a client would refetch it here
      }
    }
  });
  // Wait until some writes went through, then kill the tail.
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto s = cl_.stat(ref(members_[2]));
    if (s.ok() && s->size() >= 4 * kLen) break;
    std::this_thread::sleep_for(5ms);
  }
  cl_.target(members_[2]).proc.kill(SIGKILL);
  writer.join();
  stop = true;
  ASSERT_EQ(refused.size(), 1u) << "the writer ran to its end without noticing the kill";
  EXPECT_TRUE(refused[0].code() == Code::kStaleChain || refused[0].code() == Code::kUnavailable)
      << refused[0].ToString();
  // The MDS took the dead member out; the survivors hold every acked write.
  mpb::Chain now = cl_.wait_chain(chain_.chain_id(), [&](const mpb::Chain& c) {
    return ChainCluster::write_chain(c).size() == 2;
  });
  for (uint32_t m : ChainCluster::write_chain(now)) {
    for (uint64_t i : acked) {
      auto r = cl_.read(ChainCluster::ref(m, now, ino_), i * kLen, kLen);
      if (r.status().code() == Code::kChunkDirty) {
        continue;  // the refused write left the chunk dirty here; the last member serves it
      }
      ASSERT_TRUE(r.ok()) << "target " << m << ": " << r.status().ToString();
      EXPECT_TRUE(*r == pattern(kLen, 1000 + i)) << "target " << m << " lacks acked write " << i;
    }
  }
  // Under the new map the chain takes writes again, on both survivors.
  const auto d = pattern(5000, 7);
  const uint32_t head = ChainCluster::write_chain(now)[0];
  auto w = cl_.write(ChainCluster::ref(head, now, ino_), 0, d);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  for (uint32_t m : ChainCluster::write_chain(now)) {
    auto r = cl_.read(ChainCluster::ref(m, now, ino_), 0, d.size());
    ASSERT_TRUE(r.ok()) << "target " << m << ": " << r.status().ToString();
    EXPECT_TRUE(*r == d) << "target " << m;
  }
}

}  // namespace
}  // namespace surge::ods::testing

namespace surge::ods::testing {
namespace {

// Sums "<what> N" over the resync-done lines of a log.
uint64_t sum_after(const std::string& log, const std::string& what) {
  uint64_t total = 0;
  for (size_t p = log.find("done: "); p != std::string::npos; p = log.find("done: ", p + 1)) {
    const size_t eol = log.find('\n', p);
    const std::string line = log.substr(p, eol - p);
    if (line.find("chunks sent or removed") == std::string::npos) continue;
    if (what == "sent") {
      total += std::stoull(line.substr(6));
    } else {
      const size_t u = line.find(" unchanged");
      const size_t b = line.rfind(", ", u);
      total += std::stoull(line.substr(b + 2, u - b - 2));
    }
  }
  return total;
}

// A data server away while chunks changed comes back SYNCING, gets exactly
// the chunks that changed (written, or removed) from the last serving
// member, and serves again with every chunk as the survivors hold it.
// Only the killed server may be marked down: a live one marked down too
// (slowed past the MDS's timeout, as under ASan with an unscaled 1 s) would
// resync its chains under the test's requests, refused then as StaleChain,
// and add resync lines to the counts below. The failures name the MDS's
// chain events.
TEST(OdsChainResync, AReturningMemberGetsOnlyTheChangedChunksThenServes) {
  ChainCluster cl;
  cl.start({.data_servers = 2, .replicas = 2, .target_timeout_ms = 1000});
  cl.wait_targets_up();
  struct File {
    uint64_t ino;
    uint32_t chain;
    std::vector<std::byte> data;
  };
  std::vector<File> files;
  for (int i = 0; i < 6; ++i) {
    std::string name = "f";
    name += std::to_string(i);
    auto [ino, chain_id] = cl.create(name);
    files.push_back({ino, chain_id, pattern(300000 + 1000 * i, 50 + i)});
  }
  for (auto& f : files) {
    const mpb::Chain c = cl.chain(f.chain);
    auto w = cl.write(ChainCluster::ref(ChainCluster::write_chain(c)[0], c, f.ino), 0, f.data);
    ASSERT_TRUE(w.ok()) << w.status().ToString() << cl.chain_events();
  }
  const uint32_t away = cl.ods(1).id, stays = cl.ods(0).id;
  cl.ods(1).proc.kill(SIGKILL);
  for (auto& f : files) {
    cl.wait_chain(f.chain, [&](const mpb::Chain& c) {
      return ChainCluster::write_chain(c) == std::vector<uint32_t>{stays};
    });
  }
  // While it is away: two chunks rewritten, one removed, three untouched.
  for (int i : {0, 1}) {
    files[i].data = pattern(200000, 90 + i);
    const mpb::Chain c = cl.chain(files[i].chain);
    auto w = cl.write(ChainCluster::ref(stays, c, files[i].ino), 0, files[i].data);
    ASSERT_TRUE(w.ok()) << w.status().ToString() << cl.chain_events();
    ASSERT_TRUE(cl.truncate(ChainCluster::ref(stays, c, files[i].ino), files[i].data.size()).ok())
        << cl.chain_events();
  }
  {
    const mpb::Chain c = cl.chain(files[2].chain);
    ASSERT_TRUE(cl.remove(ChainCluster::ref(stays, c, files[2].ino)).ok()) << cl.chain_events();
  }
  cl.restart_ods(1);
  ASSERT_EQ(cl.ods(1).id, away);
  for (auto& f : files) {
    cl.wait_chain(f.chain, [&](const mpb::Chain& c) {
      int serving = 0;
      for (const auto& m : c.members()) serving += m.state() == mpb::MEMBER_SERVING;
      return serving == 2;
    });
  }
  ASSERT_EQ(cl.marked_down(), std::vector<uint32_t>{away}) << cl.chain_events();
  for (size_t i = 0; i < files.size(); ++i) {
    const mpb::Chain c = cl.chain(files[i].chain);
    const pb::ChunkRef at_returned = ChainCluster::ref(away, c, files[i].ino);
    if (i == 2) {
      EXPECT_EQ(cl.stat(at_returned).status().code(), Code::kNotFound)
          << "the chunk removed while it was away is still there";
      continue;
    }
    auto r = cl.read(at_returned, 0, 1 << 20);
    ASSERT_TRUE(r.ok()) << "file " << i << ": " << r.status().ToString() << cl.chain_events();
    EXPECT_TRUE(*r == files[i].data) << "file " << i << " differs on the returned member";
  }
  const std::string log = cl.log_of(0);
  EXPECT_EQ(sum_after(log, "sent"), 3u) << log;
  EXPECT_EQ(sum_after(log, "unchanged"), 3u) << log;
}

}  // namespace
}  // namespace surge::ods::testing

namespace surge::ods::testing {
namespace {

// OdsScrub covers the chunks of chained files too (their own object store
// under data_dir/chunks/): a flipped byte in a chunk's bytes is found and
// named by its chunk (chain, ino, slot, position), not by an object id.
TEST(OdsChainScrub, AFlippedByteInAChunkIsFoundAndNamedByItsChunk) {
  ChainCluster cl;
  cl.start({.data_servers = 1, .replicas = 1});
  cl.wait_targets_up();
  auto [ino, chain_id] = cl.create("scrubbed");
  const mpb::Chain c = cl.chain(chain_id);
  const pb::ChunkRef ref = ChainCluster::ref(c.members(0).target_id(), c, ino);
  auto d = pattern(4 * 4096, 8);
  ASSERT_TRUE(cl.write(ref, 0, d, true).ok());
  std::string found;
  for (auto& e : std::filesystem::recursive_directory_iterator(cl.ods(0).dir + "/chunks")) {
    if (e.path().extension() == ".dat") found = e.path();
  }
  ASSERT_FALSE(found.empty()) << "no chunk data file under " << cl.ods(0).dir << "/chunks";
  {
    int fd = ::open(found.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    char b = 0;
    ASSERT_EQ(::pread(fd, &b, 1, 2 * 4096 + 9), 1);
    b ^= 1;
    ASSERT_EQ(::pwrite(fd, &b, 1, 2 * 4096 + 9), 1);
    ::close(fd);
  }
  uint64_t objects = 0;
  std::vector<pb::BadBlock> bad;
  for (uint32_t dir = 0; dir < 65536;) {
    pb::ScrubRequest q;
    q.set_first_dir(dir);
    q.set_dir_count(4096);
    pb::ScrubReply a;
    Status st = cl.client(ref.target_id()).channel().call<pb::OdsScrub>(q, &a);
    ASSERT_TRUE(st.ok()) << st.ToString();
    objects += a.objects_checked();
    for (const auto& b : a.bad_blocks()) bad.push_back(b);
    ASSERT_GT(a.next_dir(), dir);
    dir = a.next_dir();
  }
  EXPECT_EQ(objects, 1u) << "the chunk was not scrubbed";
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].object_id(), 0u);
  EXPECT_EQ(bad[0].offset(), 2u * 4096);
  EXPECT_EQ(bad[0].chunk().chain_id(), chain_id);
  EXPECT_EQ(bad[0].chunk().ino(), ino);
  EXPECT_EQ(bad[0].chunk().slot(), 0u);
  EXPECT_EQ(bad[0].chunk().target_id(), ref.target_id());
}

}  // namespace
}  // namespace surge::ods::testing

namespace surge::ods::testing {
namespace {

// A chunk removed and written again while a replica is away: the rewrite
// is a new life of the chunk (ods/chain/chunk_lives.h), so its version
// differs from the old copy's even with as many updates, and the resync
// brings the returning replica the new bytes instead of comparing the
// stale chunk equal.
TEST(OdsChainLives, ARemovedAndRewrittenChunkReachesAReplicaAwayMeanwhile) {
  ChainCluster cl;
  cl.start({.data_servers = 2, .replicas = 2, .target_timeout_ms = 1000});
  cl.wait_targets_up();
  auto [ino, chain_id] = cl.create("relived");
  const auto old_bytes = pattern(300000, 61), new_bytes = pattern(300000, 62);
  {
    const mpb::Chain c = cl.chain(chain_id);
    auto w = cl.write(ChainCluster::ref(ChainCluster::write_chain(c)[0], c, ino), 0, old_bytes);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
  }
  const uint32_t away = cl.ods(1).id, stays = cl.ods(0).id;
  cl.ods(1).proc.kill(SIGKILL);
  mpb::Chain c = cl.wait_chain(chain_id, [&](const mpb::Chain& ch) {
    return ChainCluster::write_chain(ch) == std::vector<uint32_t>{stays};
  });
  // Removed and written again with as many updates (one).
  ASSERT_TRUE(cl.remove(ChainCluster::ref(stays, c, ino)).ok());
  auto w = cl.write(ChainCluster::ref(stays, c, ino), 0, new_bytes);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  cl.restart_ods(1);
  ASSERT_EQ(cl.ods(1).id, away);
  c = cl.wait_chain(chain_id, [](const mpb::Chain& ch) {
    int serving = 0;
    for (const auto& m : ch.members()) serving += m.state() == mpb::MEMBER_SERVING;
    return serving == 2;
  });
  auto r = cl.read(ChainCluster::ref(away, c, ino), 0, 1 << 20);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(*r == new_bytes) << "the returned replica serves the bytes of the removed chunk";
  auto s_away = cl.stat(ChainCluster::ref(away, c, ino));
  auto s_stays = cl.stat(ChainCluster::ref(stays, c, ino));
  ASSERT_TRUE(s_away.ok() && s_stays.ok());
  EXPECT_EQ(s_away->chunk_version(), s_stays->chunk_version());
}

}  // namespace
}  // namespace surge::ods::testing
