// An update lost with its data position's server, its delta applied at
// one parity position only (issue 16; docs/redundancy.md, "EC rebuild"):
// a 2+2 group (ec_small_group.h); the server of parity position 3 is
// stopped (SIGSTOP), a client writes to data position 0, whose server
// stores the bytes and sends their delta to both parity positions;
// position 2 applies it, and position 0's server is SIGKILLed while it
// waits for position 3, which is then let go on (its pull of the delta
// from the dead server fails). The parity positions now name different
// versions of position 0. When its server returns, its rebuild must
// complete the update (send position 3 the delta, rebuilt as the XOR of
// both versions) and serve again; the file then holds the written bytes
// and every parity window is consistent.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/client/ec_small_group.h"

namespace surge::test {
namespace {

using EcLostDelta = EcSmallGroup;

TEST_F(EcLostDelta, ReturningDataPositionCompletesTheUpdateItWasSending) {
  const int d0 = server_of(0), p3 = server_of(3);
  ASSERT_GE(d0, 0);
  ASSERT_GE(p3, 0);
  const pid_t p3_pid = cluster_->ods_pid(p3);
  ASSERT_TRUE(stop_process(p3_pid)) << "could not stop the server of parity position 3";

  // Half a unit at the start of data position 0's unit of group 1.
  const std::string w = random_bytes(kUnit / 2, 7);
  const uint64_t at = kGroup;
  Status wrote;
  std::thread writer([&] {
    auto cl = cluster_->connect(kIoTimeoutMs);
    if (!cl.ok()) {
      wrote = cl.status();
      return;
    }
    auto f = (*cl)->open("/ec/f", O_RDWR);
    if (!f.ok()) {
      wrote = f.status();
      return;
    }
    auto n = (*cl)->pwrite(**f, w.data(), w.size(), at);
    wrote = n.ok() ? (*cl)->fsync(**f, false) : n.status();
    (void)(*cl)->close(*f);
  });
  // Position 2 applies the delta at once; position 3 is stopped.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  Status killed = cluster_->kill_ods(d0);
  ::kill(p3_pid, SIGCONT);
  ASSERT_TRUE(killed.ok()) << killed.ToString();
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

}  // namespace
}  // namespace surge::test
