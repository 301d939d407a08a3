// StatAhead (client/lib/stat_ahead.h): when a run of lookups starts a
// fetch, what a fetch may answer, and how this client's own changes keep
// it from answering stale.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "client/lib/stat_ahead.h"

namespace surge::client {
namespace {

using namespace std::chrono_literals;
constexpr Ino kDir = 100;
constexpr auto kAge = std::chrono::seconds(1);

DirEntry entry(const std::string& name, Ino ino, uint64_t size = 0) {
  DirEntry e;
  e.name = name;
  e.attr.ino = ino;
  e.attr.nlink = 1;
  e.attr.mode = 0100644;
  e.attr.size = size;
  return e;
}

// Lookups in dir until one asks for a fetch; the count it took.
int lookups_until_fetch(StatAhead& s, Ino dir, StatAhead::Fetch* f) {
  for (int i = 1; i <= 100; ++i) {
    if (auto got = s.note_lookup(dir)) {
      *f = *got;
      return i;
    }
  }
  return -1;
}

StatAhead::Fetch fetched(StatAhead& s, std::vector<DirEntry> entries) {
  StatAhead::Fetch f;
  EXPECT_EQ(lookups_until_fetch(s, kDir, &f), StatAhead::kRun);
  s.install(f, std::move(entries));
  return f;
}

TEST(StatAhead, ARunOfLookupsAsksForOneFetch) {
  StatAhead s;
  StatAhead::Fetch f;
  EXPECT_EQ(lookups_until_fetch(s, kDir, &f), StatAhead::kRun);
  EXPECT_EQ(f.dir, kDir);
  for (int i = 0; i < 3 * StatAhead::kRun; ++i) {
    EXPECT_FALSE(s.note_lookup(kDir)) << "a second fetch while the first is on its way";
  }
}

TEST(StatAhead, FetchedNamesAreAnsweredWithTheirAge) {
  StatAhead s;
  fetched(s, {entry("a", 1, 10), entry("b", 2, 20)});
  StatAhead::Clock::duration age{-1s};
  auto a = s.find(kDir, "b", kAge, &age);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->ino, 2u);
  EXPECT_EQ(a->size, 20u);
  EXPECT_GE(age, 0s);
  EXPECT_LT(age, kAge);
  EXPECT_FALSE(s.find(kDir, "c", kAge, nullptr)) << "a name the fetch did not see is asked for";
  EXPECT_FALSE(s.find(kDir + 1, "a", kAge, nullptr)) << "another directory";
}

TEST(StatAhead, NothingIsAnsweredPastTheCallersMaxAge) {
  StatAhead s;
  fetched(s, {entry("a", 1)});
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(s.find(kDir, "a", 20ms, nullptr));
  EXPECT_TRUE(s.find(kDir, "a", kAge, nullptr));
}

TEST(StatAhead, NorPastKMaxAge) {
  StatAhead s;
  fetched(s, {entry("a", 1)});
  std::this_thread::sleep_for(StatAhead::kMaxAge + 50ms);
  EXPECT_FALSE(s.find(kDir, "a", std::chrono::hours(1), nullptr));
  EXPECT_EQ(s.dirs(), 0u) << "an expired fetch is dropped";
}

TEST(StatAhead, EntriesWithoutAttributesAreNotKept) {
  StatAhead s;
  DirEntry gone = entry("gone", 3);
  gone.attr.nlink = 0;  // what readdir gives for an inode that went meanwhile
  fetched(s, {entry("a", 1), gone});
  EXPECT_FALSE(s.find(kDir, "gone", kAge, nullptr));
}

TEST(StatAhead, OurOwnRemovalOfANameIsSeenAtOnce) {
  StatAhead s;
  fetched(s, {entry("a", 1), entry("b", 2)});
  s.name_changed(kDir, "a");
  EXPECT_FALSE(s.find(kDir, "a", kAge, nullptr));
  EXPECT_TRUE(s.find(kDir, "b", kAge, nullptr));
}

TEST(StatAhead, ANameChangedWhileTheFetchWasOnItsWayIsLeftOut) {
  StatAhead s;
  StatAhead::Fetch f;
  ASSERT_EQ(lookups_until_fetch(s, kDir, &f), StatAhead::kRun);
  s.name_changed(kDir, "a");  // the page may have been read before the unlink landed
  s.install(f, {entry("a", 1), entry("b", 2)});
  EXPECT_FALSE(s.find(kDir, "a", kAge, nullptr));
  EXPECT_TRUE(s.find(kDir, "b", kAge, nullptr));
}

TEST(StatAhead, AnInodeWeChangedSinceTheFetchIsNotAnswered) {
  StatAhead s;
  fetched(s, {entry("a", 1), entry("b", 2)});
  s.inode_changed(1);  // a chmod, a close after writes
  EXPECT_FALSE(s.find(kDir, "a", kAge, nullptr));
  EXPECT_TRUE(s.find(kDir, "b", kAge, nullptr));
}

TEST(StatAhead, AnInodeChangedBeforeTheFetchBeganIsAnswered) {
  StatAhead s;
  s.inode_changed(1);
  std::this_thread::sleep_for(2ms);
  fetched(s, {entry("a", 1)});
  EXPECT_TRUE(s.find(kDir, "a", kAge, nullptr)) << "the fetch read it after the change";
}

TEST(StatAhead, ANameChangeInADirectoryStalesTheDirectorysOwnEntry) {
  StatAhead s;
  constexpr Ino kSub = 5;
  DirEntry sub = entry("sub", kSub);
  sub.attr.mode = 040755;
  fetched(s, {sub});
  s.name_changed(kSub, "x");  // a create in sub moves its times
  EXPECT_FALSE(s.find(kDir, "sub", kAge, nullptr));
}

TEST(StatAhead, AFailedFetchIsNotRetriedAtOnce) {
  StatAhead s;
  StatAhead::Fetch f;
  ASSERT_EQ(lookups_until_fetch(s, kDir, &f), StatAhead::kRun);
  s.abandon(f);
  EXPECT_EQ(lookups_until_fetch(s, kDir, &f), -1) << "backs off (kBackoff)";
}

TEST(StatAhead, AFetchThatAnsweredLittleIsNotRepeated) {
  StatAhead s;
  std::vector<DirEntry> many;
  for (Ino i = 1; i <= 100; ++i) many.push_back(entry("n" + std::to_string(i), i));
  fetched(s, std::move(many));
  ASSERT_TRUE(s.find(kDir, "n1", kAge, nullptr));  // 1 of 100: below 1 in kMinUse
  std::this_thread::sleep_for(StatAhead::kMaxAge / 2 + 20ms);
  StatAhead::Fetch f;
  EXPECT_EQ(lookups_until_fetch(s, kDir, &f), -1) << "backs off (kBackoff)";
}

TEST(StatAhead, AFetchThatAnsweredWellIsRepeatedOnceHalfItsAgeHasPassed) {
  StatAhead s;
  std::vector<DirEntry> few;
  for (Ino i = 1; i <= 16; ++i) few.push_back(entry("n" + std::to_string(i), i));
  fetched(s, std::move(few));
  for (int i = 1; i <= 2; ++i) ASSERT_TRUE(s.find(kDir, "n" + std::to_string(i), kAge, nullptr));
  std::this_thread::sleep_for(StatAhead::kMaxAge / 2 + 20ms);
  StatAhead::Fetch f;
  EXPECT_EQ(lookups_until_fetch(s, kDir, &f), StatAhead::kRun);
}

TEST(StatAhead, ExpireDropsFetchesPastKMaxAge) {
  StatAhead s;
  fetched(s, {entry("a", 1)});
  s.expire();
  EXPECT_EQ(s.dirs(), 1u);
  std::this_thread::sleep_for(StatAhead::kMaxAge + 20ms);
  s.expire();
  EXPECT_EQ(s.dirs(), 0u);
}

TEST(StatAhead, AFreshFetchIsNotRepeated) {
  StatAhead s;
  fetched(s, {entry("a", 1)});
  StatAhead::Fetch f;
  EXPECT_EQ(lookups_until_fetch(s, kDir, &f), -1) << "younger than kMaxAge / 2";
}

TEST(StatAhead, AtMostKMaxDirsAreKept) {
  StatAhead s;
  for (Ino d = 1; d <= StatAhead::kMaxDirs + 2; ++d) {
    StatAhead::Fetch f;
    ASSERT_EQ(lookups_until_fetch(s, d, &f), StatAhead::kRun);
    s.install(f, {entry("a", 1000 + d)});
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(s.dirs(), StatAhead::kMaxDirs);
  EXPECT_FALSE(s.find(1, "a", kAge, nullptr)) << "the oldest went first";
  EXPECT_TRUE(s.find(StatAhead::kMaxDirs + 2, "a", kAge, nullptr));
}

}  // namespace
}  // namespace surge::client
