// DirLeases (client/lib/dir_leases.h): which misses the client may answer
// itself, and when it must stop.
#include <gtest/gtest.h>

#include "client/lib/dir_leases.h"

namespace surge::client {
namespace {

using Clock = DirLeases::Clock;
constexpr uint64_t kSession = 7;
constexpr Ino kDir = 100;

TEST(DirLeases, AGrantedDirectoryKnowsEveryNameMissing) {
  DirLeases l;
  l.grant(kDir, kSession, 200, Clock::now(), 0);
  EXPECT_TRUE(l.known_missing(kDir, "a", kSession));
  EXPECT_FALSE(l.known_missing(kDir + 1, "a", kSession)) << "no lease on another directory";
}

TEST(DirLeases, NoLeaseWithoutATerm) {
  DirLeases l;
  l.grant(kDir, kSession, 0, Clock::now(), 0);
  EXPECT_FALSE(l.known_missing(kDir, "a", kSession));
}

TEST(DirLeases, AnAddedNameIsNotMissing) {
  DirLeases l;
  const auto now = Clock::now();
  l.grant(kDir, kSession, 200, now, 0);
  l.added(kDir, "a", kSession, true, 200, now);
  EXPECT_FALSE(l.known_missing(kDir, "a", kSession));
  EXPECT_TRUE(l.known_missing(kDir, "b", kSession));
}

TEST(DirLeases, AReplyWithoutATermEndsIt) {
  DirLeases l;
  const auto now = Clock::now();
  l.grant(kDir, kSession, 200, now, 0);
  l.added(kDir, "a", kSession, true, 0, now);
  EXPECT_FALSE(l.known_missing(kDir, "b", kSession));
  l.added(kDir, "c", kSession, true, 200, now);
  EXPECT_FALSE(l.known_missing(kDir, "b", kSession)) << "ended, never renewed";
}

TEST(DirLeases, AnUnknownOutcomeEndsIt) {
  DirLeases l;
  l.grant(kDir, kSession, 200, Clock::now(), 0);
  l.drop(kDir);
  EXPECT_FALSE(l.known_missing(kDir, "a", kSession));
}

TEST(DirLeases, AnotherSessionHasNone) {
  DirLeases l;
  l.grant(kDir, kSession, 200, Clock::now(), 0);
  EXPECT_FALSE(l.known_missing(kDir, "a", kSession + 1));
  EXPECT_FALSE(l.known_missing(kDir, "a", kSession)) << "a new session drops the old one's lease";
}

TEST(DirLeases, ItEndsAMarginBeforeTheMdsCountsItOut) {
  DirLeases l;
  // Sent 180 ms ago with a 200 ms term: the MDS holds it 20 ms more, the
  // client stops kMarginMs (25 ms) before that.
  l.grant(kDir, kSession, 200, Clock::now() - std::chrono::milliseconds(180), 0);
  EXPECT_FALSE(l.known_missing(kDir, "a", kSession));
}

TEST(DirLeases, ARunOutLeaseIsRenewedByTheNextAddition) {
  DirLeases l;
  l.grant(kDir, kSession, 200, Clock::now() - std::chrono::seconds(5), 0);
  l.added(kDir, "a", kSession, true, 200, Clock::now());
  EXPECT_FALSE(l.known_missing(kDir, "a", kSession));
  EXPECT_TRUE(l.known_missing(kDir, "b", kSession));
}

TEST(DirLeases, ARenameKeepsTheTerm) {
  DirLeases l;
  l.grant(kDir, kSession, 200, Clock::now() - std::chrono::seconds(5), 0);
  l.added(kDir, "r", kSession, false, 0, {});
  EXPECT_FALSE(l.known_missing(kDir, "b", kSession)) << "a rename does not renew";
  l.added(kDir, "a", kSession, true, 200, Clock::now());
  EXPECT_FALSE(l.known_missing(kDir, "r", kSession)) << "the renamed name was kept";
}

TEST(DirLeases, AGrantRacingARenewedAdditionIsRefused) {
  DirLeases l;
  const uint64_t gen = l.generation();
  // Another thread's create in the new directory came back first: the MDS
  // renewed a lease the table does not hold yet.
  l.added(kDir, "x", kSession, true, 200, Clock::now());
  l.grant(kDir, kSession, 200, Clock::now(), gen);
  EXPECT_FALSE(l.known_missing(kDir, "x", kSession));
  EXPECT_FALSE(l.known_missing(kDir, "y", kSession)) << "granted without knowing x";
}

TEST(DirLeases, ARemovedNameIsMissingAgain) {
  DirLeases l;
  const auto now = Clock::now();
  l.grant(kDir, kSession, 200, now, 0);
  l.added(kDir, "a", kSession, true, 200, now);
  l.removed(kDir, "a");
  EXPECT_TRUE(l.known_missing(kDir, "a", kSession));
}

}  // namespace
}  // namespace surge::client
