// surgectl and chains against a real cluster (1 MDS + 3 data servers on
// 127.0.0.1): setstripe --replicas is inherited by new files, getstripe
// shows each slot's chain and its members, chains and status count chains
// by health, and a killed data server leaves its chains degraded.
#include <fcntl.h>

#include "tests/tools/surgectl_fixture.h"

namespace surge::test {
namespace {

using SurgectlChains = SurgectlTest;

bool has(const std::string& out, const std::string& what) {
  return out.find(what) != std::string::npos;
}

// An empty file: the layout is chosen at create, no data is written.
void create_empty(LocalCluster& cluster, const std::string& path) {
  auto cl = cluster.connect();
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  auto f = (*cl)->open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
  ASSERT_TRUE(f.ok()) << "create " << path << ": " << f.status().ToString();
  ASSERT_TRUE((*cl)->close(*f).ok());
}

void make_dir(LocalCluster& cluster, const std::string& path) {
  auto cl = cluster.connect();
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  ASSERT_TRUE((*cl)->mkdir(path, 0755).ok());
}

TEST_F(SurgectlChains, ReplicasAreInheritedAndGetstripeShowsTheChains) {
  make_dir(*cluster_, "/r");
  std::string out;
  ASSERT_EQ(surgectl("setstripe --replicas 2 --count 2 /r", &out), 0) << out;
  ASSERT_EQ(surgectl("getstripe /r", &out), 0) << out;
  EXPECT_TRUE(has(out, "replicas 2")) << out;
  create_empty(*cluster_, "/r/f");
  ASSERT_EQ(surgectl("getstripe /r/f", &out), 0) << out;
  EXPECT_TRUE(has(out, "stripe_count 2 replicas 2 chains [")) << out;
  EXPECT_TRUE(has(out, "slot 0: chain ")) << out;
  EXPECT_TRUE(has(out, "slot 1: chain ")) << out;
  EXPECT_TRUE(has(out, "healthy: ")) << out;
  EXPECT_TRUE(has(out, " serving, ")) << out;
  ASSERT_EQ(surgectl("--json getstripe /r/f", &out), 0) << out;
  EXPECT_TRUE(has(out, "\"format\":2,")) << out;
  EXPECT_TRUE(has(out, "\"scheme\":\"replicas 2\"")) << out;
  EXPECT_TRUE(has(out, "\"state\":\"serving\"")) << out;
}

TEST_F(SurgectlChains, MoreReplicasThanDataServersIsAnError) {
  make_dir(*cluster_, "/r4");
  std::string out;
  EXPECT_EQ(surgectl("setstripe --replicas 4 /r4", &out), 1) << out;
  EXPECT_TRUE(has(out, "replicas 4 must be 1..3")) << out;
}

TEST_F(SurgectlChains, ChainsAndStatusCountChainsByHealth) {
  make_dir(*cluster_, "/r");
  std::string out;
  ASSERT_EQ(surgectl("setstripe --replicas 3 /r", &out), 0) << out;
  create_empty(*cluster_, "/r/f");
  ASSERT_EQ(surgectl("chains", &out), 0) << out;
  EXPECT_TRUE(has(out, "3 chains: 3 healthy, 0 degraded")) << out;
  ASSERT_EQ(surgectl("--json chains", &out), 0) << out;
  EXPECT_TRUE(has(out, "\"health\":{\"total\":3,\"healthy\":3,")) << out;
  ASSERT_EQ(surgectl("status", &out), 0) << out;
  EXPECT_TRUE(has(out, "3 chains: 3 healthy")) << out;
}

TEST_F(SurgectlChains, AKilledDataServerLeavesItsChainsDegraded) {
  make_dir(*cluster_, "/r");
  std::string out;
  ASSERT_EQ(surgectl("setstripe --replicas 2 /r", &out), 0) << out;
  create_empty(*cluster_, "/r/f");
  ASSERT_TRUE(cluster_->kill_ods(1).ok());
  // The MDS marks it down after its timeout (tests/client/local_cluster)
  // and takes it out of its chains.
  for (int i = 0; i < 200 && !has(out, "\"health\":\"degraded\""); ++i) {
    surgectl("--json chains", &out);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(has(out, "\"health\":\"degraded\"")) << out;
  EXPECT_TRUE(has(out, "\"state\":\"offline\"")) << out;
  ASSERT_EQ(surgectl("status", &out), 0) << out;
  EXPECT_TRUE(has(out, "degraded")) << out;
  // Each chain that is not healthy gets a line of its own, members and all.
  EXPECT_TRUE(has(out, " degraded: ")) << out;
  EXPECT_TRUE(has(out, " offline")) << out;
  ASSERT_EQ(surgectl("--json status", &out), 0) << out;
  EXPECT_TRUE(has(out, "\"chains_not_healthy\":[{\"id\":")) << out;
  EXPECT_TRUE(has(out, "\"sync\":{\"members\":0,")) << out;
}

}  // namespace
}  // namespace surge::test
