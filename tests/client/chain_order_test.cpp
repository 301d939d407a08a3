// A write admitted under one chain version that takes its chunk's update
// order only after the chain moved on (docs/redundancy.md, "Resync": issue
// 18, "nothing acknowledged is ever lost"). The head judges a write's chain
// version when the request arrives; the write may then wait (for a buffer,
// for the chunk's update order) while the chain changes and a resync
// source compares the chunk. Were it applied after that under the place it
// was admitted with, it would reach nobody else.
//
// The interleaving is made, not hoped for: the data servers run with the
// pause point "write_before_order" (ods/chain/pause_points.h) armed for the
// second chained write each serves. On a chain of 2 (2 data servers, one
// slot): a first write and fsync of the chunk; the tail is SIGKILLed and the
// MDS takes it out of the chain (the head alone); a second write is
// admitted at the head under that version and held before the update
// order; the tail is restarted, resynced by the head and made SERVING
// again; then the write is let go. Whatever it returned, the two copies
// must then be identical (`surgectl scrub`), and the file reads back as
// the write left it: its bytes if it succeeded, the first write's or its
// own if it failed.
//
// The same for a piece of a whole-chunk send (resync): on a chain of 3,
// the tail comes back SYNCING and the middle member, its resync source,
// sends it a chunk; the first piece is held at the tail, the middle member
// is SIGKILLed, the head becomes the source, resyncs the tail (the held
// piece has not touched the chunk, so it is compared as it was) and the MDS
// makes it SERVING; then the piece is let go. Applied, it would mark the
// chunk incomplete and empty it on a SERVING member (the chunk
// client_chain_failover_test once found `incomplete` on a SERVING member:
// docs/redundancy.md, "Resync").
//
// And for a piece of an earlier send under the same chain version: on a
// chain of 2 the returning tail holds the first piece of the head's send;
// the head's call times out, its next round sends the chunk again and is
// held (pause point "resync_sent_before_done") before it reports done;
// then the old piece goes on. Applied, it would empty the chunk and mark
// it incomplete just before the MDS makes the tail SERVING; the send id
// on every piece (ResyncSends) refuses it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/client/chain_state.h"
#include "tests/client/local_cluster.h"

namespace surge::test {
namespace {

using namespace std::chrono_literals;

constexpr size_t kBytes = 64 << 10;
// Longer than the whole held interval (a target timeout, a restart, a
// resync): the held write must not time out at the client and be sent
// again; what is tested is that one request.
constexpr int kIoTimeoutMs = 120000;
constexpr const char* kPoint = "write_before_order";

std::string state_of(const std::vector<std::pair<uint32_t, std::string>>& members, uint32_t id) {
  for (const auto& [t, st] : members) {
    if (t == id) return st;
  }
  return "";
}

// Waits until pred(chain of path) holds; a wait for the MDS to act, not a
// timed assertion: the bound only keeps a chain that never changes from
// hanging the test. False (and a failure naming `what`) when it gives up.
template <typename Pred>
bool wait_chain(const LocalCluster& cluster, const std::string& path, const std::string& what,
                Pred pred) {
  const auto give_up = std::chrono::steady_clock::now() + 120s;
  std::string last;
  for (;;) {
    auto members = chain_of(cluster, path, &last);
    if (!members.empty() && pred(members)) return true;
    if (std::chrono::steady_clock::now() > give_up) {
      ADD_FAILURE() << "waiting for " << what << ", surgectl said last: " << last;
      return false;
    }
    std::this_thread::sleep_for(100ms);
  }
}

bool exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

// Waits until the file at path exists: a pause point reached or done. A
// wait for the data server, bounded only so a point never reached fails
// the test instead of hanging it.
bool wait_file(const std::string& path) {
  const auto give_up = std::chrono::steady_clock::now() + 120s;
  while (!exists(path)) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

void touch(const std::string& path) {
  if (FILE* f = std::fopen(path.c_str(), "w")) std::fclose(f);
}

// Writes data to path from offset 0 through cl, with fsync; "" or what
// failed.
std::string write_synced(Client& cl, const std::string& path, const std::string& data, int flags) {
  auto f = cl.open(path, flags, 0644);
  if (!f.ok()) return "open " + path + ": " + f.status().ToString();
  auto w = cl.pwrite(**f, data.data(), data.size(), 0);
  Status st = w.ok() ? cl.fsync(**f, false) : w.status();
  Status closed = cl.close(*f);
  if (st.ok()) st = closed;
  return st.ok() ? "" : path + ": " + st.ToString();
}

// The whole file at path through cl (one read past want's size, so a
// longer file shows).
std::string read_all(Client& cl, const std::string& path, size_t size) {
  auto f = cl.open(path, O_RDONLY);
  if (!f.ok()) return "open: " + f.status().ToString();
  std::string got(size + 1, '\0');
  size_t done = 0;
  while (done < got.size()) {
    auto n = cl.pread(**f, got.data() + done, got.size() - done, done);
    if (!n.ok()) return "read at " + std::to_string(done) + ": " + n.status().ToString();
    if (*n == 0) break;
    done += *n;
  }
  got.resize(done);
  (void)cl.close(*f);
  return got;
}

struct PauseDir {
  std::string path;
  PauseDir() {
    char tmpl[] = "/tmp/surge-chain-order-XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) path = tmpl;
  }
  ~PauseDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

// What the writer of the held write saw.
struct Outcome {
  std::atomic<bool> done{false};
  std::string error;  // "" : the write and its fsync returned success
};

TEST(ChainOrder, WriteHeldPastAResyncReachesEveryMember) {
  PauseDir pause;
  ASSERT_FALSE(pause.path.empty()) << "mkdtemp under /tmp failed";
  // Every data server gets it; only the head of the file's chain serves
  // client writes, and the second it serves is the held one.
  const std::string spec = std::string(kPoint) + ":2:" + pause.path;
  ASSERT_EQ(::setenv("SURGE_ODS_PAUSE_AT", spec.c_str(), 1), 0);
  ClusterConfig cfg;
  cfg.ods_count = 2;
  cfg.client_io_timeout_ms = std::to_string(kIoTimeoutMs);
  auto c = LocalCluster::Start(cfg);
  ::unsetenv("SURGE_ODS_PAUSE_AT");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto& cluster = *c;
  ASSERT_EQ(make_replicated_dir(*cluster, "/o", 2, 1, kIoTimeoutMs), "");

  const std::string path = "/o/f";
  const std::string first = random_bytes(kBytes, 71);
  const std::string second = random_bytes(kBytes, 72);
  auto cl = cluster->connect(kIoTimeoutMs);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  {
    auto f = (*cl)->open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    auto w = (*cl)->pwrite(**f, first.data(), first.size(), 0);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE((*cl)->fsync(**f, false).ok());
    ASSERT_TRUE((*cl)->close(*f).ok());
  }
  ASSERT_FALSE(exists(pause.path + "/" + kPoint + ".held"))
      << "the first write was held: it took more than one write request";

  std::string why;
  auto members = chain_of(*cluster, path, &why);
  ASSERT_EQ(members.size(), 2u) << why;
  const uint32_t head = members[0].first, tail = members[1].first;
  int tail_ods = -1;
  for (int i = 0; i < 2; ++i) {
    if (target_id_of(*cluster, i) == tail) tail_ods = i;
  }
  ASSERT_GE(tail_ods, 0) << "no data server is target " << tail;
  std::printf("chain of %s: head target %u, tail target %u (data server %d)\n", path.c_str(), head,
              tail, tail_ods);

  // The tail goes; the MDS takes it out of the chain (a new version).
  ASSERT_TRUE(cluster->kill_ods(tail_ods).ok());
  ASSERT_TRUE(wait_chain(*cluster, path, "target " + std::to_string(tail) + " out of the chain",
                         [&](const auto& m) { return state_of(m, tail) != "serving"; }));

  // The second write: admitted at the head under that version, held.
  Outcome out;
  std::thread writer([&] {
    auto wc = cluster->connect(kIoTimeoutMs);
    if (!wc.ok()) {
      out.error = "connect: " + wc.status().ToString();
    } else if (auto f = (*wc)->open(path, O_RDWR); !f.ok()) {
      out.error = "open: " + f.status().ToString();
    } else {
      auto w = (*wc)->pwrite(**f, second.data(), second.size(), 0);
      Status st = w.ok() ? (*wc)->fsync(**f, false) : w.status();
      Status closed = (*wc)->close(*f);
      if (st.ok()) st = closed;
      out.error = st.ok() ? "" : st.ToString();
    }
    out.done = true;
  });
  struct Joiner {
    std::thread& t;
    std::string go;
    ~Joiner() {
      // Whatever failed, let the held request go so the writer ends.
      if (FILE* f = std::fopen(go.c_str(), "w")) std::fclose(f);
      if (t.joinable()) t.join();
    }
  } joiner{writer, pause.path + "/" + kPoint + ".go"};
  {
    const auto give_up = std::chrono::steady_clock::now() + 120s;
    while (!exists(pause.path + "/" + kPoint + ".held")) {
      ASSERT_LT(std::chrono::steady_clock::now(), give_up)
          << "the second write never reached pause point " << kPoint << "; head's log:\n"
          << cluster->log_tail("ods" + std::to_string(1 - tail_ods));
      std::this_thread::sleep_for(20ms);
    }
  }

  // Meanwhile the tail comes back, is resynced by the head (which compares
  // the chunk: the held write has not touched it) and serves again.
  ASSERT_TRUE(cluster->start_ods(tail_ods).ok());
  ASSERT_TRUE(wait_chain(*cluster, path, "target " + std::to_string(tail) + " serving again",
                         [&](const auto& m) {
                           return state_of(m, tail) == "serving" && state_of(m, head) == "serving";
                         }));
  EXPECT_FALSE(out.done.load()) << "the held write ended while held: " << out.error;

  // Let it go.
  if (FILE* f = std::fopen(joiner.go.c_str(), "w")) std::fclose(f);
  writer.join();
  std::printf("held write: %s\n", out.error.empty() ? "success" : out.error.c_str());

  std::string scrub;
  EXPECT_EQ(run_surgectl(*cluster, "scrub", &scrub), 0)
      << "the copies differ after the held write (" << (out.error.empty() ? "success" : out.error)
      << "):\n"
      << scrub;

  auto f = (*cl)->open(path, O_RDONLY);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  std::string got(kBytes, '\0');
  auto n = (*cl)->pread(**f, got.data(), got.size(), 0);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  ASSERT_EQ(*n, kBytes);
  if (out.error.empty()) {
    EXPECT_TRUE(got == second) << "the held write succeeded but its bytes do not read back";
  } else {
    EXPECT_TRUE(got == first || got == second) << "neither write's bytes read back";
  }
  (void)(*cl)->close(*f);
}

TEST(ChainOrder, ResyncPieceHeldPastANewSourceLeavesNothingIncomplete) {
  PauseDir pause;
  ASSERT_FALSE(pause.path.empty()) << "mkdtemp under /tmp failed";
  constexpr const char* kResyncPoint = "resync_before_order";
  ClusterConfig cfg;
  cfg.ods_count = 3;
  cfg.client_io_timeout_ms = std::to_string(kIoTimeoutMs);
  auto c = LocalCluster::Start(cfg);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto& cluster = *c;
  ASSERT_EQ(make_replicated_dir(*cluster, "/o", 3, 1, kIoTimeoutMs), "");

  // Three whole-chunk pieces (1 MiB each): the first, held, begins the
  // chunk and is not its last.
  constexpr size_t kSize = 3 << 20;
  const std::string path = "/o/g";
  const std::string first = random_bytes(kSize, 81);
  const std::string second = random_bytes(kSize, 82);
  auto cl = cluster->connect(kIoTimeoutMs);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  ASSERT_EQ(write_synced(**cl, path, first, O_RDWR | O_CREAT | O_EXCL), "");

  std::string why;
  auto members = chain_of(*cluster, path, &why);
  ASSERT_EQ(members.size(), 3u) << why;
  const uint32_t head = members[0].first, middle = members[1].first, tail = members[2].first;
  const int middle_ods = ods_of(*cluster, 3, middle), tail_ods = ods_of(*cluster, 3, tail);
  ASSERT_GE(middle_ods, 0) << "no data server is target " << middle;
  ASSERT_GE(tail_ods, 0) << "no data server is target " << tail;
  std::printf("chain of %s: head %u, middle %u (data server %d), tail %u (data server %d)\n",
              path.c_str(), head, middle, middle_ods, tail, tail_ods);

  // The tail goes and misses a write: on return it needs the chunk whole.
  ASSERT_TRUE(cluster->kill_ods(tail_ods).ok());
  ASSERT_TRUE(wait_chain(*cluster, path, "target " + std::to_string(tail) + " out of the chain",
                         [&](const auto& m) { return state_of(m, tail) != "serving"; }));
  ASSERT_EQ(write_synced(**cl, path, second, O_RDWR), "");

  // It comes back with the first resync piece it is sent held.
  const std::string spec = std::string(kResyncPoint) + ":1:" + pause.path;
  ASSERT_EQ(::setenv("SURGE_ODS_PAUSE_AT", spec.c_str(), 1), 0);
  Status started = cluster->start_ods(tail_ods);
  ::unsetenv("SURGE_ODS_PAUSE_AT");
  ASSERT_TRUE(started.ok()) << started.ToString();
  const std::string held = pause.path + "/" + kResyncPoint + ".held";
  struct Release {
    std::string go;
    ~Release() { touch(go); }  // whatever failed, the held piece goes on
  } release{pause.path + "/" + kResyncPoint + ".go"};
  ASSERT_TRUE(wait_file(held)) << "no resync piece reached " << kResyncPoint
                               << " on the returning tail; its log:\n"
                               << cluster->log_tail("ods" + std::to_string(tail_ods));

  // Its source dies with the piece held; the head resyncs it instead and
  // the MDS makes it SERVING.
  ASSERT_TRUE(cluster->kill_ods(middle_ods).ok());
  ASSERT_TRUE(wait_chain(
      *cluster, path, "target " + std::to_string(tail) + " serving again", [&](const auto& m) {
        return state_of(m, tail) == "serving" && state_of(m, middle) != "serving";
      }));
  EXPECT_FALSE(exists(pause.path + "/" + kResyncPoint + ".done"));

  // The piece goes on, and is through.
  touch(release.go);
  ASSERT_TRUE(wait_file(pause.path + "/" + kResyncPoint + ".done"))
      << "the held resync piece never finished; the tail's log:\n"
      << cluster->log_tail("ods" + std::to_string(tail_ods));

  // The middle member is down, so not scrubbed (exit 2, not 3): the head's
  // and the tail's copies are compared.
  std::string scrub;
  EXPECT_EQ(run_surgectl(*cluster, "scrub", &scrub), 2)
      << "the copies differ after the held resync piece went on:\n"
      << scrub;
  EXPECT_NE(scrub.find("1 chunks compared, 0 replicas differ"), std::string::npos) << scrub;
  EXPECT_TRUE(read_all(**cl, path, kSize) == second) << "the file does not read back as written";

  // The middle member returns too and is resynced: three identical copies.
  ASSERT_TRUE(cluster->start_ods(middle_ods).ok());
  ASSERT_TRUE(wait_chain(*cluster, path, "every member serving", [&](const auto& m) {
    return state_of(m, head) == "serving" && state_of(m, middle) == "serving" &&
           state_of(m, tail) == "serving";
  }));
  EXPECT_EQ(run_surgectl(*cluster, "scrub", &scrub), 0) << scrub;
  EXPECT_TRUE(read_all(**cl, path, kSize) == second) << "the file does not read back as written";
}

TEST(ChainOrder, LatePieceOfAnEarlierSendIsRefused) {
  PauseDir source_pause, tail_pause;
  ASSERT_FALSE(source_pause.path.empty() || tail_pause.path.empty()) << "mkdtemp under /tmp failed";
  constexpr const char* kDonePoint = "resync_sent_before_done";
  constexpr const char* kPiecePoint = "resync_before_order";
  // Every data server holds the first resync that sent chunks before it
  // reports done; only the head of the file's chain is ever a source here.
  const std::string source_spec = std::string(kDonePoint) + ":1:" + source_pause.path;
  ASSERT_EQ(::setenv("SURGE_ODS_PAUSE_AT", source_spec.c_str(), 1), 0);
  ClusterConfig cfg;
  cfg.ods_count = 2;
  cfg.client_io_timeout_ms = std::to_string(kIoTimeoutMs);
  auto c = LocalCluster::Start(cfg);
  ::unsetenv("SURGE_ODS_PAUSE_AT");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto& cluster = *c;
  struct Release {
    std::vector<std::string> go;
    ~Release() {
      for (const auto& g : go) touch(g);  // whatever failed, nothing stays held
    }
  } release{
      {source_pause.path + "/" + kDonePoint + ".go", tail_pause.path + "/" + kPiecePoint + ".go"}};
  ASSERT_EQ(make_replicated_dir(*cluster, "/o", 2, 1, kIoTimeoutMs), "");

  // Three whole-chunk pieces (1 MiB each); the first, held, begins the
  // chunk and is not its last.
  constexpr size_t kSize = 3 << 20;
  const std::string path = "/o/l";
  const std::string first = random_bytes(kSize, 91);
  const std::string second = random_bytes(kSize, 92);
  auto cl = cluster->connect(kIoTimeoutMs);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  ASSERT_EQ(write_synced(**cl, path, first, O_RDWR | O_CREAT | O_EXCL), "");
  std::string why;
  auto members = chain_of(*cluster, path, &why);
  ASSERT_EQ(members.size(), 2u) << why;
  const uint32_t head = members[0].first, tail = members[1].first;
  const int tail_ods = ods_of(*cluster, 2, tail);
  ASSERT_GE(tail_ods, 0) << "no data server is target " << tail;
  std::printf("chain of %s: head %u, tail %u (data server %d)\n", path.c_str(), head, tail,
              tail_ods);

  // The tail misses a write, so on return it needs the chunk whole.
  ASSERT_TRUE(cluster->kill_ods(tail_ods).ok());
  ASSERT_TRUE(wait_chain(*cluster, path, "target " + std::to_string(tail) + " out of the chain",
                         [&](const auto& m) { return state_of(m, tail) != "serving"; }));
  ASSERT_EQ(write_synced(**cl, path, second, O_RDWR), "");

  // It returns holding the first piece of the head's first send. The
  // head's call times out, its round fails, and the next round sends the
  // chunk again (a second send, same chain version), which goes through:
  // the head is then held before it reports done.
  const std::string piece_spec = std::string(kPiecePoint) + ":1:" + tail_pause.path;
  ASSERT_EQ(::setenv("SURGE_ODS_PAUSE_AT", piece_spec.c_str(), 1), 0);
  Status started = cluster->start_ods(tail_ods);
  ::unsetenv("SURGE_ODS_PAUSE_AT");
  ASSERT_TRUE(started.ok()) << started.ToString();
  ASSERT_TRUE(wait_file(tail_pause.path + "/" + kPiecePoint + ".held"))
      << "no resync piece reached " << kPiecePoint << " on the returning tail; its log:\n"
      << cluster->log_tail("ods" + std::to_string(tail_ods));
  ASSERT_TRUE(wait_file(source_pause.path + "/" + kDonePoint + ".held"))
      << "the head never finished a second send of the chunk; its log:\n"
      << cluster->log_tail("ods" + std::to_string(1 - tail_ods));
  auto now = chain_of(*cluster, path, &why);
  EXPECT_EQ(state_of(now, tail), "syncing") << why;

  // The first send's piece lands now, under the same chain version, after
  // the second send ended: refused, it leaves the tail's copy whole.
  touch(tail_pause.path + "/" + kPiecePoint + ".go");
  ASSERT_TRUE(wait_file(tail_pause.path + "/" + kPiecePoint + ".done"))
      << "the held resync piece never finished; the tail's log:\n"
      << cluster->log_tail("ods" + std::to_string(tail_ods));
  touch(source_pause.path + "/" + kDonePoint + ".go");
  ASSERT_TRUE(wait_chain(*cluster, path, "target " + std::to_string(tail) + " serving again",
                         [&](const auto& m) {
                           return state_of(m, tail) == "serving" && state_of(m, head) == "serving";
                         }));

  std::string scrub;
  EXPECT_EQ(run_surgectl(*cluster, "scrub", &scrub), 0)
      << "the copies differ after a late piece of an earlier send went on:\n"
      << scrub;
  EXPECT_TRUE(read_all(**cl, path, kSize) == second) << "the file does not read back as written";
}

}  // namespace
}  // namespace surge::test
