// A data server's address reused by another target: the client's map
// still names the old target there, and what it sends must be refused
// (WrongTarget), never stored by the newcomer as if it were the old
// target's. Here data server 0 comes back on its address as a new target
// (its stored id removed, so the MDS assigns another) while the client
// holds the file's layout naming the old id.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/client/local_cluster.h"

namespace surge::test {
namespace {

TEST(WrongTarget, AWriteToAnAddressNowServingAnotherTargetFailsInsteadOfLandingThere) {
  auto c = LocalCluster::Start(one_copy(small_stripes()));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto cl = (*c)->connect(2000);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  auto f = (*cl)->open("/moved", O_RDWR | O_CREAT, 0644);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const std::string data = random_bytes(3 * kSmallStripe, 7);  // one stripe on every target
  ASSERT_TRUE((*cl)->pwrite(**f, data.data(), data.size(), 0).ok());
  ASSERT_TRUE((*cl)->fsync(**f, false).ok());

  ASSERT_TRUE((*c)->kill_ods(0).ok());
  ASSERT_EQ(::unlink(((*c)->ods_dir(0) + "/target_id").c_str()), 0);
  ASSERT_TRUE((*c)->start_ods(0).ok()) << (*c)->log_tail("ods0");

  const std::string again = random_bytes(3 * kSmallStripe, 8);
  auto w = (*cl)->pwrite(**f, again.data(), again.size(), 0);
  Status st = w.ok() ? (*cl)->fsync(**f, false) : w.status();
  EXPECT_FALSE(st.ok()) << "the write to the old target's address was stored by the new target";
  (void)(*cl)->close(*f);
}

}  // namespace
}  // namespace surge::test
