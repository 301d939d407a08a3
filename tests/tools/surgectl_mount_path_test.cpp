// surgectl setstripe / getstripe with paths under a real FUSE mount of
// Surge (1 MDS + 3 data servers on 127.0.0.1, one surge-fuse): the mount
// point is stripped (found in /proc/self/mountinfo by its type fuse.surge),
// relative paths work from inside the mount, namespace paths keep working,
// and a path under no Surge mount is an error naming it.
#include <unistd.h>

#include <filesystem>

#include "tests/tools/surgectl_fixture.h"

namespace surge::test {
namespace {

using SurgectlMountPath = SurgectlTest;

bool has(const std::string& out, const std::string& what) {
  return out.find(what) != std::string::npos;
}

TEST_F(SurgectlMountPath, SetstripeAndGetstripeTakeAPathUnderTheMount) {
  auto m = cluster_->mount("mnt");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_TRUE(std::filesystem::create_directory(*m + "/r3"));
  std::string out;
  ASSERT_EQ(surgectl("setstripe --replicas 2 --count 3 " + *m + "/r3", &out), 0) << out;
  ASSERT_EQ(surgectl("getstripe " + *m + "/r3", &out), 0) << out;
  EXPECT_TRUE(has(out, "stripe_count 3 replicas 2")) << out;
  // The same directory by its namespace path.
  ASSERT_EQ(surgectl("getstripe /r3", &out), 0) << out;
  EXPECT_TRUE(has(out, "stripe_count 3 replicas 2")) << out;
  // A file under the mount, by its mount path (with a trailing slash on
  // the directory part and a "." thrown in).
  ASSERT_TRUE(write_file(*m + "/r3/f", random_bytes(100000, 7)).ok());
  ASSERT_EQ(surgectl("getstripe " + *m + "/./r3/f", &out), 0) << out;
  EXPECT_TRUE(has(out, "replicas 2 chains [")) << out;
  EXPECT_TRUE(has(out, "slot 0: chain ")) << out;
}

TEST_F(SurgectlMountPath, ARelativePathInsideTheMount) {
  auto m = cluster_->mount("mnt");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_TRUE(std::filesystem::create_directories(*m + "/a/b"));
  std::string out;
  ASSERT_EQ(surgectl("setstripe --replicas 1 --count 2 " + *m + "/a/b", &out), 0) << out;
  const char* b = std::getenv("SURGE_BUILD_DIR");
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(sh("cd " + *m + "/a && " + std::string(b) + "/tools/surgectl --mds " +
                   cluster_->mds_address() + " --key-file " + cluster_->key_file() +
                   " getstripe b 2>&1",
               &out),
            0)
      << out;
  EXPECT_TRUE(has(out, "b: stripe_size")) << out;
  EXPECT_TRUE(has(out, "stripe_count 2 replicas 1")) << out;
}

TEST_F(SurgectlMountPath, APathUnderNoSurgeMountIsAnErrorNamingIt) {
  auto m = cluster_->mount("mnt");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  // The cluster's own directory exists locally but is no Surge mount.
  const std::string outside = cluster_->dir() + "/logs";
  std::string out;
  EXPECT_EQ(surgectl("getstripe " + outside, &out), 1) << out;
  EXPECT_TRUE(has(out, "path " + outside + " is neither under a Surge mount nor in the Surge "
                                           "namespace"))
      << out;
  EXPECT_TRUE(has(out, "Surge mounts here: ")) << out;
  EXPECT_TRUE(has(out, " " + *m + " (surge:")) << out;
  EXPECT_EQ(surgectl("setstripe --replicas 2 " + outside, &out), 1) << out;
  EXPECT_TRUE(has(out, "path " + outside)) << out;
  // A relative path outside any mount.
  const char* b = std::getenv("SURGE_BUILD_DIR");
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(sh("cd " + cluster_->dir() + " && " + std::string(b) + "/tools/surgectl --mds " +
                   cluster_->mds_address() + " --key-file " + cluster_->key_file() +
                   " getstripe logs 2>&1",
               &out),
            1)
      << out;
  EXPECT_TRUE(has(out, "path logs (" + outside + ") is not under a Surge mount")) << out;
}

}  // namespace
}  // namespace surge::test
