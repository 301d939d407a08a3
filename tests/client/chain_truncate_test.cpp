// A truncate of a replicated file right after a member of its chain was
// SIGKILLed, before the MDS noticed. Since truncates are intents with a
// generation (docs/redundancy.md, "Truncate generations") the MDS answers
// without calling the data servers when no other client holds the file
// open, and the leader's pass applies it later through the chain as it then
// is (retrying as a client retries its IO, mds/cluster/file_chunks.h).
// Before, the MDS truncated every chunk inside the request: a killed tail
// made the head answer StaleChain (EIO through the mount until the MDS
// retried; surge-stress found it), a killed head cost a retry after the
// MDS's own probe. Either way the file must read back at its new size with
// its bytes: the reader carries the generation, so chunks not cut yet read
// as cut.
//
// Real daemons: 1 MDS and 3 data servers on 127.0.0.1, a file of replicas
// 2 in one slot (one chain), the head or the tail killed.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/client/chain_state.h"
#include "tests/client/local_cluster.h"

namespace surge::test {
namespace {

constexpr int kIoTimeoutMs = 8000;
constexpr size_t kFileBytes = 3 << 20;
constexpr uint64_t kCut = 1234567;

class ChainTruncate : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ClusterConfig cfg;
    cfg.client_io_timeout_ms = "8000";
    auto c = LocalCluster::Start(cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    ASSERT_EQ(make_replicated_dir(*cluster_, "/r", 2, 1, kIoTimeoutMs), "");
  }

  // The data server index of member `pos` of the chain of path's slot 0.
  int member(const std::string& path, int pos) {
    std::string out;
    EXPECT_EQ(run_surgectl(*cluster_, "getstripe " + path, &out), 0) << out;
    // "  slot 0: chain C version V healthy: T1 serving, T2 serving"
    const size_t slot = out.find("slot 0: chain ");
    const size_t colon = slot == std::string::npos ? slot : out.find(": ", slot + 7);
    if (colon == std::string::npos) {
      ADD_FAILURE() << "no slot 0 in: " << out;
      return -1;
    }
    std::vector<uint32_t> members;
    for (size_t at = colon + 2; at < out.size() && out[at] != '\n';) {
      members.push_back(static_cast<uint32_t>(std::strtoul(out.c_str() + at, nullptr, 10)));
      const size_t next = out.find(", ", at);
      if (next == std::string::npos || next > out.find('\n', at)) break;
      at = next + 2;
    }
    if (members.size() != 2) {
      ADD_FAILURE() << "not 2 members in: " << out;
      return -1;
    }
    for (int i = 0; i < 3; ++i) {
      if (target_id_of(*cluster_, i) == members[static_cast<size_t>(pos)]) return i;
    }
    ADD_FAILURE() << "no data server is target " << members[static_cast<size_t>(pos)];
    return -1;
  }

  std::unique_ptr<LocalCluster> cluster_;
};

TEST_P(ChainTruncate, TruncateRightAfterAMemberIsKilledSucceeds) {
  auto cl = cluster_->connect(kIoTimeoutMs);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  const std::string data = random_bytes(kFileBytes, 42);
  {
    auto f = (*cl)->open("/r/f", O_RDWR | O_CREAT | O_EXCL, 0644);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    auto w = (*cl)->pwrite(**f, data.data(), data.size(), 0);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE((*cl)->fsync(**f, false).ok());
    ASSERT_TRUE((*cl)->close(*f).ok());
  }
  const int victim = member("/r/f", GetParam());
  ASSERT_GE(victim, 0);
  ASSERT_TRUE(cluster_->kill_ods(victim).ok());
  Status st = (*cl)->truncate("/r/f", kCut);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto f = (*cl)->open("/r/f", O_RDONLY);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  std::string got(kFileBytes, '\0');
  auto n = (*cl)->pread(**f, got.data(), got.size(), 0);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  got.resize(*n);
  EXPECT_EQ(got.size(), kCut);
  EXPECT_TRUE(got == data.substr(0, kCut)) << "the bytes before the cut differ";
  (void)(*cl)->close(*f);
}

INSTANTIATE_TEST_SUITE_P(HeadTail, ChainTruncate, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return std::string(p.param == 0 ? "Head" : "Tail");
                         });

}  // namespace
}  // namespace surge::test
