// EC files through libsurge on real daemons (issue 16; docs/redundancy.md,
// "EC writes: the design"): 6 data servers, directories given `surgectl
// setstripe --ec K+M` with 64 KiB units over 2 slots, so ordinary ranges
// cross units, groups and slots. Every read is checked byte for byte
// against a model of the file; after the writes every group's parity is
// what the codec makes of the data (`surgectl` cannot say yet, so a
// second client reads with each position's server killed in turn:
// ec_degraded_test).
#include <fcntl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>

#include "tests/client/local_cluster.h"
#include "tests/client/metrics_page.h"

namespace surge::test {
namespace {

constexpr uint64_t kUnit = 64 << 10;

class EcIo : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterConfig cfg;
    cfg.ods_count = 6;
    cfg.metrics = true;
    auto c = LocalCluster::Start(cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    auto cl = cluster_->connect(8000);
    ASSERT_TRUE(cl.ok()) << cl.status().ToString();
    client_ = std::move(*cl);
  }

  // /name as an EC K+M directory of 64 KiB units over 2 slots.
  void ec_dir(const std::string& name, int k, int m) {
    ASSERT_TRUE(client_->mkdir("/" + name, 0777).ok());
    const char* b = std::getenv("SURGE_BUILD_DIR");
    ASSERT_NE(b, nullptr) << "SURGE_BUILD_DIR is not set (run through ctest)";
    std::string out;
    ASSERT_EQ(sh(std::string(b) + "/tools/surgectl --mds " + cluster_->mds_address() +
                     " --key-file " + cluster_->key_file() + " setstripe --ec " +
                     std::to_string(k) + "+" + std::to_string(m) + " --count 2 --size " +
                     std::to_string(kUnit) + " /" + name + " 2>&1",
                 &out),
              0)
        << out;
  }

  // [off, off + len) of path read through a fresh client (no cache of ours).
  std::string read_back(const std::string& path, uint64_t off, size_t len) {
    auto cl = cluster_->connect(8000);
    EXPECT_TRUE(cl.ok()) << cl.status().ToString();
    if (!cl.ok()) return {};
    auto f = (*cl)->open(path, O_RDONLY);
    EXPECT_TRUE(f.ok()) << path << ": " << f.status().ToString();
    if (!f.ok()) return {};
    std::string out(len, '\0');
    auto n = (*cl)->pread(**f, out.data(), len, off);
    EXPECT_TRUE(n.ok()) << path << " at " << off << ": " << n.status().ToString();
    out.resize(n.ok() ? *n : 0);
    (void)(*cl)->close(*f);
    return out;
  }

  // path made (it must not exist) and written whole with bytes, synced.
  void write_new(const std::string& path, const std::string& bytes) {
    auto f = client_->open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
    ASSERT_TRUE(f.ok()) << path << ": " << f.status().ToString();
    ASSERT_TRUE(client_->pwrite(**f, bytes.data(), bytes.size(), 0).ok()) << path;
    ASSERT_TRUE(client_->fsync(**f, false).ok()) << path;
    ASSERT_TRUE(client_->close(*f).ok()) << path;
  }

  // surge_ods_requests_total{method} summed over the data servers; -1
  // when one serves no page.
  double ods_requests(const std::string& method) {
    double sum = 0;
    for (int i = 0; i < 6; ++i) {
      const std::string page = ods_metrics_page(*cluster_, i);
      if (page.empty()) return -1;
      sum += series_value(page, "surge_ods_requests_total{method=\"" + method + "\"}");
    }
    return sum;
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<Client> client_;
};

// Several K+M: a file written whole and then at odd places reads back
// exactly at every boundary (unit, group, slot, file end, past it).
TEST_F(EcIo, ReadsAreByteExactAtEveryBoundary) {
  for (auto [k, m] : {std::pair{2, 1}, {4, 2}, {3, 3}}) {
    const std::string dir = "ec" + std::to_string(k) + "_" + std::to_string(m);
    ec_dir(dir, k, m);
    const std::string path = "/" + dir + "/f";
    const uint64_t group = static_cast<uint64_t>(k) * kUnit;
    std::string model = random_bytes(group * 5 + 12345, static_cast<uint64_t>(k * 10 + m));
    auto f = client_->open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_TRUE(client_->pwrite(**f, model.data(), model.size(), 0).ok());
    // Overwrites across a unit edge, a group edge and the file's end.
    for (uint64_t at : {kUnit - 100, group - 7, 3 * group + kUnit / 2, model.size() - 50}) {
      std::string d = random_bytes(300, at);
      ASSERT_TRUE(client_->pwrite(**f, d.data(), d.size(), at).ok()) << at;
      if (at + d.size() > model.size()) model.resize(at + d.size(), '\0');
      model.replace(at, d.size(), d);
    }
    ASSERT_TRUE(client_->fsync(**f, false).ok());
    ASSERT_TRUE(client_->close(*f).ok());
    EXPECT_EQ(read_back(path, 0, model.size() + 4096), model) << k << "+" << m;
    for (uint64_t edge : {kUnit, group, 2 * group, 4 * group + kUnit, model.size()}) {
      for (uint64_t at : {edge - 1, edge, edge + 1}) {
        const size_t len = 3000;
        const std::string want = at >= model.size() ? "" : model.substr(at, len);
        EXPECT_EQ(read_back(path, at, len), want) << k << "+" << m << " at " << at;
      }
    }
  }
}

// Writes of whole groups take the full-group path (docs/redundancy.md, "EC
// writes: full groups"): the client sends the parity itself, each data
// chunk is committed once for all its rows, and no data server sends a
// parity delta; the parity is the code of the data (scrub) and the bytes
// read back.
TEST_F(EcIo, WholeGroupsAreEncodedByTheClient) {
  ec_dir("ec", 4, 2);
  const uint64_t group = 4 * kUnit, groups = 8;
  const std::string model = random_bytes(group * groups, 99);
  const double commits = ods_requests("ec_commit"), forwards = ods_requests("chain_forward");
  ASSERT_GE(commits, 0) << "a data server serves no metrics page";
  ASSERT_NO_FATAL_FAILURE(write_new("/ec/f", model));
  // 4 data chunks in each of the 2 slots; each commit names the chunk's
  // held updates of the batch. With the parity stored everywhere the
  // client does not wait for the commits: they may still be on their way.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ods_requests("ec_commit") - commits < 4.0 * 2 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(ods_requests("ec_commit") - commits, 4.0 * 2) << "one commit per data chunk";
  EXPECT_EQ(ods_requests("chain_forward") - forwards, 0.0) << "parity deltas were sent";
  EXPECT_EQ(read_back("/ec/f", 0, model.size()), model);
  const char* b = std::getenv("SURGE_BUILD_DIR");
  ASSERT_NE(b, nullptr) << "SURGE_BUILD_DIR is not set (run through ctest)";
  std::string out;
  EXPECT_EQ(sh(std::string(b) + "/tools/surgectl --mds " + cluster_->mds_address() +
                   " --key-file " + cluster_->key_file() + " scrub 2>&1",
               &out),
            0)
      << out;
}

// A write that covers two kMaxPiece windows of each data chunk is two
// full-group runs of the same chunks; they go one after the other (in
// waves), so every data position orders their updates alike and the
// parity positions store the client's parity of both. Under way at once,
// their orders crossed between positions, each run's parity waited for
// the other's, both were declined after the parity positions' turn wait,
// and the data servers sent parity deltas instead (16 MiB writes ran at a
// tenth of the rate of 8 MiB ones).
TEST_F(EcIo, ARunPerWindowOfAChunkStoresTheClientsParity) {
  ec_dir("ec", 4, 2);
  // 64 groups over 2 slots: 32 rows of each data chunk, two 1 MiB windows
  // (the client's kMaxPiece).
  const uint64_t window = 1 << 20, group = 4 * kUnit, groups = 2 * 2 * (window / kUnit);
  const std::string model = random_bytes(group * groups, 17);
  const double forwards = ods_requests("chain_forward");
  ASSERT_GE(forwards, 0) << "a data server serves no metrics page";
  ASSERT_NO_FATAL_FAILURE(write_new("/ec/f", model));
  EXPECT_EQ(ods_requests("chain_forward") - forwards, 0.0)
      << "parity deltas were sent: a parity position declined the client's parity";
  EXPECT_EQ(read_back("/ec/f", 0, model.size()), model);
}

// Random overwrites, holes and truncates of one EC file against a model.
TEST_F(EcIo, RandomOverwritesAndTruncatesMatchAModel) {
  ec_dir("ec", 4, 2);
  const std::string path = "/ec/f";
  auto f = client_->open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  std::string model;
  std::mt19937_64 rng(7);
  const uint64_t span = 3 << 20;
  for (int i = 0; i < 200; ++i) {
    if (i % 25 == 24) {
      const uint64_t size = rng() % span;
      ASSERT_TRUE(client_->truncate(path, size).ok()) << "truncate to " << size;
      model.resize(size, '\0');
      continue;
    }
    const uint64_t len = 1 + rng() % 150000, at = rng() % (span - len);
    std::string d = random_bytes(len, rng());
    auto w = client_->pwrite(**f, d.data(), d.size(), at);
    ASSERT_TRUE(w.ok()) << "pwrite " << len << " at " << at << ": " << w.status().ToString();
    if (at + len > model.size()) model.resize(at + len, '\0');
    model.replace(at, len, d);
    if (i % 10 == 0) {
      ASSERT_TRUE(client_->fsync(**f, false).ok());
      const uint64_t ra = rng() % span, rl = 1 + rng() % 300000;
      const std::string want = ra >= model.size() ? "" : model.substr(ra, rl);
      ASSERT_EQ(read_back(path, ra, rl), want) << "after write " << i << ", read at " << ra;
    }
  }
  ASSERT_TRUE(client_->fsync(**f, false).ok());
  ASSERT_TRUE(client_->close(*f).ok());
  EXPECT_EQ(read_back(path, 0, span + 4096), model);
}

// fallocate is not offered on EC files: EOPNOTSUPP, so posix_fallocate
// writes zeros instead.
TEST_F(EcIo, FallocateIsNotSupported) {
  ec_dir("ec", 2, 1);
  auto f = client_->open("/ec/f", O_RDWR | O_CREAT | O_EXCL, 0644);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  Status st = client_->fallocate(**f, 0, 0, 1 << 20);
  EXPECT_EQ(st.code(), Code::kNotSupported) << st.ToString();
  ASSERT_TRUE(client_->close(*f).ok());
}

}  // namespace
}  // namespace surge::test
