// EC full-group writes on real data servers (docs/redundancy.md, "EC
// writes: full groups"): the three steps a client takes (held data writes,
// its parity with their versions, commits) sent straight to the positions,
// alone and raced against each other and against plain partial writes;
// a client that stops after step 1; parity for versions already passed.
// Every case ends with each parity position compared with an encode of
// the data read beside it.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "ods/chain/chunk_lives.h"
#include "tests/ods/ec_file.h"

namespace surge::ods::testing {
namespace {

using namespace std::chrono_literals;

// Step 1 of one group row: fresh random bytes at off of every data
// position, held.
struct HeldRow {
  uint64_t off = 0;
  std::vector<std::vector<std::byte>> data;
  std::vector<uint64_t> versions;
  std::vector<bool> held;
};

Result<HeldRow> hold_row(ChainCluster& cl, const EcFile& f, uint64_t off, uint64_t len,
                         std::mt19937_64& rng) {
  HeldRow row;
  row.off = off;
  for (uint32_t p = 0; p < f.k; ++p) {
    row.data.push_back(random_bytes(len, rng));
    pb::WriteRequest q;
    q.set_ec_hold(true);
    SURGE_ASSIGN_OR_RETURN(auto a, cl.write(ChainCluster::ec_ref(f.chain, f.ino, p), off,
                                            row.data.back(), std::move(q)));
    row.versions.push_back(a.chunk_version());
    row.held.push_back(a.ec_held());
  }
  return row;
}

// Step 2: the row's parity to `to`; the positions that stored it.
Result<std::vector<uint32_t>> send_parity(ChainCluster& cl, const EcFile& f, const HeldRow& row,
                                          std::vector<uint32_t> to) {
  const uint64_t len = row.data[0].size();
  auto codec = ec::RsCodec::Create(f.k, f.m);
  if (!codec.ok()) return codec.status();
  std::vector<const uint8_t*> in;
  for (const auto& d : row.data) in.push_back(reinterpret_cast<const uint8_t*>(d.data()));
  std::vector<std::vector<std::byte>> parity(f.m, std::vector<std::byte>(len));
  std::vector<uint8_t*> out;
  for (auto& p : parity) out.push_back(reinterpret_cast<uint8_t*>(p.data()));
  SURGE_RETURN_IF_ERROR(codec->Encode(in, out, len));
  std::vector<uint32_t> stored;
  for (uint32_t p : to) {
    pb::WriteRequest q;
    for (uint64_t v : row.versions) q.add_ec_group_versions(v);
    SURGE_ASSIGN_OR_RETURN(auto a, cl.write(ChainCluster::ec_ref(f.chain, f.ino, p), row.off,
                                            parity[p - f.k], std::move(q)));
    if (a.ec_applied()) stored.push_back(p);
  }
  return stored;
}

// Step 3 at every data position that held.
Status commit_row(ChainCluster& cl, const EcFile& f, const HeldRow& row,
                  const std::vector<uint32_t>& applied) {
  for (uint32_t p = 0; p < f.k; ++p) {
    if (!row.held[p]) continue;
    SURGE_RETURN_IF_ERROR(
        cl.ec_commit(ChainCluster::ec_ref(f.chain, f.ino, p), row.versions[p], applied));
  }
  return Status::OK();
}

class OdsEcGroup : public ::testing::Test {
 protected:
  void SetUp() override {
    cl_.start({.data_servers = 6, .replicas = 1});
    cl_.wait_targets_up();
    f_ = make_ec_file(cl_, 4, 2, "f");
  }
  ChainCluster cl_;
  EcFile f_;
  std::mt19937_64 rng_{3};
};

TEST_F(OdsEcGroup, ThreeStepsLeaveParityTheCodeWithoutADelta) {
  const uint64_t len = 256 << 10;
  auto row = hold_row(cl_, f_, 0, len, rng_);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  for (uint32_t p = 0; p < f_.k; ++p) EXPECT_TRUE(row->held[p]) << "position " << p;
  auto stored = send_parity(cl_, f_, *row, {4, 5});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(*stored, (std::vector<uint32_t>{4, 5}));
  ASSERT_TRUE(commit_row(cl_, f_, *row, *stored).ok());
  expect_parity_consistent(cl_, f_, len);
  // One store made each parity chunk: no data position sent a delta (each
  // applied delta is an update of its own).
  for (uint32_t p : {4u, 5u}) {
    EXPECT_EQ(read_position(cl_, f_, p, len).version & kSeqMask, 1u) << "parity " << p;
  }
}

TEST_F(OdsEcGroup, AParityPositionLeftOutGetsTheDeltasAtCommit) {
  const uint64_t len = 128 << 10;
  auto row = hold_row(cl_, f_, 1 << 20, len, rng_);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  auto stored = send_parity(cl_, f_, *row, {4});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ASSERT_TRUE(commit_row(cl_, f_, *row, *stored).ok());
  expect_parity_consistent(cl_, f_, (1 << 20) + len);
}

TEST_F(OdsEcGroup, ParityForVersionsAlreadyPassedIsDeclined) {
  const uint64_t len = 64 << 10;
  auto row = hold_row(cl_, f_, 0, len, rng_);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  // A plain write to position 0 sends the held delta first, then its own:
  // the parity positions move past the row's version of position 0.
  auto later = random_bytes(1000, rng_);
  ASSERT_TRUE(cl_.write(ChainCluster::ec_ref(f_.chain, f_.ino, 0), 500, later).ok());
  auto stored = send_parity(cl_, f_, *row, {4, 5});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_TRUE(stored->empty()) << "stale parity stored at " << stored->size() << " position(s)";
  ASSERT_TRUE(commit_row(cl_, f_, *row, *stored).ok());
  expect_parity_consistent(cl_, f_, len);
}

TEST_F(OdsEcGroup, HeldDeltasWhoseCommitNeverComesAreSentByTheServer) {
  const uint64_t len = 64 << 10;
  auto row = hold_row(cl_, f_, 0, len, rng_);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  // The client is gone: no parity, no commit. The parity falls behind the
  // data until the data servers' sweepers send what they hold.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  for (;;) {
    const ChunkRead parity = read_position(cl_, f_, 4, len);
    if (parity.applied == row->versions) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "the held deltas never reached parity position 4";
    std::this_thread::sleep_for(200ms);
  }
  expect_parity_consistent(cl_, f_, len);
}

// Two writers of full groups over the same range and one of partial
// ranges inside it, at once: whatever interleaving, the parity ends as the
// code of the data.
TEST_F(OdsEcGroup, FullGroupsAndPartialWritesOfOneGroupAtOnce) {
  const uint64_t len = 128 << 10;
  std::atomic<int> failures{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      std::mt19937_64 rng(100 + w);
      for (int i = 0; i < 15; ++i) {
        auto row = hold_row(cl_, f_, 0, len, rng);
        auto stored = row.ok() ? send_parity(cl_, f_, *row, {4, 5})
                               : Result<std::vector<uint32_t>>(row.status());
        Status st = stored.ok() ? commit_row(cl_, f_, *row, *stored) : stored.status();
        if (!st.ok()) {
          ADD_FAILURE() << "group writer " << w << ", round " << i << ": " << st.ToString();
          ++failures;
          return;
        }
      }
    });
  }
  writers.emplace_back([&] {
    std::mt19937_64 rng(200);
    for (int i = 0; i < 40; ++i) {
      const uint32_t p = static_cast<uint32_t>(rng() % f_.k);
      const uint64_t n = 1 + rng() % 20000, at = rng() % (len - n);
      auto d = random_bytes(n, rng);
      Status st = cl_.write(ChainCluster::ec_ref(f_.chain, f_.ino, p), at, d).status();
      if (!st.ok()) {
        ADD_FAILURE() << "partial writer, write " << i << ": " << st.ToString();
        ++failures;
        return;
      }
    }
  });
  for (auto& t : writers) t.join();
  ASSERT_EQ(failures.load(), 0);
  expect_parity_consistent(cl_, f_, len);
}

}  // namespace
}  // namespace surge::ods::testing
