// mount.surge: `mount -t surge MDS-ADDR DIR -o ...`, an fstab line
// (`mount -T FSTAB DIR`), `umount DIR`, and SIGTERM to the daemon all work
// and leave no mount behind. mount(8) finds helpers only in /sbin, so the
// test links /sbin/mount.surge to the built helper for its duration (and
// fails, rather than touch it, if a different one is installed there).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/client/local_cluster.h"

namespace surge::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

bool mounted(const std::string& path) {
  std::string out;
  sh("awk '$5 == \"" + path + "\"' /proc/self/mountinfo", &out);
  return !out.empty();
}

class HelperLink {
 public:
  HelperLink() {
    std::string helper = std::string(std::getenv("SURGE_BUILD_DIR")) + "/client/fuse/mount.surge";
    std::error_code ec;
    if (fs::is_symlink(kPath, ec)) {
      ok_ = fs::read_symlink(kPath, ec) == helper;
      return;  // someone's link: use it only if it is ours
    }
    if (fs::exists(kPath, ec)) return;
    fs::create_symlink(helper, kPath, ec);
    ok_ = !ec;
    created_ = ok_;
  }
  ~HelperLink() {
    std::error_code ec;
    if (created_) fs::remove(kPath, ec);
  }
  bool ok() const { return ok_; }
  static constexpr const char* kPath = "/sbin/mount.surge";

 private:
  bool ok_ = false;
  bool created_ = false;
};

TEST(MountHelper, MountTypeSurgeFstabUmountAndSigterm) {
  auto c = LocalCluster::Start(ClusterConfig{});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  HelperLink link;
  ASSERT_TRUE(link.ok()) << HelperLink::kPath << " exists and is not a link to this build's helper";
  std::string mnt = (*c)->dir() + "/m";
  fs::create_directories(mnt);
  std::string opts = "key_file=" + (*c)->key_file() + ",allow_other,_netdev,pid_file=" +
                     (*c)->dir() + "/fuse.pid,log_file=" + (*c)->dir() + "/logs/helper.log";
  std::string out;

  // mount -t surge
  ASSERT_EQ(sh("mount -t surge " + (*c)->mds_address() + " " + mnt + " -o " + opts + " 2>&1", &out),
            0)
      << out;
  ASSERT_TRUE(mounted(mnt));
  ASSERT_TRUE(write_file(mnt + "/hello", "via mount -t surge").ok());
  EXPECT_EQ(sh("umount " + mnt + " 2>&1", &out), 0) << out;
  EXPECT_FALSE(mounted(mnt));

  // an fstab line
  std::string fstab = (*c)->dir() + "/fstab";
  std::ofstream(fstab) << (*c)->mds_address() << " " << mnt << " surge " << opts
                       << ",noauto 0 0\n";
  ASSERT_EQ(sh("mount -T " + fstab + " " + mnt + " 2>&1", &out), 0) << out;
  ASSERT_TRUE(mounted(mnt));
  auto back = read_file(mnt + "/hello");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, "via mount -t surge");

  // SIGTERM to the daemon unmounts cleanly.
  std::string pid_text;
  std::ifstream((*c)->dir() + "/fuse.pid") >> pid_text;
  pid_t pid = static_cast<pid_t>(std::atoi(pid_text.c_str()));
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  for (int i = 0; i < 100 && mounted(mnt); ++i) std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(mounted(mnt)) << "SIGTERM left the mount behind";
  for (int i = 0; i < 100 && kill(pid, 0) == 0; ++i) std::this_thread::sleep_for(50ms);
  EXPECT_NE(kill(pid, 0), 0) << "surge-fuse still running after SIGTERM";
  if (mounted(mnt)) sh("umount -l " + mnt);
}

TEST(MountHelper, BadAddressFailsTheMountWithAReason) {
  std::string dir = "/tmp/surge-helper-bad-" + std::to_string(getpid());
  fs::create_directories(dir);
  std::string out;
  std::string bin = std::string(std::getenv("SURGE_BUILD_DIR")) + "/client/fuse/surge-fuse";
  std::ofstream(dir + "/key") << "0123456789abcdef\n";
  int rc = sh(bin + " tcp://127.0.0.1:1 " + dir + " -o key_file=" + dir +
                  "/key,mds_timeout_ms=500 2>&1",
              &out);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("cannot connect"), std::string::npos) << out;
  EXPECT_FALSE(mounted(dir));
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace surge::test
