// surge-ods under faults: SIGKILL in the middle of a write stream, and a
// full disk (a size-limited tmpfs as the data directory).
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "tests/ods/ods_fixture.h"

namespace surge::ods::testing {
namespace {

// One acknowledged write: where it went and what it held.
struct AckedWrite {
  uint64_t id;
  uint64_t offset;
  std::vector<std::byte> data;
};

// Writers append unaligned pieces to their own objects (neighbouring
// pieces share 4 KiB blocks, the case where an unsynced write can spoil a
// synced neighbour's CRC) and sync every few writes. A write counts as
// durable once a sync that started after its ack was acknowledged. The
// daemon is SIGKILLed mid-stream; after a restart every durable write must
// read back byte for byte, and every object must read whole (all CRCs
// valid).
TEST(OdsFault, SigkillDuringWritesLosesNothingAcknowledgedAsSynced) {
  TempDir dir;
  std::string key_file = make_key(dir);
  std::string data_dir = dir.path() + "/data";
  DaemonProcess ods;
  std::string address = start_ods(ods, data_dir, key_file, dir.path() + "/ods.log");
  std::string key = key_of(key_file);

  constexpr int kWriters = 3;
  std::mutex mu;
  std::vector<AckedWrite> durable;
  std::map<uint64_t, uint64_t> written_end;  // id -> end of acknowledged writes
  std::atomic<bool> stop{false};
  std::atomic<int> synced_rounds{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      std::mt19937 rng(static_cast<uint32_t>(w + 1));
      OdsClient cl(address, key);
      std::vector<AckedWrite> pending;
      uint64_t round = 0;
      while (!stop) {
        ++round;
        uint64_t id = 500 + static_cast<uint64_t>(w) * 10 + round % 3;
        uint64_t off;
        {
          std::lock_guard lk(mu);
          off = written_end[id];
        }
        auto data = pattern(1 + rng() % 150000, static_cast<uint32_t>(round * 31 + static_cast<uint64_t>(w)));
        if (!cl.write(id, off, data).ok()) return;  // the daemon died
        {
          std::lock_guard lk(mu);
          written_end[id] = off + data.size();
        }
        pending.push_back({id, off, std::move(data)});
        if (round % 4 == 0) {
          std::vector<uint64_t> ids;
          for (auto& p : pending) ids.push_back(p.id);
          if (!cl.sync(ids).ok()) return;
          std::lock_guard lk(mu);
          for (auto& p : pending) durable.push_back(std::move(p));
          pending.clear();
          ++synced_rounds;
        }
      }
    });
  }
  // Let a good stream build up, then kill without warning.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (synced_rounds < 60 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  int status = ods.kill(SIGKILL);
  stop = true;
  for (auto& t : writers) t.join();
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  ASSERT_GE(synced_rounds.load(), 60) << "the write stream was too slow to test anything";

  DaemonProcess again;
  std::string address2 = start_ods(again, data_dir, key_file, dir.path() + "/ods.log");
  OdsClient cl(address2, key);
  for (const AckedWrite& w : durable) {
    auto r = cl.read(w.id, w.offset, w.data.size());
    ASSERT_TRUE(r.ok()) << "object " << w.id << " at " << w.offset << ": " << r.status().ToString();
    ASSERT_EQ(*r, w.data) << "object " << w.id << " at " << w.offset;
  }
  // Every block of every object verifies, unsynced tails included.
  for (auto& [id, end] : written_end) {
    auto r = cl.read(id, 0, std::min<uint64_t>(end + 4096, 8 << 20));
    ASSERT_TRUE(r.ok()) << "object " << id << ": " << r.status().ToString();
  }
  int st2 = again.stop();
  EXPECT_TRUE(WIFEXITED(st2) && WEXITSTATUS(st2) == 0) << st2;
  // The restart went through crash recovery (the dirty log was not empty).
  std::ifstream log(dir.path() + "/ods.log");
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("recovering"), std::string::npos) << "no crash recovery in " << dir.path() << "/ods.log";
}

// The exact interleaving recovery exists for: a synced write, then an
// unsynced write into the same 4 KiB block whose bytes reach the file but
// whose CRC does not (a crash point kills the daemon in between). After a
// restart the synced bytes must read back, not fail their checksum.
TEST(OdsFault, CrashBetweenDataAndChecksumKeepsSyncedBytesInTheSameBlock) {
  TempDir dir;
  std::string key_file = make_key(dir);
  std::string data_dir = dir.path() + "/data";
  auto synced = pattern(5000, 1);    // [0, 5000): blocks 0 and 1
  auto unsynced = pattern(4000, 2);  // [5000, 9000): blocks 1 and 2
  {
    DaemonProcess ods;
    ods.set_env({{"SURGE_ODS_CRASH_AT", "after_data_write:2"}});
    std::string address = start_ods(ods, data_dir, key_file, dir.path() + "/ods.log");
    OdsClient cl(address, key_of(key_file));
    ASSERT_TRUE(cl.write(61, 0, synced, true).ok());
    auto w = cl.write(61, 5000, unsynced);
    ASSERT_FALSE(w.ok()) << "the crash point did not fire";
    int status = ods.kill(SIGKILL);  // reaps the self-killed process
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  }
  DaemonProcess again;
  std::string address = start_ods(again, data_dir, key_file, dir.path() + "/ods.log");
  OdsClient cl(address, key_of(key_file));
  auto r = cl.read(61, 0, synced.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, synced);
  // The unacknowledged write may be there or not, but it reads without error.
  EXPECT_TRUE(cl.read(61, 0, 9000).ok());
}

// A tmpfs of a few MiB mounted for one test, unmounted on every exit path.
class SmallTmpfs {
 public:
  SmallTmpfs(const std::string& path, const std::string& size) : path_(path) {
    std::filesystem::create_directories(path);
    std::string opts = "size=" + size;
    if (::mount("tmpfs", path.c_str(), "tmpfs", 0, opts.c_str()) != 0) {
      throw std::runtime_error("mount tmpfs on " + path + " (needs root): " + std::strerror(errno));
    }
  }
  ~SmallTmpfs() { ::umount2(path_.c_str(), MNT_DETACH); }

 private:
  std::string path_;
};

TEST(OdsFault, FullDiskIsNoSpaceWithoutPartialWritesAndReadsGoOn) {
  TempDir dir;
  std::string key_file = make_key(dir);
  SmallTmpfs fs(dir.path() + "/small", "8m");
  std::string data_dir = dir.path() + "/small/data";
  DaemonProcess ods;
  std::string address = start_ods(ods, data_dir, key_file, dir.path() + "/ods.log");
  OdsClient cl(address, key_of(key_file));

  // Fill it with 1 MiB pieces over a few objects until the disk says no.
  std::vector<AckedWrite> acked;
  Status last;
  for (int i = 0; i < 64; ++i) {
    uint64_t id = 1 + static_cast<uint64_t>(i % 3);
    uint64_t off = static_cast<uint64_t>(i / 3) * (1 << 20) + 100;  // unaligned on purpose
    auto data = pattern(1 << 20, static_cast<uint32_t>(i + 1));
    auto before = cl.stat(id);
    auto w = cl.write(id, off, data, true);
    if (!w.ok()) {
      last = w.status();
      // No acknowledged partial write: the object kept its old size.
      auto after = cl.stat(id);
      if (before.ok()) {
        ASSERT_TRUE(after.ok());
        EXPECT_EQ(*after, *before) << "a failed write must not extend object " << id;
      }
      break;
    }
    acked.push_back({id, off, std::move(data)});
  }
  ASSERT_EQ(last.code(), Code::kNoSpace) << last.ToString();
  ASSERT_GE(acked.size(), 3u);
  // Reads of everything acknowledged still work, byte for byte.
  for (const AckedWrite& w : acked) {
    auto r = cl.read(w.id, w.offset, w.data.size());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(*r, w.data);
  }
  // Freeing space makes writes work again.
  pb::RemoveRequest rq;
  rq.set_object_id(acked.front().id);
  pb::RemoveReply ra;
  ASSERT_TRUE(cl.channel().call<pb::OdsRemove>(rq, &ra).ok());
  auto small = pattern(4096, 99);
  EXPECT_TRUE(cl.write(77, 0, small, true).ok());
  int st = ods.stop();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
}

}  // namespace
}  // namespace surge::ods::testing
