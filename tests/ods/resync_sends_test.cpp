// ResyncSends: which whole-chunk send a member takes pieces of
// (ods/chain/resync_sends.h; the daemons' case is
// client_chain_order_test's LatePieceOfAnEarlierSendIsRefused).
#include "ods/chain/resync_sends.h"

#include <gtest/gtest.h>

#include <map>

namespace surge::ods {
namespace {

constexpr ChunkKey kChunk{7, 0, 0};
constexpr ChunkKey kOther{8, 0, 0};

struct Ledger {
  std::map<uint32_t, uint64_t> versions{{1, 5}};  // chain -> version held now
  ResyncSends sends{[this](uint32_t c) { return versions.count(c) ? versions.at(c) : 0; }, 2};
  Status piece(const ChunkKey& key, uint64_t version, uint64_t id, bool begin) {
    return sends.admit(key, 1, version, id, begin, "resync of " + key.describe());
  }
};

TEST(ResyncSends, TakesEveryPieceOfOneSend) {
  Ledger l;
  EXPECT_TRUE(l.piece(kChunk, 5, 10, true).ok());
  EXPECT_TRUE(l.piece(kChunk, 5, 10, false).ok());
  EXPECT_TRUE(l.piece(kChunk, 5, 10, false).ok());
}

TEST(ResyncSends, RefusesAnEarlierSendAfterALaterBegan) {
  Ledger l;
  ASSERT_TRUE(l.piece(kChunk, 5, 10, true).ok());
  ASSERT_TRUE(l.piece(kChunk, 5, 11, true).ok());
  Status late_begin = l.piece(kChunk, 5, 10, true);
  EXPECT_EQ(late_begin.code(), Code::kStaleChain) << late_begin.ToString();
  EXPECT_NE(late_begin.message().find("chunk {ino 7"), std::string::npos) << late_begin.ToString();
  EXPECT_EQ(l.piece(kChunk, 5, 10, false).code(), Code::kStaleChain);
  EXPECT_TRUE(l.piece(kChunk, 5, 11, false).ok());
}

TEST(ResyncSends, RefusesAPieceWhoseFirstWasNeverTaken) {
  Ledger l;
  EXPECT_EQ(l.piece(kChunk, 5, 10, false).code(), Code::kStaleChain);
  ASSERT_TRUE(l.piece(kChunk, 5, 10, true).ok());
  EXPECT_EQ(l.piece(kChunk, 5, 12, false).code(), Code::kStaleChain);
}

TEST(ResyncSends, ANewChainVersionStartsOver) {
  // Ids come from the source; under a new version the source may be
  // another member, whose ids are not ordered with the old one's.
  Ledger l;
  ASSERT_TRUE(l.piece(kChunk, 5, 100, true).ok());
  EXPECT_TRUE(l.piece(kChunk, 6, 50, true).ok());
  EXPECT_TRUE(l.piece(kChunk, 6, 50, false).ok());
}

TEST(ResyncSends, SendIdZeroIsAnOlderSenderAndAlwaysTaken) {
  Ledger l;
  ASSERT_TRUE(l.piece(kChunk, 5, 10, true).ok());
  EXPECT_TRUE(l.piece(kChunk, 5, 0, false).ok());
}

TEST(ResyncSends, DropsEntriesOfChainVersionsThatMovedOn) {
  Ledger l;                                        // prunes above 2 entries
  ASSERT_TRUE(l.piece(kChunk, 4, 10, true).ok());  // version 4: the chain is at 5 now
  ASSERT_TRUE(l.piece(kOther, 5, 10, true).ok());
  ASSERT_TRUE(l.piece(ChunkKey{9, 0, 0}, 5, 10, true).ok());
  EXPECT_EQ(l.sends.size(), 2u);  // the version 4 entry went
  EXPECT_TRUE(l.piece(kOther, 5, 10, false).ok()) << "a current send's entry was dropped";
}

TEST(ResyncSends, KeepsEveryChunkOfOneLargeResync) {
  Ledger l;  // prunes above 2 entries; all of these are current
  for (uint64_t ino = 1; ino <= 100; ++ino) {
    ASSERT_TRUE(l.piece(ChunkKey{ino, 0, 0}, 5, 10, true).ok());
  }
  EXPECT_EQ(l.sends.size(), 100u);
  EXPECT_EQ(l.piece(ChunkKey{1, 0, 0}, 5, 9, true).code(), Code::kStaleChain)
      << "the first chunk's entry went while its version is current";
}

TEST(ResyncSends, SendIdsOnlyGrow) {
  uint64_t prev = next_resync_send_id();
  for (int i = 0; i < 1000; ++i) {
    const uint64_t next = next_resync_send_id();
    ASSERT_GT(next, prev);
    prev = next;
  }
}

}  // namespace
}  // namespace surge::ods
