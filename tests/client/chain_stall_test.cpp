// A chain member that stalls (SIGSTOP: its sockets stay open, nothing
// answers) while the MDS still counts it up must not use up an IO's whole
// io timeout on one request (issue 18, "no application-visible error when
// one server dies"). Each attempt gets half the io timeout; when it runs
// out the client reports the member, the MDS's probe finds it silent and
// takes it out of the chain, and the retry on the new chain succeeds
// within the io timeout. The MDS's heartbeat timeout here is far above the
// io timeout, so only the client's report can move the chain in time: with
// one bound for the attempt and the IO, the write fails with EIO.
//
// A stalled successor is the head's to report: the head's forward to it
// must give up before the client's attempt at the head does, or the client
// blames the head (which only waits) and its retry meets the same stall.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/client/chain_state.h"
#include "tests/client/local_cluster.h"
#include "tests/common/time_scale.h"

namespace surge::test {
namespace {

using namespace std::chrono_literals;

constexpr size_t kBlock = 1 << 20;

// A 2-replica file /r/f with its first 1 MiB written and synced, a client
// without write-behind (each pwrite is one IO, its io timeout counted from
// the call), and the MDS's heartbeat timeout far above the io timeout.
class ChainStall : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterConfig cfg;
    cfg.target_timeout_ms = 10 * io_timeout_ms_;
    auto c = LocalCluster::Start(cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    ASSERT_EQ(make_replicated_dir(*cluster_, "/r", 2, 1, io_timeout_ms_), "");
    ClientOptions o = cluster_->client_options(io_timeout_ms_);
    o.write_behind_bytes = 0;
    auto cl = Client::Connect(o);
    ASSERT_TRUE(cl.ok()) << cl.status().ToString();
    client_ = std::move(*cl);
    auto f = client_->open("/r/f", O_RDWR | O_CREAT | O_EXCL, 0644);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    file_ = *f;
    const std::string before = random_bytes(kBlock, 1);
    ASSERT_TRUE(client_->pwrite(*file_, before.data(), before.size(), 0).ok());
    ASSERT_TRUE(client_->fsync(*file_, false).ok());
    members_ = chain_of(*cluster_, "/r/f", &why_);
    ASSERT_EQ(members_.size(), 2u) << why_;
  }

  // SIGSTOPs chain member `target` (the MDS still counts it up), writes a
  // new first 1 MiB and fsyncs, records the chain as it then stands, and
  // SIGCONTs it. Both calls must succeed.
  void write_while_stopped(uint32_t target) {
    const int ods = ods_of(*cluster_, 3, target);
    ASSERT_GE(ods, 0) << "no data server is target " << target;
    ASSERT_EQ(::kill(cluster_->ods_pid(ods), SIGSTOP), 0);
    after_ = random_bytes(kBlock, 2);
    auto w = client_->pwrite(*file_, after_.data(), after_.size(), 0);
    const Status synced = client_->fsync(*file_, false);
    members_ = chain_of(*cluster_, "/r/f", &why_);
    ASSERT_EQ(::kill(cluster_->ods_pid(ods), SIGCONT), 0);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE(synced.ok()) << synced.ToString();
    ASSERT_EQ(members_.size(), 2u) << why_;
  }

  // The write acknowledged during the stall reads back.
  void expect_new_bytes() {
    std::string got(kBlock, '\0');
    auto r = client_->pread(*file_, got.data(), got.size(), 0);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, kBlock);
    EXPECT_TRUE(got == after_) << "the write acknowledged during the stall did not read back";
    EXPECT_TRUE(client_->close(file_).ok());
  }

  const int io_timeout_ms_ = static_cast<int>(sanitizer_scaled(8000ms).count());
  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<Client> client_;
  FileRef file_;
  std::vector<std::pair<uint32_t, std::string>> members_;  // head first
  std::string why_;
  std::string after_;
};

TEST_F(ChainStall, StalledHeadLeavesTimeForARetryOnTheNewChain) {
  const uint32_t head = members_[0].first;
  // Writes go to the head.
  write_while_stopped(head);
  if (HasFatalFailure()) return;
  // The retry went to the chain the client's report made (the stopped
  // head offline; the heartbeat timeout is far away).
  EXPECT_EQ(members_[0].first, head) << why_;
  EXPECT_EQ(members_[0].second, "offline") << why_;
  expect_new_bytes();
}

TEST_F(ChainStall, StalledSuccessorIsTakenOutWithinTheClientsAttempt) {
  const uint32_t head = members_[0].first, tail = members_[1].first;
  // The head takes the write and forwards it to the stopped tail.
  write_while_stopped(tail);
  if (HasFatalFailure()) return;
  // The tail went offline on the head's report; the head still serves.
  EXPECT_EQ(members_[0].first, head) << why_;
  EXPECT_EQ(members_[0].second, "serving") << why_;
  EXPECT_EQ(members_[1].first, tail) << why_;
  EXPECT_EQ(members_[1].second, "offline") << why_;
  expect_new_bytes();
}

}  // namespace
}  // namespace surge::test
