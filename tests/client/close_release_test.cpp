// A close with nothing to report does not wait for the MDS: the release of
// the MDS's open record goes out behind it (client/lib/close_queue.h). The
// other half, that the release still arrives and an unlinked file's objects
// are then collected, is PosixMount.UnlinkWhileOpenKeepsDataUntilCloseThenReclaims.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <future>

#include "tests/client/local_cluster.h"

namespace surge::test {
namespace {

using namespace std::chrono_literals;

TEST(CloseRelease, ACloseWithNothingToReportReturnsWhileTheMdsIsStopped) {
  auto c = LocalCluster::Start(ClusterConfig{});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto cl = (*c)->connect();
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  auto f = (*cl)->open("/f", O_CREAT | O_EXCL | O_WRONLY, 0644);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE(stop_process((*c)->mds_pid()));
  auto closed = std::async(std::launch::async, [&] { return (*cl)->close(std::move(*f)); });
  // Liveness, not speed: a close that waited for the MDS would never be
  // ready while it is stopped; one that does not is ready at once.
  const bool returned = closed.wait_for(20s) == std::future_status::ready;
  ::kill((*c)->mds_pid(), SIGCONT);
  EXPECT_TRUE(returned) << "close waited for the stopped MDS";
  Status st = closed.get();
  EXPECT_TRUE(st.ok()) << st.ToString();
}

}  // namespace
}  // namespace surge::test
