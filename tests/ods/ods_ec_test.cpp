// EC chains on real data servers (docs/redundancy.md, "EC writes: the
// design"): a real surge-mds forms EC chains; writes go straight to data
// positions, which send parity deltas to the parity positions; every
// position's chunk is read back directly and the parity compared with an
// encode of the data read beside it.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <random>
#include <thread>
#include <vector>

#include "tests/ods/ec_file.h"

namespace surge::ods::testing {
namespace {

using namespace std::chrono_literals;

TEST(OdsEc, DataWritesLeaveParityTheCodeOfTheData) {
  ChainCluster cl;
  cl.start({.data_servers = 4, .replicas = 1});
  cl.wait_targets_up();
  EcFile f = make_ec_file(cl, 2, 2, "f");
  std::mt19937_64 rng(1);
  const uint64_t len = 3 << 20;  // past one pool buffer: several updates per write
  // Unaligned ranges, a write over one buffer, one past the data's end, and
  // an overwrite of bytes written before.
  auto a = random_bytes(100000, rng), b = random_bytes(1500000, rng), c = random_bytes(4097, rng);
  ASSERT_TRUE(cl.write(ChainCluster::ec_ref(f.chain, f.ino, 0), 12345, a).ok());
  ASSERT_TRUE(cl.write(ChainCluster::ec_ref(f.chain, f.ino, 1), 1000000, b).ok());
  ASSERT_TRUE(cl.write(ChainCluster::ec_ref(f.chain, f.ino, 0), 50000, c).ok());
  ASSERT_TRUE(cl.write(ChainCluster::ec_ref(f.chain, f.ino, 1), 2 << 20, b).ok());
  expect_parity_consistent(cl, f, len);
  // The data positions hold exactly what was written.
  ChunkRead d0 = read_position(cl, f, 0, len);
  std::vector<std::byte> want0(len);
  std::copy(a.begin(), a.end(), want0.begin() + 12345);
  std::copy(c.begin(), c.end(), want0.begin() + 50000);
  EXPECT_TRUE(
      std::equal(want0.begin(), want0.end(), reinterpret_cast<std::byte*>(d0.bytes.data())));
}

// Two clients (and a third on one of the same positions) write one group
// at once: deltas of different sources interleave at the parity positions
// and the parity still ends as the code of the final data.
TEST(OdsEc, ConcurrentWritersOfOneGroupLeaveConsistentParity) {
  ChainCluster cl;
  cl.start({.data_servers = 5, .replicas = 1});
  cl.wait_targets_up();
  EcFile f = make_ec_file(cl, 3, 2, "f");
  const uint64_t len = 1 << 20;
  std::atomic<int> failures{0};
  std::string first_failure;
  std::mutex mu;
  auto writer = [&](uint32_t p, uint64_t seed) {
    // Each writer its own connections: OdsClient is per target in the
    // cluster, so this writer uses a cluster-independent channel set.
    std::mt19937_64 rng(seed);
    OdsClient own(cl.target(f.chain.members(static_cast<int>(p)).target_id()).address, cl.key());
    for (int i = 0; i < 150; ++i) {
      const uint64_t n = 1 + rng() % 65536, off = rng() % (len - n);
      auto d = random_bytes(n, rng);
      pb::WriteRequest q;
      q.set_offset(off);
      q.set_length(n);
      pb::set_piece_crcs(q, d.data(), d.size());
      *q.mutable_ref() = ChainCluster::ec_ref(f.chain, f.ino, p);
      net::BulkRegion r{d.data(), d.size(), net::BulkAccess::kServerPull};
      pb::WriteReply a;
      Status st = own.channel().call<pb::OdsWrite>(q, &a, {&r, 1});
      if (!st.ok()) {
        std::lock_guard lk(mu);
        if (failures++ == 0) first_failure = st.ToString();
      }
    }
  };
  std::vector<std::thread> ts;
  ts.emplace_back(writer, 0, 11);
  ts.emplace_back(writer, 1, 12);
  ts.emplace_back(writer, 2, 13);
  ts.emplace_back(writer, 0, 14);
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0) << first_failure;
  expect_parity_consistent(cl, f, len);
}

// A data position cut shorter sends the bytes it cut as a delta: the
// parity stays the code of the data (zeros where every data chunk is cut);
// a parity position's truncate changes nothing; remove drops one position.
TEST(OdsEc, CutsAtADataPositionKeepParityConsistent) {
  ChainCluster cl;
  cl.start({.data_servers = 3, .replicas = 1});
  cl.wait_targets_up();
  EcFile f = make_ec_file(cl, 2, 1, "f");
  std::mt19937_64 rng(5);
  const uint64_t len = 3 << 20;
  auto a = random_bytes(len, rng), b = random_bytes(len / 2, rng);
  ASSERT_TRUE(cl.write(ChainCluster::ec_ref(f.chain, f.ino, 0), 0, a).ok());
  ASSERT_TRUE(cl.write(ChainCluster::ec_ref(f.chain, f.ino, 1), 100, b).ok());
  // Over two buffers cut from position 0, a few bytes from position 1.
  ASSERT_TRUE(cl.truncate(ChainCluster::ec_ref(f.chain, f.ino, 0), 700000).ok());
  ASSERT_TRUE(cl.truncate(ChainCluster::ec_ref(f.chain, f.ino, 1), len / 2 + 90).ok());
  ASSERT_TRUE(cl.truncate(ChainCluster::ec_ref(f.chain, f.ino, 2), 10).ok());
  expect_parity_consistent(cl, f, len);
  ChunkRead d0 = read_position(cl, f, 0, len);
  EXPECT_TRUE(
      std::equal(a.begin(), a.begin() + 700000, reinterpret_cast<std::byte*>(d0.bytes.data())));
  EXPECT_TRUE(
      std::all_of(d0.bytes.begin() + 700000, d0.bytes.end(), [](uint8_t x) { return x == 0; }));
  auto gone = cl.remove(ChainCluster::ec_ref(f.chain, f.ino, 0));
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_TRUE(*gone);
  EXPECT_EQ(cl.stat(ChainCluster::ec_ref(f.chain, f.ino, 0)).status().code(), Code::kNotFound);
  EXPECT_TRUE(cl.stat(ChainCluster::ec_ref(f.chain, f.ino, 1)).ok()) << "only position 0 goes";
}

// A data position's disk fills in the middle of writes: the write that
// meets it fails NoSpace, naming the chunk, and the parity positions get
// whatever part of it was stored, so the group's parity still matches the
// data it holds.
TEST(OdsEc, AFullDiskAtADataPositionLeavesParityConsistent) {
  ChainCluster cl;
  cl.start({.data_servers = 3, .replicas = 1, .ods0_tmpfs_size = "48m"});
  cl.wait_targets_up();
  // A file whose data position p0 is data server 0's (placement rotates
  // the positions over the chains).
  EcFile f;
  uint32_t p0 = 2;
  for (int i = 0; i < 6 && p0 == 2; ++i) {
    f = make_ec_file(cl, 2, 1, "f" + std::to_string(i));
    for (uint32_t p = 0; p < 2; ++p) {
      if (f.chain.members(static_cast<int>(p)).target_id() == cl.ods(0).id) p0 = p;
    }
  }
  ASSERT_LT(p0, 2u) << "data server 0 holds no data position of 6 files' chains";
  std::mt19937_64 rng(8);
  Status full;
  uint64_t end = 0;
  for (int i = 0; i < 64 && full.ok(); ++i) {
    auto d = random_bytes(1 << 20, rng);
    auto w = cl.write(ChainCluster::ec_ref(f.chain, f.ino, p0), end, d);
    if (w.ok()) {
      end += d.size();
    } else {
      full = w.status();
    }
  }
  ASSERT_EQ(full.code(), Code::kNoSpace) << full.ToString();
  EXPECT_NE(full.message().find("EC write of chunk {ino " + std::to_string(f.ino)),
            std::string::npos)
      << full.ToString();
  expect_parity_consistent(cl, f, end + (1 << 20));
}

TEST(OdsEc, WritesGoToTheirDataPositionOnly) {
  ChainCluster cl;
  cl.start({.data_servers = 3, .replicas = 1});
  cl.wait_targets_up();
  EcFile f = make_ec_file(cl, 2, 1, "f");
  std::vector<std::byte> d(4096, std::byte{7});
  auto parity = cl.write(ChainCluster::ec_ref(f.chain, f.ino, 2), 0, d);
  EXPECT_EQ(parity.status().code(), Code::kInvalidArgument) << parity.status().ToString();
  EXPECT_NE(parity.status().message().find("holds parity"), std::string::npos)
      << parity.status().ToString();
  pb::ChunkRef wrong = ChainCluster::ec_ref(f.chain, f.ino, 1);
  wrong.set_target_id(f.chain.members(0).target_id());  // position 1 at member 0
  auto w = cl.write(wrong, 0, d);
  EXPECT_EQ(w.status().code(), Code::kWrongTarget) << w.status().ToString();
  EXPECT_NE(w.status().message().find("holds position 0"), std::string::npos)
      << w.status().ToString();
}

// A parity position's data server is killed: the write that finds it gone
// reports it, the MDS takes it out of the chain, and writes go on to the
// data positions and the surviving parity, which stays consistent.
TEST(OdsEc, WritesGoOnWithAParityPositionKilled) {
  ChainCluster cl;
  cl.start({.data_servers = 4, .replicas = 1, .target_timeout_ms = 2000});
  cl.wait_targets_up();
  EcFile f = make_ec_file(cl, 2, 2, "f");
  std::mt19937_64 rng(3);
  const uint64_t len = 256 << 10;
  auto a = random_bytes(len, rng);
  ASSERT_TRUE(cl.write(ChainCluster::ec_ref(f.chain, f.ino, 0), 0, a).ok());
  const uint32_t dead = f.chain.members(3).target_id();
  cl.target(dead).proc.kill(SIGKILL);
  for (int i = 0; i < 20; ++i) {
    auto d = random_bytes(1 + rng() % 20000, rng);
    const uint64_t off = rng() % (len - d.size());
    Status st = write_retrying(cl, f, static_cast<uint32_t>(i % 2), off, d);
    ASSERT_TRUE(st.ok()) << st.ToString() << cl.chain_events();
  }
  EXPECT_NE(f.chain.members(3).state(), mpb::MEMBER_SERVING) << f.chain.DebugString();
  expect_parity_consistent(cl, f, len, {3});
}

}  // namespace
}  // namespace surge::ods::testing
