// surge-mds on the etcd backend while etcd members die (SIGKILL): with one
// of three gone the namespace keeps working; with two gone there is no
// quorum and operations fail with an error naming etcd and the quorum (not
// a hang, not a crash); when one returns, operations succeed again and
// nothing acknowledged is lost. The daemon's store is the process's shared
// 3-member cluster.
#include <thread>

#include "tests/mds/mds_daemon_fixture.h"

namespace surge::mds::testing {
namespace {

constexpr uint64_t kRoot = pb::kRootIno;

class MdsEtcdFaultTest : public MdsDaemonTest {
 protected:
  void SetUp() override {
    on_etcd_ = true;
    MdsDaemonTest::SetUp();
    // A short etcd deadline so an operation without quorum fails well
    // within the client's call timeout.
    std::ofstream(config_, std::ios::app) << "[store]\netcd_deadline_ms = 2000\n";
  }
  void TearDown() override {
    // Leave the shared cluster whole for the next test.
    auto& etcd = test::shared_etcd();
    for (int i = 0; i < 3; i++) {
      if (!etcd.cluster->running(i)) {
        EXPECT_TRUE(etcd.cluster->restart(i).ok());
      }
    }
  }
  // Directories, so no data server is needed. Makes one until it succeeds, at most `tries` attempts (an election after
  // a member returns takes a moment); the last error otherwise.
  Status mkdir_eventually(const std::string& name, int tries = 60) {
    Status last;
    for (int i = 0; i < tries; i++) {
      auto r = mkdir(kRoot, name);
      if (r.ok()) return Status::OK();
      last = r.status();
      if (last.code() == Code::kAlreadyExists) return Status::OK();  // an earlier try landed
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return last;
  }
};

TEST_F(MdsEtcdFaultTest, OneMemberDownIsInvisibleTwoDownFailByNameAndRecover) {
  auto& etcd = test::shared_etcd();
  start();
  ASSERT_TRUE(mkdir(kRoot, "before").ok());

  // One member down, the first the MDS talks to: a quorum remains, every
  // operation succeeds at once (the MDS moves on to a member that answers).
  ASSERT_TRUE(etcd.cluster->kill(0).ok());
  for (int i = 0; i < 20; i++) {
    auto r = mkdir(kRoot, "one-down-" + std::to_string(i));
    ASSERT_TRUE(r.ok()) << "mkdir with one etcd member down: " << r.status().ToString();
  }
  ASSERT_TRUE(lookup(kRoot, "before").ok());

  // Two down: no quorum. Creates and lookups fail with an error naming
  // etcd and the lost quorum.
  ASSERT_TRUE(etcd.cluster->kill(1).ok());
  auto failed = mkdir(kRoot, "no-quorum");
  ASSERT_FALSE(failed.ok()) << "a mkdir succeeded without an etcd quorum";
  const std::string msg = failed.status().message();
  std::printf("mkdir without an etcd quorum: %s\n", failed.status().ToString().c_str());
  EXPECT_NE(msg.find("etcd at 127.0.0.1:"), std::string::npos) << failed.status().ToString();
  EXPECT_NE(msg.find("quorum"), std::string::npos) << failed.status().ToString();
  auto look = lookup(kRoot, "before");
  ASSERT_FALSE(look.ok());
  EXPECT_NE(look.status().message().find("etcd"), std::string::npos) << look.status().ToString();

  // One back: a quorum again; operations succeed and nothing was lost.
  ASSERT_TRUE(etcd.cluster->restart(1).ok());
  Status again = mkdir_eventually("after");
  ASSERT_TRUE(again.ok()) << "no mkdir succeeded after a member returned: " << again.ToString();
  EXPECT_TRUE(lookup(kRoot, "before").ok());
  for (int i = 0; i < 20; i++) EXPECT_TRUE(lookup(kRoot, "one-down-" + std::to_string(i)).ok()) << i;

  mds_.kill(SIGKILL);
  ASSERT_TRUE(etcd.cluster->restart(0).ok());
  ASSERT_TRUE(etcd.cluster->wait_healthy(0).ok());
  std::string out;
  EXPECT_EQ(check(&out), 0) << out;
}

}  // namespace
}  // namespace surge::mds::testing
