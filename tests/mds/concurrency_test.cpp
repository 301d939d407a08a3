// Many threads creating, renaming (within and across directories, with
// directories moving too) and unlinking in shared directories; afterwards
// the checker must find the namespace exact.
#include <atomic>
#include <random>
#include <thread>

#include "tests/mds/mds_fixture.h"

namespace surge::mds::testing {
namespace {

// With the synced WAL: many threads share make_durable's group sync.
class ConcurrencyTest : public NamespaceTest {
 protected:
  void SetUp() override {
    sync_ = true;
    NamespaceTest::SetUp();
  }
};

TEST_F(ConcurrencyTest, CreateRenameUnlinkStormLeavesCleanNamespace) {
  std::vector<uint64_t> dirs;
  for (int i = 0; i < 4; ++i) {
    auto d = mkdir(kRoot, "d" + std::to_string(i), 0777);
    ASSERT_TRUE(d.ok());
    dirs.push_back(d->ino());
  }
  std::atomic<int> unexpected{0};
  std::atomic<int> ok_ops{0};
  auto worker = [&](int seed) {
    std::mt19937 rng(seed);
    for (int i = 0; i < 400; ++i) {
      const uint64_t a = dirs[rng() % dirs.size()], b = dirs[rng() % dirs.size()];
      const std::string n1 = "n" + std::to_string(rng() % 30),
                        n2 = "n" + std::to_string(rng() % 30);
      Status s;
      switch (rng() % 7) {
        case 0:
        case 1:
          s = create(a, n1).status();
          break;
        case 2:
          s = rename(a, n1, b, n2);
          break;
        case 3:
          s = rename(a, n1, b, n2, 2);
          break;  // exchange
        case 4:
          s = unlink(a, n1);
          break;
        case 5:
          s = mkdir(a, n1, 0777).status();
          break;
        case 6: {
          auto f = lookup(a, n1);
          s = f.ok() ? link(f->ino(), b, n2).status() : f.status();
          break;
        }
      }
      // Races make many operations fail in ordinary ways; anything else
      // (Busy, Internal, Corruption...) is a bug.
      switch (s.code()) {
        case Code::kOk:
          ++ok_ops;
          break;
        case Code::kNotFound:
        case Code::kAlreadyExists:
        case Code::kIsDirectory:
        case Code::kNotDirectory:
        case Code::kNotEmpty:
        case Code::kNotPermitted:
        case Code::kInvalidArgument:
          break;
        default:
          ++unexpected;
          ADD_FAILURE() << s.ToString();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) threads.emplace_back(worker, t + 1);
  for (auto& t : threads) t.join();
  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_GT(ok_ops.load(), 100);
  expect_clean();
  reopen();
  expect_clean();
}

TEST_F(ConcurrencyTest, CrossDirectoryDirectoryRenamesNeverMakeCycles) {
  // Two directories repeatedly moved into each other from both sides: one of
  // each pair of racing renames must fail with EINVAL, never both succeed.
  auto a = mkdir(kRoot, "a");
  auto b = mkdir(kRoot, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  std::atomic<int> unexpected{0};
  auto mover = [&](uint64_t self_ino, const std::string& self, const std::string& other) {
    for (int i = 0; i < 200; ++i) {
      // Find where 'self' lives now and try to move it under 'other'.
      for (uint64_t p : {kRoot, a->ino(), b->ino()}) {
        auto o = lookup(kRoot, other);
        uint64_t other_ino = o.ok() ? o->ino() : (self == "a" ? b->ino() : a->ino());
        Status s = rename(p, self, other_ino, self);
        if (s.ok() || s.code() == Code::kNotFound || s.code() == Code::kInvalidArgument) {
          if (s.ok()) {
            // and back to the root
            Status back = rename(other_ino, self, kRoot, self);
            if (!back.ok() && back.code() != Code::kNotFound) ++unexpected;
          }
          continue;
        }
        ++unexpected;
      }
      (void)self_ino;
    }
  };
  std::thread t1(mover, a->ino(), "a", "b");
  std::thread t2(mover, b->ino(), "b", "a");
  t1.join();
  t2.join();
  EXPECT_EQ(unexpected.load(), 0);
  expect_clean();
}

}  // namespace
}  // namespace surge::mds::testing
