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
#include <string>
#include <thread>

#include "tests/client/chain_state.h"
#include "tests/client/local_cluster.h"
#include "tests/common/time_scale.h"

namespace surge::test {
namespace {

using namespace std::chrono_literals;

constexpr size_t kBlock = 1 << 20;

TEST(ChainStall, StalledHeadLeavesTimeForARetryOnTheNewChain) {
  const int io_timeout_ms = static_cast<int>(sanitizer_scaled(8000ms).count());
  ClusterConfig cfg;
  cfg.target_timeout_ms = 10 * io_timeout_ms;
  auto c = LocalCluster::Start(cfg);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto& cluster = *c;
  ASSERT_EQ(make_replicated_dir(*cluster, "/r", 2, 1, io_timeout_ms), "");

  // No write behind: each pwrite is one IO, its io timeout counted from
  // the call.
  ClientOptions o = cluster->client_options(io_timeout_ms);
  o.write_behind_bytes = 0;
  auto cl = Client::Connect(o);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  auto f = (*cl)->open("/r/f", O_RDWR | O_CREAT | O_EXCL, 0644);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const std::string before = random_bytes(kBlock, 1);
  ASSERT_TRUE((*cl)->pwrite(**f, before.data(), before.size(), 0).ok());
  ASSERT_TRUE((*cl)->fsync(**f, false).ok());

  std::string why;
  auto members = chain_of(*cluster, "/r/f", &why);
  ASSERT_EQ(members.size(), 2u) << why;
  const uint32_t head = members[0].first;
  const int head_ods = ods_of(*cluster, 3, head);
  ASSERT_GE(head_ods, 0) << "no data server is target " << head;

  // Writes go to the head: it is stopped with the MDS still counting it up.
  ASSERT_EQ(::kill(cluster->ods_pid(head_ods), SIGSTOP), 0);
  const std::string after = random_bytes(kBlock, 2);
  auto w = (*cl)->pwrite(**f, after.data(), after.size(), 0);
  const Status synced = (*cl)->fsync(**f, false);
  members = chain_of(*cluster, "/r/f", &why);
  ASSERT_EQ(::kill(cluster->ods_pid(head_ods), SIGCONT), 0);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE(synced.ok()) << synced.ToString();
  // The retry went to the chain the client's report made (the stopped
  // head offline; the heartbeat timeout is far away).
  ASSERT_EQ(members.size(), 2u) << why;
  EXPECT_EQ(members[0].first, head) << why;
  EXPECT_EQ(members[0].second, "offline") << why;

  std::string got(kBlock, '\0');
  auto r = (*cl)->pread(**f, got.data(), got.size(), 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, kBlock);
  EXPECT_TRUE(got == after) << "the write acknowledged during the stall did not read back";
  EXPECT_TRUE((*cl)->close(*f).ok());
}

TEST(ChainStall, StalledSuccessorIsTakenOutWithinTheClientsAttempt) {
  const int io_timeout_ms = static_cast<int>(sanitizer_scaled(8000ms).count());
  ClusterConfig cfg;
  cfg.target_timeout_ms = 10 * io_timeout_ms;
  auto c = LocalCluster::Start(cfg);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto& cluster = *c;
  ASSERT_EQ(make_replicated_dir(*cluster, "/r", 2, 1, io_timeout_ms), "");

  ClientOptions o = cluster->client_options(io_timeout_ms);
  o.write_behind_bytes = 0;
  auto cl = Client::Connect(o);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  auto f = (*cl)->open("/r/f", O_RDWR | O_CREAT | O_EXCL, 0644);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const std::string before = random_bytes(kBlock, 1);
  ASSERT_TRUE((*cl)->pwrite(**f, before.data(), before.size(), 0).ok());
  ASSERT_TRUE((*cl)->fsync(**f, false).ok());

  std::string why;
  auto members = chain_of(*cluster, "/r/f", &why);
  ASSERT_EQ(members.size(), 2u) << why;
  const uint32_t head = members[0].first, tail = members[1].first;
  const int tail_ods = ods_of(*cluster, 3, tail);
  ASSERT_GE(tail_ods, 0) << "no data server is target " << tail;

  // The head takes the write and forwards it to the stopped tail, which
  // the MDS still counts up.
  ASSERT_EQ(::kill(cluster->ods_pid(tail_ods), SIGSTOP), 0);
  const std::string after = random_bytes(kBlock, 2);
  auto w = (*cl)->pwrite(**f, after.data(), after.size(), 0);
  const Status synced = (*cl)->fsync(**f, false);
  members = chain_of(*cluster, "/r/f", &why);
  ASSERT_EQ(::kill(cluster->ods_pid(tail_ods), SIGCONT), 0);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE(synced.ok()) << synced.ToString();
  // The tail went offline on the head's report; the head still serves.
  ASSERT_EQ(members.size(), 2u) << why;
  EXPECT_EQ(members[0].first, head) << why;
  EXPECT_EQ(members[0].second, "serving") << why;
  EXPECT_EQ(members[1].first, tail) << why;
  EXPECT_EQ(members[1].second, "offline") << why;

  std::string got(kBlock, '\0');
  auto r = (*cl)->pread(**f, got.data(), got.size(), 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, kBlock);
  EXPECT_TRUE(got == after) << "the write acknowledged during the stall did not read back";
  EXPECT_TRUE((*cl)->close(*f).ok());
}

}  // namespace
}  // namespace surge::test
