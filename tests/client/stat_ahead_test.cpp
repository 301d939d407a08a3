// Stat-ahead (client/lib/stat_ahead.h) between two native clients of one
// real cluster: a run of lookups of another client's files costs a few
// readdir pages instead of a lookup each (counted from the MDS's /metrics),
// the reader's own changes show at once, and another client's removal
// shows once the entry is older than the caller's max_age.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/client/local_cluster.h"
#include "tests/client/metrics_page.h"

namespace surge::test {
namespace {

using namespace std::chrono_literals;
constexpr int kFiles = 300;
constexpr std::chrono::nanoseconds kMaxAge = 1s;

class StatAheadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterConfig cfg;
    cfg.metrics = true;
    auto c = LocalCluster::Start(cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    auto w = cluster_->connect();
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    writer_ = std::move(*w);
    auto r = cluster_->connect();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    reader_ = std::move(*r);
    auto d = writer_->mkdir(Client::kRootIno, "d", 0755, root_);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    dir_ = d->ino;
    for (int i = 0; i < kFiles; ++i) {
      auto f = writer_->create(dir_, name(i), 0644, O_CREAT | O_EXCL | O_WRONLY, root_, nullptr);
      ASSERT_TRUE(f.ok()) << name(i) << ": " << f.status().ToString();
      inos_.push_back((*f)->ino());
      ASSERT_TRUE(writer_->close(*f).ok());
    }
  }
  static std::string name(int i) { return "f" + std::to_string(i); }
  long requests(const char* method) {
    const long n = mds_requests(*cluster_, method);
    EXPECT_GE(n, 0) << "the MDS serves no /metrics page";
    return n;
  }
  Result<Attr> lookup(int i, std::chrono::nanoseconds* age = nullptr) {
    std::chrono::nanoseconds a{};
    auto r = reader_->lookup_ahead(dir_, name(i), root_, kMaxAge, &a);
    if (age != nullptr) *age = a;
    return r;
  }
  // Looks up the first n files, so a fetch has served the rest.
  void run_of_lookups(int n) {
    for (int i = 0; i < n; ++i) {
      auto a = lookup(i);
      ASSERT_TRUE(a.ok()) << name(i) << ": " << a.status().ToString();
      ASSERT_EQ(a->ino, inos_[static_cast<size_t>(i)]);
    }
  }
  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<Client> writer_, reader_;
  Caller root_;
  Ino dir_ = 0;
  std::vector<Ino> inos_;
};

TEST_F(StatAheadTest, ARunOfLookupsCostsAFewPagesNotALookupEach) {
  const long lookups = requests("lookup");
  const long readdirs = requests("readdir");
  run_of_lookups(kFiles);
  EXPECT_LE(requests("lookup") - lookups, 2 * 8) << "about StatAhead::kRun, not " << kFiles;
  EXPECT_GE(requests("readdir") - readdirs, 1);
}

TEST_F(StatAheadTest, AnEntryFromAFetchSaysHowOldItIs) {
  run_of_lookups(20);
  std::chrono::nanoseconds age{};
  auto a = lookup(200, &age);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->ino, inos_[200]);
  EXPECT_GT(age.count(), 0) << "answered from the fetch";
  EXPECT_LT(age, kMaxAge);
}

TEST_F(StatAheadTest, OurOwnUnlinkIsSeenAtOnce) {
  run_of_lookups(20);
  ASSERT_TRUE(reader_->unlink(dir_, name(100), root_).ok());
  auto a = lookup(100);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), Code::kNotFound) << a.status().ToString();
}

TEST_F(StatAheadTest, OurOwnChmodIsSeenAtOnce) {
  run_of_lookups(20);
  SetAttr sa;
  sa.mask = kSetMode;
  sa.mode = 0600;
  ASSERT_TRUE(reader_->setattr(inos_[101], sa, root_).ok());
  auto a = lookup(101);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->mode & 07777, 0600u);
}

TEST_F(StatAheadTest, OurOwnWriteIsSeenAtOnceAndAfterClose) {
  run_of_lookups(20);
  auto f = reader_->open(inos_[102], O_WRONLY, root_, nullptr);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const std::string data(100, 'x');
  ASSERT_TRUE(reader_->pwrite(**f, data.data(), data.size(), 0).ok());
  auto open_a = lookup(102);
  ASSERT_TRUE(open_a.ok()) << open_a.status().ToString();
  EXPECT_EQ(open_a->size, 100u) << "while open";
  ASSERT_TRUE(reader_->close(*f).ok());
  auto closed_a = lookup(102);
  ASSERT_TRUE(closed_a.ok()) << closed_a.status().ToString();
  EXPECT_EQ(closed_a->size, 100u) << "after close";
}

TEST_F(StatAheadTest, OurOwnRenameIsSeenAtOnce) {
  run_of_lookups(20);
  ASSERT_TRUE(reader_->rename(dir_, name(103), dir_, name(104), 0, root_).ok());
  auto gone = lookup(103);
  EXPECT_FALSE(gone.ok());
  auto replaced = lookup(104);
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  EXPECT_EQ(replaced->ino, inos_[103]);
}

TEST_F(StatAheadTest, AnotherClientsUnlinkIsSeenOnceTheEntryIsTooOld) {
  run_of_lookups(20);
  ASSERT_TRUE(writer_->unlink(dir_, name(105), root_).ok());
  // Within max_age the fetch may still answer (as the kernel's cache
  // would); past it the MDS does.
  std::this_thread::sleep_for(kMaxAge + 100ms);
  auto a = lookup(105);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), Code::kNotFound) << a.status().ToString();
}

TEST_F(StatAheadTest, OffEveryLookupAsksTheMds) {
  ClientOptions o = cluster_->client_options();
  o.stat_ahead = false;
  auto c = Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const long lookups = requests("lookup");
  for (int i = 0; i < 50; ++i) {
    std::chrono::nanoseconds age{1};
    auto a = (*c)->lookup_ahead(dir_, name(i), root_, kMaxAge, &age);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(age.count(), 0);
  }
  EXPECT_EQ(requests("lookup") - lookups, 50);
}

}  // namespace
}  // namespace surge::test
