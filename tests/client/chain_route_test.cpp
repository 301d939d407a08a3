// Which member of a chain a request goes to (client/lib/chain_route.h):
// updates to the head of the write chain, reads spread over the serving
// members, a dirty chunk's read to the last serving member, and a clear
// error naming the chain when no member is left.
#include <gtest/gtest.h>

#include <map>

#include "client/lib/chain_route.h"

namespace surge::client {
namespace {

namespace pb = proto::mds;

pb::Chain chain(std::initializer_list<std::pair<uint32_t, pb::ChainMemberState>> members) {
  pb::Chain c;
  c.set_chain_id(7);
  c.set_version(42);
  c.set_scheme(pb::SCHEME_REPLICAS);
  c.set_replicas(static_cast<uint32_t>(members.size()));
  for (auto [t, st] : members) {
    auto* m = c.add_members();
    m->set_target_id(t);
    m->set_state(st);
  }
  return c;
}

constexpr auto kServing = pb::MEMBER_SERVING;
constexpr auto kSyncing = pb::MEMBER_SYNCING;
constexpr auto kOffline = pb::MEMBER_OFFLINE;

TEST(ChainRoute, UpdatesGoToTheFirstMemberOfTheWriteChain) {
  EXPECT_EQ(*chain_head(chain({{1, kServing}, {2, kServing}, {3, kServing}})), 1u);
  EXPECT_EQ(*chain_head(chain({{1, kOffline}, {2, kServing}, {3, kSyncing}})), 2u);
  // A syncing member alone still takes writes (it is the whole write chain).
  EXPECT_EQ(*chain_head(chain({{1, kOffline}, {3, kSyncing}})), 3u);
}

TEST(ChainRoute, AChainWithNoWritableMemberIsUnavailableNamingIt) {
  auto h = chain_head(chain({{1, kOffline}, {2, kOffline}}));
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), Code::kUnavailable);
  EXPECT_NE(h.status().message().find("chain 7 (version 42"), std::string::npos)
      << h.status().ToString();
  EXPECT_NE(h.status().message().find("1:offline"), std::string::npos) << h.status().ToString();
}

TEST(ChainRoute, ReadsSpreadOverEveryServingMemberAndNoOther) {
  const pb::Chain c = chain({{1, kServing}, {2, kOffline}, {3, kServing}, {4, kSyncing}});
  std::map<uint32_t, int> hits;
  for (uint64_t stripe = 0; stripe < 64; ++stripe) {
    auto r = chain_reader(c, read_spread_key(9, 0, stripe), RouteHint{});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    hits[*r]++;
  }
  EXPECT_EQ(hits.size(), 2u);  // only 1 and 3 serve reads
  EXPECT_GT(hits[1], 0);
  EXPECT_GT(hits[3], 0);
}

TEST(ChainRoute, ADirtyChunkIsReadFromTheLastServingMember) {
  const pb::Chain c = chain({{1, kServing}, {2, kServing}, {3, kSyncing}});
  RouteHint h;
  h.last_serving = true;
  for (uint64_t stripe = 0; stripe < 16; ++stripe) {
    EXPECT_EQ(*chain_reader(c, read_spread_key(9, 1, stripe), h), 2u);
  }
}

TEST(ChainRoute, AvoidedMembersAreSkippedUntilNoneIsLeft) {
  const pb::Chain c = chain({{1, kServing}, {2, kServing}});
  RouteHint h;
  h.avoid = {1};
  for (uint64_t stripe = 0; stripe < 16; ++stripe) {
    EXPECT_EQ(*chain_reader(c, read_spread_key(9, 2, stripe), h), 2u);
  }
  h.avoid = {1, 2};
  auto r = chain_reader(c, 0, h);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
}

TEST(ChainRoute, NoServingMemberLeavesNothingToReadFrom) {
  auto r = chain_reader(chain({{1, kOffline}, {2, kSyncing}}), 0, RouteHint{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no serving member"), std::string::npos);
}

}  // namespace
}  // namespace surge::client
