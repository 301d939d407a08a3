// A data server killed under writers (client/lib/data_path.h, the retry
// policy of docs/redundancy.md "What the client does"), with real daemons:
// 1 MDS and 3 data servers on 127.0.0.1, killed with SIGKILL.
//
// One copy (format 1 layouts): the IO fails with EIO naming the object,
// the target and its address, and the client's report has the MDS take
// the target out at once, so new files are placed on the others.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/client/local_cluster.h"

namespace surge::test {
namespace {

std::unique_ptr<LocalCluster> start(const ClusterConfig& cfg) {
  auto c = LocalCluster::Start(cfg);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

// Writes data to path and syncs it; the first error.
Status write_synced(Client& cl, const std::string& path, const std::string& data) {
  auto f = cl.open(path, O_RDWR | O_CREAT, 0644);
  if (!f.ok()) return f.status();
  auto w = cl.pwrite(**f, data.data(), data.size(), 0);
  Status st = w.ok() ? cl.fsync(**f, false) : w.status();
  Status closed = cl.close(*f);
  return st.ok() ? closed : st;
}

std::string state_of_target(Client& cl, size_t i) {
  auto cs = cl.cluster_status();
  if (!cs.ok()) return cs.status().ToString();
  if (i >= cs->targets.size()) return "no target " + std::to_string(i);
  return cs->targets[i].state;
}

TEST(SingleCopy, AKilledTargetGivesEioNamingTheObjectTargetAndAddress) {
  auto c = start(one_copy(small_stripes()));  // 64 KiB x 3: every file touches every target
  ASSERT_NE(c, nullptr);
  auto cl = c->connect(2000);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  const std::string data = random_bytes(6 * kSmallStripe, 1);
  ASSERT_TRUE(write_synced(**cl, "/f", data).ok());
  auto a = (*cl)->stat("/f");
  ASSERT_TRUE(a.ok());

  ASSERT_TRUE(c->kill_ods(1).ok());
  Status st = write_synced(**cl, "/f", data);
  ASSERT_FALSE(st.ok()) << "a write to a file with one copy on a dead server succeeded";
  EXPECT_EQ(st.to_errno(), EIO) << st.ToString();
  EXPECT_NE(st.message().find("object " + std::to_string(a->ino)), std::string::npos)
      << st.ToString();
  EXPECT_NE(st.message().find("data server target "), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find(" at tcp://127.0.0.1:"), std::string::npos) << st.ToString();
}

TEST(SingleCopy, TheClientsReportTakesAKilledTargetOutSoNewFilesAvoidIt) {
  ClusterConfig cfg = one_copy(small_stripes());
  auto c = start(cfg);
  ASSERT_NE(c, nullptr);
  auto cl = c->connect(2000);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  ASSERT_TRUE(write_synced(**cl, "/f", random_bytes(3 * kSmallStripe, 2)).ok());
  ASSERT_TRUE(c->kill_ods(1).ok());
  ASSERT_FALSE(write_synced(**cl, "/f", random_bytes(3 * kSmallStripe, 3)).ok());
  // The failed write reported the target (the MDS probed it and found it
  // dead); the heartbeat timeout (3 s) has not marked it yet.
  EXPECT_EQ(state_of_target(**cl, 1), "down");
  // New files are placed on the two live targets only.
  for (int i = 0; i < 6; ++i) {
    const std::string path = "/new" + std::to_string(i);
    Status st = write_synced(**cl, path, random_bytes(5 * kSmallStripe, 10 + i));
    EXPECT_TRUE(st.ok()) << path << ": " << st.ToString();
  }
}

}  // namespace
}  // namespace surge::test
