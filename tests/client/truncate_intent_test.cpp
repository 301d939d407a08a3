// Truncates as intents, on real daemons (1 MDS, 3 data servers, files in
// 64 KiB stripes over 3 slots; each case runs for files of replicas 2 on
// chains and for one-copy legacy objects, format 1): the MDS
// answers a truncate with a new truncate generation and no data-server
// call; clients carry the generation, so a write after the truncate cuts
// its chunk first and a read sees the truncated bytes as gone, long before
// the MDS's background pass has sent the truncate; and the pass, when it
// comes late, cuts nothing written after the truncate; a writer in
// another client that opened the file before the truncate (and so does not
// know its generation) keeps what it writes after it
// (docs/redundancy.md, "Truncate generations").
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/client/chain_state.h"
#include "tests/client/local_cluster.h"

namespace surge::test {
namespace {

constexpr size_t kFileBytes = 1 << 20;
constexpr uint64_t kCut = 100000;
constexpr uint64_t kLateWrite = 600000;

std::string whole(Client& cl, const std::string& path) {
  auto f = cl.open(path, O_RDONLY);
  if (!f.ok()) return "open failed: " + f.status().ToString();
  std::string got(4 << 20, 'Z');
  auto n = cl.pread(**f, got.data(), got.size(), 0);
  (void)cl.close(*f);
  if (!n.ok()) return "read failed: " + n.status().ToString();
  got.resize(*n);
  return got;
}

// The layouts the cases run for: chained chunks keep the generation in the
// chunk index, legacy objects in a record beside the object.
enum class Layout { kChains, kLegacyObjects };

class TruncateIntent : public ::testing::TestWithParam<Layout> {
 protected:
  void SetUp() override {
    ClusterConfig cfg = small_stripes();
    if (GetParam() == Layout::kLegacyObjects) cfg = one_copy(cfg);
    // The MDS's background pass does not run until the test says so.
    cfg.background_interval_ms = 3600 * 1000;
    auto c = LocalCluster::Start(cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    // For its first orphans.startup_grace_ms (1 s here) a new MDS on
    // RocksDB treats every file as held open elsewhere, its clients' opens
    // unknown, and truncates before replying: the cases below are about
    // the truncate it leaves to its pass.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    auto cl = cluster_->connect();
    ASSERT_TRUE(cl.ok()) << cl.status().ToString();
    writer_ = std::move(*cl);
    data_ = random_bytes(kFileBytes, 7);
    auto f = writer_->open("/f", O_RDWR | O_CREAT | O_EXCL, 0644);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_TRUE(writer_->pwrite(**f, data_.data(), data_.size(), 0).ok());
    ASSERT_TRUE(writer_->close(*f).ok());
  }

  // The MDS again, with its background pass every 200 ms; waits until the
  // pass has applied n intents.
  void run_the_pass(int n) {
    ASSERT_TRUE(cluster_->kill_mds().ok());
    cluster_->config().background_interval_ms = 200;
    ASSERT_TRUE(cluster_->start_mds().ok());
    const std::string want = "truncate intents: " + std::to_string(n) + " applied";
    for (int i = 0; i < 300; ++i) {
      if (cluster_->log_tail("mds", 400).find(want) != std::string::npos) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL() << "the MDS never logged \"" << want << "\":\n" << cluster_->log_tail("mds", 40);
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<Client> writer_;
  std::string data_;
};

TEST_P(TruncateIntent, ATruncateIsAnsweredWithNoDataServerRunning) {
  for (int i = 0; i < 3; ++i) ASSERT_EQ(::kill(cluster_->ods_pid(i), SIGSTOP), 0);
  Status st = writer_->truncate("/f", kCut);
  for (int i = 0; i < 3; ++i) ::kill(cluster_->ods_pid(i), SIGCONT);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto a = writer_->stat("/f");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->size, kCut);
}

TEST_P(TruncateIntent, AWriteAfterATruncateSurvivesThePassComingLate) {
  ASSERT_TRUE(writer_->truncate("/f", kCut).ok());
  const std::string late = random_bytes(10000, 8);
  {
    auto f = writer_->open("/f", O_RDWR);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_TRUE(writer_->pwrite(**f, late.data(), late.size(), kLateWrite).ok());
    ASSERT_TRUE(writer_->close(*f).ok());
  }
  std::string want = data_.substr(0, kCut);
  want.resize(kLateWrite, '\0');
  want += late;

  // Another client, opening after the truncate: the chunks the write did
  // not touch still hold the old bytes, and read as cut.
  auto reader = cluster_->connect();
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_TRUE(whole(**reader, "/f") == want) << "read before the pass differs";

  run_the_pass(1);
  EXPECT_TRUE(whole(**reader, "/f") == want) << "the late pass changed the file";
  auto fresh = cluster_->connect();
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_TRUE(whole(**fresh, "/f") == want) << "read after the pass differs";
}

TEST_P(TruncateIntent, AWriterThatOpenedBeforeTheTruncateKeepsItsLaterWrite) {
  auto other = cluster_->connect();
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  auto f = (*other)->open("/f", O_RDWR);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE(writer_->truncate("/f", kCut).ok());
  const std::string late = random_bytes(10000, 9);
  ASSERT_TRUE((*other)->pwrite(**f, late.data(), late.size(), kLateWrite).ok());
  ASSERT_TRUE((*other)->close(*f).ok());
  std::string want = data_.substr(0, kCut);
  want.resize(kLateWrite, '\0');
  want += late;
  EXPECT_TRUE(whole(*writer_, "/f") == want) << "before the pass";

  // Another file's truncate marks when the pass has run: /f's was applied
  // before the reply, so the pass has that one alone.
  {
    auto g = writer_->open("/g", O_RDWR | O_CREAT | O_EXCL, 0644);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    ASSERT_TRUE(writer_->pwrite(**g, data_.data(), 5000, 0).ok());
    ASSERT_TRUE(writer_->close(*g).ok());
  }
  ASSERT_TRUE(writer_->truncate("/g", 10).ok());
  run_the_pass(1);
  EXPECT_TRUE(whole(*writer_, "/f") == want) << "the pass cut the other writer's bytes";
}

TEST_P(TruncateIntent, AGrowingTruncateReadsAsZerosPastTheOldEnd) {
  // Down, then up before any pass: the bytes between come back as zeros.
  ASSERT_TRUE(writer_->truncate("/f", kCut).ok());
  ASSERT_TRUE(writer_->truncate("/f", kFileBytes).ok());
  std::string want = data_.substr(0, kCut);
  want.resize(kFileBytes, '\0');
  EXPECT_TRUE(whole(*writer_, "/f") == want) << "the old bytes came back";
  run_the_pass(1);
  EXPECT_TRUE(whole(*writer_, "/f") == want) << "after the pass";
}

// setstripe of a file emptied by a truncate: the old layout's chunks are
// removed by the pass, late, while the new layout's chunks can have the
// same names in the same places (the same chain or target): what a writer
// put there under the new layout survives the removal.
TEST_P(TruncateIntent, ASetstripeOfAnEmptiedFileKeepsWhatTheNewLayoutHolds) {
  ASSERT_TRUE(writer_->truncate("/f", 0).ok());
  std::string out;
  const std::string scheme = GetParam() == Layout::kChains ? "--replicas 2 " : "";
  ASSERT_EQ(run_surgectl(*cluster_, "setstripe " + scheme + "--count 2 --size 65536 /f", &out), 0)
      << out;
  const std::string fresh = random_bytes(300000, 10);
  {
    auto f = writer_->open("/f", O_RDWR);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    auto w = writer_->pwrite(**f, fresh.data(), fresh.size(), 0);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    Status c = writer_->close(*f);
    ASSERT_TRUE(c.ok()) << c.ToString();
  }
  auto reader = cluster_->connect();
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_TRUE(whole(**reader, "/f") == fresh) << "before the pass";
  run_the_pass(1);
  auto later = cluster_->connect();
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  EXPECT_TRUE(whole(**later, "/f") == fresh) << "the old layout's removal took new bytes";
}

INSTANTIATE_TEST_SUITE_P(Layouts, TruncateIntent,
                         ::testing::Values(Layout::kChains, Layout::kLegacyObjects),
                         [](const auto& info) {
                           return info.param == Layout::kChains ? std::string("Chains")
                                                                : std::string("LegacyObjects");
                         });

}  // namespace
}  // namespace surge::test
