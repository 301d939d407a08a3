// Updates of an EC data position whose delta did not reach every parity
// position (issue 16; docs/redundancy.md, "EC rebuild" and "Erasure
// coding"), on a 2+2 group (ec_small_group.h):
//
// * Lost with its data server: the server of parity position 3 is
//   stopped (SIGSTOP), a client writes to data position 0, whose server
//   stores the bytes and sends their delta to both parity positions;
//   position 2 applies it, and position 0's server is SIGKILLed while it
//   waits for position 3, which is then let go on (its pull of the delta
//   from the dead server fails). The parity positions now name different
//   versions of position 0. When its server returns, its rebuild must
//   complete the update (send position 3 the delta, rebuilt as the XOR of
//   both versions) and serve again.
// * Left dirty at a data server taken back serving as it is: as in the
//   first case, but the servers of data position 1 and parity position 2
//   go too, so fewer than K = 2 positions serve and the MDS takes the data
//   servers back as they are (no rebuild). Position 0's server must find
//   its update not known everywhere by itself (no write comes) and send
//   parity position 3 its delta, reading data position 1's copy while
//   that server syncs; otherwise position 1's rebuild finds no consistent
//   cut (position 3 names the version before position 0's) and the chain
//   never heals.
// * Not kept by a data server that stays up ([ec] kept_deltas = 0): parity
//   position 3's server is SIGKILLed, so a write's delta fails there and
//   the data server keeps only a marker of it. The client's retry must
//   not be refused for the delta it no longer holds: every parity position
//   left in the chain applied it, so the update is committed and the
//   write goes on.
//
// Each time the file then holds the written bytes and every parity window
// is consistent.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/client/ec_small_group.h"

namespace surge::test {
namespace {

// Writes `bytes` at `at` of /ec/f through a client of its own, with an
// fsync; *out: how it ended.
std::thread write_async(const LocalCluster& cluster, int io_timeout_ms, uint64_t at,
                        const std::string& bytes, Status* out) {
  return std::thread([&cluster, io_timeout_ms, at, &bytes, out] {
    auto cl = cluster.connect(io_timeout_ms);
    if (!cl.ok()) {
      *out = cl.status();
      return;
    }
    auto f = (*cl)->open("/ec/f", O_RDWR);
    if (!f.ok()) {
      *out = f.status();
      return;
    }
    auto n = (*cl)->pwrite(**f, bytes.data(), bytes.size(), at);
    *out = n.ok() ? (*cl)->fsync(**f, false) : n.status();
    (void)(*cl)->close(*f);
  });
}

class EcLostDelta : public EcSmallGroup {
 protected:
  // Parity position 3's server is stopped, `w` is written at `at` (data
  // position 0) by a client of its own, and once position 2 has applied
  // its delta position 0's server is SIGKILLed and position 3's let go on.
  // *writer: the writing thread, still to be joined (*wrote: its end).
  void lose_delta_mid_write(const std::string& w, uint64_t at, Status* wrote, std::thread* writer) {
    const int d0 = server_of(0), p3 = server_of(3);
    ASSERT_GE(d0, 0);
    ASSERT_GE(p3, 0);
    const pid_t p3_pid = cluster_->ods_pid(p3);
    ASSERT_TRUE(stop_process(p3_pid)) << "could not stop the server of parity position 3";
    *writer = write_async(*cluster_, io_timeout_ms(), at, w, wrote);
    // Position 2 applies the delta at once; position 3 is stopped.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    Status killed = cluster_->kill_ods(d0);
    ::kill(p3_pid, SIGCONT);
    ASSERT_TRUE(killed.ok()) << killed.ToString();
  }
};

TEST_F(EcLostDelta, ReturningDataPositionCompletesTheUpdateItWasSending) {
  // Half a unit at the start of data position 0's unit of group 1.
  const std::string w = random_bytes(kUnit / 2, 7);
  const uint64_t at = kGroup;
  Status wrote;
  std::thread writer;
  lose_delta_mid_write(w, at, &wrote, &writer);
  if (writer.joinable() && HasFatalFailure()) writer.join();
  ASSERT_FALSE(HasFatalFailure());
  const int d0 = server_of(0);
  ASSERT_TRUE(cluster_->start_ods(d0).ok());
  writer.join();
  // The write may fail (its server died under it) or be acknowledged by
  // the client's retry at the returned server; the bytes are written
  // either way: position 2 holds their delta, so the update is completed.
  SCOPED_TRACE("the write returned " + wrote.ToString());
  ASSERT_NO_FATAL_FAILURE(wait_healthy(std::chrono::seconds(60)));
  model_.replace(at, w.size(), w);
  EXPECT_EQ(differs(), "");
  EXPECT_EQ(scrub_finds(), "");
}

TEST_F(EcLostDelta, DataPositionTakenBackAsItIsCompletesItsUpdate) {
  const int d0 = server_of(0), d1 = server_of(1), p2 = server_of(2);
  ASSERT_TRUE(d0 >= 0 && d1 >= 0 && p2 >= 0);
  const std::string w = random_bytes(kUnit / 2, 10);
  const uint64_t at = kGroup;
  Status wrote;
  std::thread writer;
  lose_delta_mid_write(w, at, &wrote, &writer);
  if (writer.joinable() && HasFatalFailure()) writer.join();
  ASSERT_FALSE(HasFatalFailure());
  writer.join();  // fails: its data server is gone, and position 0 does not come back in time
  ASSERT_TRUE(cluster_->kill_ods(d1).ok());
  ASSERT_TRUE(cluster_->kill_ods(p2).ok());
  ASSERT_NO_FATAL_FAILURE(wait_serving(1, std::chrono::seconds(30)));
  ASSERT_TRUE(cluster_->start_ods(d0).ok());
  ASSERT_TRUE(cluster_->start_ods(d1).ok());
  ASSERT_NO_FATAL_FAILURE(wait_serving(3, std::chrono::seconds(30)));
  ASSERT_TRUE(cluster_->start_ods(p2).ok());
  ASSERT_NO_FATAL_FAILURE(wait_healthy(std::chrono::seconds(60)));
  model_.replace(at, w.size(), w);
  EXPECT_EQ(differs(), "");
  EXPECT_EQ(scrub_finds(), "");
}

class EcUnkeptDelta : public EcSmallGroup {
 protected:
  ClusterConfig cluster_config() override {
    ClusterConfig cfg = EcSmallGroup::cluster_config();
    cfg.ods_args = {"--ec-kept-deltas", "0"};
    return cfg;
  }
};

TEST_F(EcUnkeptDelta, WriteGoesOnWhenEveryParityLeftAppliedTheDeltaItDidNotKeep) {
  const int p3 = server_of(3);
  ASSERT_GE(p3, 0);
  ASSERT_TRUE(cluster_->kill_ods(p3).ok());
  // Half a unit at the start of data position 0's unit of group 1.
  const std::string w = random_bytes(kUnit / 2, 8);
  const uint64_t at = kGroup;
  Status wrote;
  write_async(*cluster_, io_timeout_ms(), at, w, &wrote).join();
  ASSERT_TRUE(wrote.ok()) << wrote.ToString();
  model_.replace(at, w.size(), w);
  EXPECT_EQ(differs(), "") << "with parity position 3's server down";
  ASSERT_TRUE(cluster_->start_ods(p3).ok());
  ASSERT_NO_FATAL_FAILURE(wait_healthy(std::chrono::seconds(60)));
  EXPECT_EQ(differs(), "");
  EXPECT_EQ(scrub_finds(), "");
}

}  // namespace
}  // namespace surge::test
