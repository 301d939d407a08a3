// ChainView against an MDS that answers slowly (an in-process RpcServer
// serving MdsGetClusterMap after a pause): a ref naming a chain version the
// view has not fetched yet waits for the fetch when its caller may wait
// (a worker); a caller that may not (a read run on a transport thread)
// learns at once that a fetch is needed; callers needing the same fetch
// share it.
#include "ods/chain/chain_view.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "net/proto/mds_methods.h"
#include "net/rpc_server.h"
#include "tests/net/net_test_util.h"

namespace surge::ods {
namespace {

namespace mpb = proto::mds;
using namespace std::chrono_literals;

constexpr uint32_t kSelf = 5;
constexpr uint32_t kChain = 7;
constexpr uint64_t kVersion = 3;  // of the map and of the chain the MDS hands out

class ChainViewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    net::ServerOptions o = net::testing::default_server_options();
    o.listen = "tcp://127.0.0.1:0";
    auto s = net::RpcServer::Create(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    mds_ = std::move(*s);
    mds_->add<mpb::MdsGetClusterMap>(
        [this](net::RpcContext&, const mpb::GetClusterMapRequest&, mpb::GetClusterMapReply& r) {
          std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms_.load()));
          mpb::ClusterMap* m = r.mutable_map();
          m->set_version(kVersion);
          mpb::Chain* c = m->mutable_chains()->add_chains();
          c->set_chain_id(kChain);
          c->set_version(kVersion);
          c->set_scheme(mpb::SCHEME_REPLICAS);
          c->set_replicas(1);
          mpb::ChainMember* me = c->add_members();
          me->set_target_id(kSelf);
          me->set_state(mpb::MEMBER_SERVING);
          served_.fetch_add(1);
          return Status::OK();
        });
    ASSERT_TRUE(mds_->start().ok());
    ChainViewOptions vo;
    vo.mds = mds_->address();
    vo.cluster_key = net::testing::kTestKey;
    view_ = std::make_unique<ChainView>(vo, [] { return kSelf; });
  }

  static proto::ods::ChunkRef ref(uint64_t version) {
    proto::ods::ChunkRef r;
    r.set_ino(42);
    r.set_chain_id(kChain);
    r.set_chain_version(version);
    r.set_target_id(kSelf);
    return r;
  }

  std::unique_ptr<net::RpcServer> mds_;
  std::unique_ptr<ChainView> view_;
  std::atomic<int> pause_ms_{0};
  std::atomic<int> served_{0};
};

TEST_F(ChainViewTest, ACallerThatMayWaitIsJudgedAfterTheFetch) {
  pause_ms_ = 300;
  auto place = view_->admit(ref(kVersion), "read");
  ASSERT_TRUE(place.ok()) << place.status().ToString();
  EXPECT_EQ(place->chain_id, kChain);
  EXPECT_EQ(served_.load(), 1);
}

TEST_F(ChainViewTest, ACallerThatMustNotWaitLearnsThatAFetchIsNeededAndNothingIsFetched) {
  bool would_fetch = false;
  auto first = view_->admit(ref(kVersion), "read", &would_fetch);
  EXPECT_EQ(first.status().code(), Code::kUnavailable) << first.status().ToString();
  EXPECT_TRUE(would_fetch);
  EXPECT_EQ(served_.load(), 0);
  // Once a worker has fetched, the same ref needs no fetch.
  ASSERT_TRUE(view_->admit(ref(kVersion), "read").ok());
  would_fetch = false;
  auto again = view_->admit(ref(kVersion), "read", &would_fetch);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(would_fetch);
  EXPECT_EQ(served_.load(), 1);
}

TEST_F(ChainViewTest, CallersWaitingTogetherShareOneFetch) {
  pause_ms_ = 300;
  std::vector<std::thread> callers;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i) {
    callers.emplace_back([&] {
      if (view_->admit(ref(kVersion), "read").ok()) ok.fetch_add(1);
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(ok.load(), 6);
  // One fetch for the first caller; the rest waited for the lock while it
  // ran and take its result, or came after it began: at most one more.
  EXPECT_LE(served_.load(), 2);
}

}  // namespace
}  // namespace surge::ods
