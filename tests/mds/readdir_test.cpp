// readdir(plus) paging: every entry once, attributes with plus, errors, and
// pages that stay consistent while other threads add and remove entries.
#include <atomic>
#include <thread>

#include "tests/mds/mds_fixture.h"

namespace surge::mds::testing {
namespace {

using ReadDirTest = NamespaceTest;

TEST_F(ReadDirTest, EmptyDirectoryIsEof) {
  auto d = mkdir(kRoot, "d");
  pb::ReadDirRequest r;
  r.set_ino(d->ino());
  pb::ReadDirReply out;
  ASSERT_TRUE(ns_->readdir(r, &out).ok());
  EXPECT_EQ(out.entries_size(), 0);
  EXPECT_TRUE(out.eof());
}

TEST_F(ReadDirTest, SmallPagesListEveryEntryOnce) {
  std::vector<std::string> want;
  for (int i = 0; i < 57; ++i) {
    want.push_back("n" + std::to_string(i));
    ASSERT_TRUE(create(kRoot, want.back()).ok());
  }
  std::sort(want.begin(), want.end());
  auto got = list(kRoot, 5);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, want);
}

TEST_F(ReadDirTest, PlusCarriesAttributesAndCookiesAvoidDotEntries) {
  auto f = create(kRoot, "f", 0600);
  pb::ReadDirRequest r;
  r.set_ino(kRoot);
  r.set_plus(true);
  pb::ReadDirReply out;
  ASSERT_TRUE(ns_->readdir(r, &out).ok());
  ASSERT_EQ(out.entries_size(), 1);
  EXPECT_EQ(out.entries(0).attr().ino(), f->ino());
  EXPECT_EQ(out.entries(0).attr().mode(), static_cast<uint32_t>(S_IFREG | 0600));
  EXPECT_EQ(out.entries(0).type(), static_cast<uint32_t>(S_IFREG));
  EXPECT_GE(out.entries(0).cookie(), 3u);
}

TEST_F(ReadDirTest, ReaddirOfFileIsEnotdir) {
  auto f = create(kRoot, "f");
  pb::ReadDirRequest r;
  r.set_ino(f->ino());
  pb::ReadDirReply out;
  EXPECT_EQ(ns_->readdir(r, &out).code(), Code::kNotDirectory);
}

TEST_F(ReadDirTest, ReaddirWithoutReadPermissionIsEacces) {
  auto d = mkdir(kRoot, "d", 0711);
  EXPECT_EQ(code_of(list(d->ino(), 10, cred(1000, 1000))), Code::kPermissionDenied);
}

TEST_F(ReadDirTest, CookieOfRemovedEntryStillResumes) {
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(create(kRoot, "n" + std::to_string(i)).ok());
  pb::ReadDirRequest r;
  r.set_ino(kRoot);
  r.set_max_entries(7);
  pb::ReadDirReply first;
  ASSERT_TRUE(ns_->readdir(r, &first).ok());
  ASSERT_EQ(first.entries_size(), 7);
  // The entry the cookie came from goes away; the rest still follow once.
  ASSERT_TRUE(unlink(kRoot, first.entries(6).name()).ok());
  std::set<std::string> seen;
  for (const auto& e : first.entries()) seen.insert(e.name());
  uint64_t cookie = first.entries(6).cookie();
  for (;;) {
    r.set_cookie(cookie);
    pb::ReadDirReply out;
    ASSERT_TRUE(ns_->readdir(r, &out).ok());
    for (const auto& e : out.entries()) {
      EXPECT_TRUE(seen.insert(e.name()).second) << e.name() << " repeated";
      cookie = e.cookie();
    }
    if (out.eof()) break;
  }
  EXPECT_EQ(seen.size(), 20u);
}

// Stable entries exist throughout; churners add and remove others. Every
// listing must contain every stable entry exactly once, and no name twice.
TEST_F(ReadDirTest, PagingUnderConcurrentInsertAndDelete) {
  auto d = mkdir(kRoot, "d");
  const uint64_t dir = d->ino();
  std::set<std::string> stable;
  for (int i = 0; i < 200; ++i) {
    stable.insert("stable" + std::to_string(i));
    ASSERT_TRUE(create(dir, "stable" + std::to_string(i)).ok());
  }
  std::atomic<bool> stop{false};
  std::atomic<int> churn_errors{0};
  std::vector<std::thread> churners;
  for (int t = 0; t < 2; ++t) {
    churners.emplace_back([&, t] {
      int i = 0;
      while (!stop.load()) {
        const std::string n = "churn" + std::to_string(t) + "_" + std::to_string(i % 50);
        if (!create(dir, n).ok()) ++churn_errors;
        if (i % 3 != 0 && !unlink(dir, n).ok()) ++churn_errors;
        ++i;
        if (i % 50 == 0) {
          for (int k = 0; k < 50; ++k) {
            (void)unlink(dir, "churn" + std::to_string(t) + "_" + std::to_string(k));
          }
        }
      }
    });
  }
  for (int pass = 0; pass < 20; ++pass) {
    std::multiset<std::string> seen;
    uint64_t cookie = 0;
    for (;;) {
      pb::ReadDirRequest r;
      r.set_ino(dir);
      r.set_cookie(cookie);
      r.set_max_entries(7);
      pb::ReadDirReply out;
      ASSERT_TRUE(ns_->readdir(r, &out).ok());
      for (const auto& e : out.entries()) {
        seen.insert(e.name());
        cookie = e.cookie();
      }
      if (out.eof()) break;
    }
    for (const auto& s : stable) EXPECT_EQ(seen.count(s), 1u) << s << " in pass " << pass;
    for (const auto& s : seen) EXPECT_EQ(seen.count(s), 1u) << s << " repeated";
  }
  stop = true;
  for (auto& t : churners) t.join();
  EXPECT_EQ(churn_errors.load(), 0);
  expect_clean();
}

}  // namespace
}  // namespace surge::mds::testing
