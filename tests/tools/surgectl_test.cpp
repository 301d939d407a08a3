// surgectl against a real cluster (1 MDS + 3 data servers on 127.0.0.1):
// drain / undrain steer new layouts and survive an MDS restart; scrub
// passes a clean cluster and names a corrupted object; unknown target ids
// are clear errors; an MDS list whose first MDS is down.
#include <fstream>

#include "tests/common/loopback.h"  // free_port: nothing listens there
#include "tests/tools/surgectl_fixture.h"

namespace surge::test {
namespace {

using SurgectlDrain = SurgectlTest;
using SurgectlScrub = SurgectlTest;
using SurgectlMdsList = SurgectlTest;

bool has(const std::string& out, const std::string& what) {
  return out.find(what) != std::string::npos;
}

TEST_F(SurgectlDrain, NewFilesAvoidADrainedTargetAcrossAnMdsRestartUntilUndrained) {
  std::string out;
  ASSERT_EQ(surgectl("drain 2", &out), 0) << out;
  EXPECT_TRUE(has(out, "existing stripes stay until rewritten")) << out;
  for (int i = 0; i < 4; ++i) {
    auto [ino, targets] = write_new_file("/before" + std::to_string(i), 0);
    EXPECT_EQ(targets, (std::set<uint32_t>{1, 3})) << "file " << i;
  }
  ASSERT_EQ(surgectl("--json targets", &out), 0) << out;
  EXPECT_TRUE(has(out, "\"id\":2,")) << out;
  EXPECT_TRUE(has(out, "\"state\":\"draining\",\"draining\":true")) << out;
  EXPECT_TRUE(has(out, "\"targets_draining\":1")) << out;

  ASSERT_TRUE(cluster_->kill_mds().ok());
  ASSERT_TRUE(cluster_->start_mds().ok());
  ASSERT_TRUE(cluster_->wait_targets_up(2, 15000).ok());
  ASSERT_EQ(surgectl("status", &out), 0) << out;
  EXPECT_TRUE(has(out, "1 draining")) << out;
  for (int i = 0; i < 4; ++i) {
    auto [ino, targets] = write_new_file("/after-restart" + std::to_string(i), 0);
    EXPECT_EQ(targets.count(2), 0u) << "file " << i;
  }

  ASSERT_EQ(surgectl("undrain 2", &out), 0) << out;
  // The default stripe count (4) is clamped to the 3 targets up: all of them.
  auto [ino, targets] = write_new_file("/undrained", 0);
  EXPECT_EQ(targets, (std::set<uint32_t>{1, 2, 3}));
  ASSERT_EQ(surgectl("--json targets", &out), 0) << out;
  EXPECT_FALSE(has(out, "\"draining\":true")) << out;
}

TEST_F(SurgectlDrain, DrainOffIsUndrain) {
  std::string out;
  ASSERT_EQ(surgectl("drain 1", &out), 0) << out;
  ASSERT_EQ(surgectl("--json drain --off 1", &out), 0) << out;
  EXPECT_TRUE(has(out, "\"id\":1,")) << out;
  EXPECT_TRUE(has(out, "\"draining\":false")) << out;
}

TEST_F(SurgectlDrain, UnknownTargetIsAClearError) {
  std::string out;
  EXPECT_EQ(surgectl("drain 99", &out), 1) << out;
  EXPECT_TRUE(has(out, "target 99 is not in the cluster map")) << out;
  EXPECT_TRUE(has(out, "known targets: 1, 2, 3")) << out;
}

TEST_F(SurgectlScrub, CleanClusterExitsZero) {
  for (int i = 0; i < 3; ++i) write_new_file("/f" + std::to_string(i), 3u << 20);
  std::string out;
  ASSERT_EQ(surgectl("scrub", &out), 0) << out;
  EXPECT_TRUE(has(out, "0 corrupt blocks, 0 not scrubbed")) << out;
  ASSERT_EQ(surgectl("--json scrub", &out), 0) << out;
  EXPECT_TRUE(has(out, "\"objects_checked\":9,")) << out;  // 3 files x 3 targets
  EXPECT_TRUE(has(out, "\"corrupt_blocks\":0,\"unscrubbed_targets\":0")) << out;
}

TEST_F(SurgectlScrub, FlippedByteOnDiskIsFoundAndNamed) {
  auto [ino, targets] = write_new_file("/victim", 100000);  // < 1 stripe: one object
  write_new_file("/bystander", 100000);
  auto files = object_files(ino);
  ASSERT_EQ(files.size(), 1u);
  {
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << files[0];
    f.seekg(5000);  // block 1 (4 KiB blocks)
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    f.seekp(5000);
    f.write(&c, 1);
    ASSERT_TRUE(f.good());
  }
  std::string out;
  EXPECT_EQ(surgectl("scrub", &out), 3) << out;
  EXPECT_TRUE(has(out, "corrupt: object " + std::to_string(ino) + " (inode " + std::to_string(ino) +
                           ") block at offset 4096"))
      << out;
  EXPECT_TRUE(has(out, "1 corrupt blocks")) << out;
  EXPECT_EQ(surgectl("--json scrub", &out), 3) << out;
  EXPECT_TRUE(has(out, "{\"object_id\":" + std::to_string(ino) + ",\"offset\":4096}")) << out;
}

TEST_F(SurgectlScrub, OneTargetOnly) {
  write_new_file("/f", 3u << 20);
  std::string out;
  ASSERT_EQ(surgectl("--json scrub --target 2", &out), 0) << out;
  EXPECT_TRUE(has(out, "{\"targets\":[{\"id\":2,")) << out;
  EXPECT_TRUE(has(out, "\"objects_checked\":1,")) << out;
}

TEST_F(SurgectlScrub, UnknownTargetIsAClearError) {
  std::string out;
  EXPECT_EQ(surgectl("scrub --target 99", &out), 1) << out;
  EXPECT_TRUE(has(out, "target 99 is not in the cluster map")) << out;
}

TEST_F(SurgectlMdsList, TheFirstMdsThatAnswersServes) {
  const std::string down = "tcp://127.0.0.1:" + std::to_string(free_port());
  const std::string list = down + "," + cluster_->mds_address();
  std::string out;
  ASSERT_EQ(surgectl_at(list, "status", &out), 0) << out;
  EXPECT_TRUE(has(out, "mds " + cluster_->mds_address())) << out;
  EXPECT_EQ(surgectl_at(list, "df", &out), 0) << out;
  EXPECT_EQ(surgectl_at(list, "getstripe /", &out), 0) << out;
}

TEST_F(SurgectlMdsList, NoMdsAnsweringIsAnErrorNamingEach) {
  const std::string a = "tcp://127.0.0.1:" + std::to_string(free_port());
  const std::string b = "tcp://127.0.0.1:" + std::to_string(free_port());
  std::string out;
  EXPECT_EQ(surgectl_at(a + "," + b, "status", &out), 1) << out;
  EXPECT_TRUE(has(out, a)) << out;
  EXPECT_TRUE(has(out, b)) << out;
}

}  // namespace
}  // namespace surge::test
