// Writes through the mount that cannot land (issue 16: an EC data position
// whose server is down while no parity position serves to stand in for
// it): the mount acknowledges a write once it is ordered
// and sends it behind (client/lib/write_behind.h); a write that then fails
// must fail the fsync of the descriptor it came through, even when another
// descriptor's close waited for it first. Found by surge-stress on EC
// directories: a writer's fsync returned 0, its bytes never landed, and the
// error went to the release of a reader's descriptor.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/client/chain_state.h"
#include "tests/client/local_cluster.h"
#include "tests/common/time_scale.h"

namespace surge::test {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kUnit = 64 << 10;

// A cluster of 3 data servers, a mount, /ec/f (2+1, one slot) holding
// `old_bytes`, and the indexes of the servers holding its data position 0
// and its parity.
struct EcFile {
  std::unique_ptr<LocalCluster> cluster;
  std::string path;
  int victim = -1;
  int parity = -1;
  // Both killed: a write of data position 0 has no member and no stand-in
  // (the parity position takes a down data position's writes otherwise).
  void kill_both() const {
    ASSERT_TRUE(cluster->kill_ods(victim).ok());
    ASSERT_TRUE(cluster->kill_ods(parity).ok());
  }
};
void make_ec_file(EcFile* e, const std::string& old_bytes) {
  ClusterConfig cfg;
  cfg.ods_count = 3;
  // Short, so a write that cannot land fails soon; longer in sanitized
  // builds, where a healthy call takes several times as long.
  cfg.client_io_timeout_ms = std::to_string(sanitizer_scaled(2000));
  auto c = LocalCluster::Start(cfg);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  e->cluster = std::move(*c);
  auto& cluster = e->cluster;
  auto cl = cluster->connect(sanitizer_scaled(2000));
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  ASSERT_TRUE((*cl)->mkdir("/ec", 0777).ok());
  std::string out;
  ASSERT_EQ(
      run_surgectl(*cluster,
                   "setstripe --ec 2+1 --count 1 --size " + std::to_string(kUnit) + " /ec", &out),
      0)
      << out;
  auto m = cluster->mount("mnt");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  e->path = *m + "/ec/f";
  const std::string& path = e->path;
  {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0644);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    ASSERT_EQ(::pwrite(fd, old_bytes.data(), old_bytes.size(), 0),
              static_cast<ssize_t>(old_bytes.size()));
    ASSERT_EQ(::fsync(fd), 0) << std::strerror(errno);
    ASSERT_EQ(::close(fd), 0);
  }
  ASSERT_EQ(run_surgectl(*cluster, "--json getstripe /ec/f", &out), 0) << out;
  const auto positions = Json::parse(out).at("slots")[0].at("positions");
  const auto t0 = positions[0].at("target").get<uint32_t>();
  const auto t2 = positions[2].at("target").get<uint32_t>();
  for (int i = 0; i < 3; ++i) {
    if (target_id_of(*cluster, i) == t0) e->victim = i;
    if (target_id_of(*cluster, i) == t2) e->parity = i;
  }
  ASSERT_GE(e->victim, 0);
  ASSERT_GE(e->parity, 0);
}

TEST(EcMountWrite, AWriteThatCannotLandFailsItsFsync) {
  const std::string old_bytes(2 * kUnit, 'a');
  EcFile e;
  ASSERT_NO_FATAL_FAILURE(make_ec_file(&e, old_bytes));
  auto& cluster = e.cluster;
  const std::string& path = e.path;
  // 4 KiB inside data position 0's unit, written just before its server is
  // killed (so it is in flight, or sent to a dead server): it waits for the
  // position, then fails after the io timeout.
  const std::string new_bytes(4096, 'b');
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  const ssize_t w = ::pwrite(fd, new_bytes.data(), new_bytes.size(), 8192);
  ASSERT_NO_FATAL_FAILURE(e.kill_both());
  const int synced = w < 0 ? -1 : ::fsync(fd);
  const int sync_errno = errno;
  (void)::close(fd);
  EXPECT_TRUE(w < 0 || synced != 0)
      << "the write and its fsync both returned success, but data position 0's server is down";
  if (synced != 0) {
    EXPECT_EQ(sync_errno, EIO) << std::strerror(sync_errno);
  }
  // Whatever was said, what is read is what the file holds: the old bytes,
  // once both servers are back.
  ASSERT_TRUE(cluster->start_ods(e.victim).ok());
  ASSERT_TRUE(cluster->start_ods(e.parity).ok());
  std::string got(old_bytes.size(), '\0');
  ssize_t n = -1;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (n != static_cast<ssize_t>(got.size()) && std::chrono::steady_clock::now() < give_up) {
    fd = ::open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    n = ::pread(fd, got.data(), got.size(), 0);
    EXPECT_EQ(::close(fd), 0) << "a reader's close got an error: " << std::strerror(errno);
  }
  ASSERT_EQ(n, static_cast<ssize_t>(got.size()))
      << "never readable again: " << std::strerror(errno);
  EXPECT_TRUE(got == old_bytes) << "the bytes read are not those the file holds";
}

// Two descriptors open for writing; the write through the second cannot
// land. Closing the first waits for it (the inode's writes in flight are
// drained) but must not take the error away from the second, whose fsync
// reports it: what the stress run on EC directories lost (a write
// acknowledged by its fsync, its error handed to another descriptor).
TEST(EcMountWrite, AnotherDescriptorsCloseDoesNotTakeTheError) {
  const std::string old_bytes(2 * kUnit, 'a');
  EcFile e;
  ASSERT_NO_FATAL_FAILURE(make_ec_file(&e, old_bytes));
  int other = ::open(e.path.c_str(), O_RDWR);
  ASSERT_GE(other, 0) << std::strerror(errno);
  int fd = ::open(e.path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  const std::string new_bytes(4096, 'b');
  ASSERT_NO_FATAL_FAILURE(e.kill_both());
  const ssize_t w = ::pwrite(fd, new_bytes.data(), new_bytes.size(), 8192);
  (void)::close(other);  // its FLUSH waits for the write in flight
  const int synced = w < 0 ? -1 : ::fsync(fd);
  (void)::close(fd);
  EXPECT_TRUE(w < 0 || synced != 0)
      << "the write and its fsync both returned success; the write never landed";
}

// The writer forks (a shell running a command, a build tool): the child
// inherits the descriptor, and its exit closes it, which sends the mount a
// FLUSH for it. That FLUSH waits for the write in flight and sees it fail,
// but must leave the error to the writer, whose fsync reports it. Found by
// surge-stress, whose `surgectl` children's exits took the workers' errors.
TEST(EcMountWrite, AForkedChildsExitDoesNotTakeTheError) {
  const std::string old_bytes(2 * kUnit, 'a');
  EcFile e;
  ASSERT_NO_FATAL_FAILURE(make_ec_file(&e, old_bytes));
  int fd = ::open(e.path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  const std::string new_bytes(4096, 'b');
  ASSERT_NO_FATAL_FAILURE(e.kill_both());
  const ssize_t w = ::pwrite(fd, new_bytes.data(), new_bytes.size(), 8192);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0) << std::strerror(errno);
  if (child == 0) ::_exit(0);  // closes its copy of fd: a FLUSH
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  const int synced = w < 0 ? -1 : ::fsync(fd);
  (void)::close(fd);
  EXPECT_TRUE(w < 0 || synced != 0)
      << "the write and its fsync both returned success; the write never landed";
}

}  // namespace
}  // namespace surge::test
