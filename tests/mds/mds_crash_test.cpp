// Crash durability: surge-mds receives a stream of creates and renames
// (within and across directories) from several clients and is SIGKILLed at
// a random moment, several times over. After each restart every
// acknowledged operation must be there (the one in flight per client may or
// may not be), and at the end the namespace checker must find it exact.
#include <atomic>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "tests/mds/mds_daemon_fixture.h"

namespace surge::mds::testing {
namespace {

constexpr uint64_t kRoot = pb::kRootIno;
constexpr int kClients = 4;
constexpr int kRounds = 6;

using Path = std::pair<uint64_t, std::string>;

struct ClientModel {
  std::set<Path> present;  // acknowledged to exist
  std::set<Path> gone;     // acknowledged renamed away (names are never reused)
  // The operation in flight when the daemon died.
  enum Kind { kNone, kCreate, kRename } pending = kNone;
  Path from, to;
  uint64_t counter = 0;
  uint64_t acked = 0;
};

class MdsCrashTest : public MdsDaemonTest {
 protected:
  void SetUp() override {
    MdsDaemonTest::SetUp();
    // Targets must stay up across restarts without heartbeats here.
    std::ofstream(config_) << "[targets]\ntimeout_ms = 3600000\n";
  }

  // One client: creates f<n> in its dir, renames every other file to r<n>,
  // alternately in place and into the shared dir, until a call fails.
  void client_loop(ClientModel& m, uint64_t own, uint64_t shared, uint32_t seed) {
    net::ChannelOptions o;
    o.cluster_key = key_;
    o.call_timeout = std::chrono::milliseconds(10000);
    auto ch = net::RpcChannel::Connect(address_, o);
    if (!ch.ok()) return;
    std::mt19937 rng(seed);
    std::vector<Path> renamable(m.present.begin(), m.present.end());
    for (;;) {
      const uint64_t n = m.counter++;
      if (renamable.empty() || rng() % 2 == 0) {
        pb::CreateRequest r;
        *r.mutable_cred() = cred_;
        r.set_parent(own);
        r.set_name("f" + std::to_string(n));
        r.set_mode(0644);
        r.set_exclusive(true);
        m.pending = ClientModel::kCreate;
        m.to = {own, r.name()};
        pb::EntryReply out;
        if (!(*ch)->call<pb::MdsCreate>(r, &out).ok()) return;
        m.present.insert(m.to);
        renamable.push_back(m.to);
      } else {
        const size_t i = rng() % renamable.size();
        const Path from = renamable[i];
        renamable.erase(renamable.begin() + static_cast<long>(i));
        if (!m.present.count(from)) continue;
        pb::RenameRequest r;
        *r.mutable_cred() = cred_;
        r.set_old_parent(from.first);
        r.set_old_name(from.second);
        r.set_new_parent(n % 2 ? shared : own);
        r.set_new_name("r" + std::to_string(seed) + "_" + std::to_string(n));
        m.pending = ClientModel::kRename;
        m.from = from;
        m.to = {r.new_parent(), r.new_name()};
        if (!(*ch)->call<pb::MdsRename>(r, nullptr).ok()) return;
        m.present.erase(from);
        m.gone.insert(from);
        m.present.insert(m.to);
      }
      m.pending = ClientModel::kNone;
      ++m.acked;
    }
  }

  bool exists(const Path& p) {
    auto r = lookup(p.first, p.second);
    if (!r.ok() && r.status().code() != Code::kNotFound) {
      ADD_FAILURE() << "lookup " << p.second << ": " << r.status().ToString();
    }
    return r.ok();
  }

  // Checks one client's model against the restarted daemon and settles its
  // in-flight operation by what the daemon holds.
  void verify(ClientModel& m, int client) {
    std::set<Path> skip;
    if (m.pending != ClientModel::kNone) skip = {m.from, m.to};
    for (const auto& p : m.present) {
      if (!skip.count(p)) {
        EXPECT_TRUE(exists(p)) << "client " << client << " lost " << p.second;
      }
    }
    for (const auto& p : m.gone) {
      if (!skip.count(p)) {
        EXPECT_FALSE(exists(p)) << "client " << client << " " << p.second << " is back";
      }
    }
    if (m.pending == ClientModel::kCreate) {
      if (exists(m.to)) m.present.insert(m.to);
    } else if (m.pending == ClientModel::kRename) {
      const bool a = exists(m.from), b = exists(m.to);
      EXPECT_NE(a, b) << "client " << client << ": rename " << m.from.second << " -> "
                      << m.to.second << " half done";
      if (b) {
        m.present.erase(m.from);
        m.gone.insert(m.from);
        m.present.insert(m.to);
      }
    }
    m.pending = ClientModel::kNone;
  }
};

TEST_F(MdsCrashTest, AcknowledgedCreatesAndRenamesSurviveSigkill) {
  start();
  ASSERT_TRUE(register_target(0, "tcp://127.0.0.1:1").ok());
  std::vector<uint64_t> dirs;
  for (int c = 0; c < kClients; ++c) {
    auto d = mkdir(kRoot, "c" + std::to_string(c));
    ASSERT_TRUE(d.ok());
    dirs.push_back(d->ino());
  }
  auto shared = mkdir(kRoot, "shared");
  ASSERT_TRUE(shared.ok());

  std::vector<ClientModel> models(kClients);
  std::mt19937 rng(12345);
  uint64_t total_acked = 0;
  for (int round = 0; round < kRounds; ++round) {
    if (round > 0) start();
    for (int c = 0; c < kClients; ++c) verify(models[c], c);
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back(
          [&, c] { client_loop(models[c], dirs[c], shared->ino(), static_cast<uint32_t>(c + 1)); });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(150 + rng() % 400));
    mds_.kill(SIGKILL);
    for (auto& t : clients) t.join();
    ch_.reset();
  }
  start();
  for (int c = 0; c < kClients; ++c) {
    verify(models[c], c);
    total_acked += models[c].acked;
  }
  std::printf("%llu operations acknowledged over %d SIGKILLs\n",
              static_cast<unsigned long long>(total_acked), kRounds);
  EXPECT_GT(total_acked, 50u) << "too few operations acknowledged to mean anything";
  mds_.kill(SIGKILL);
  std::string out;
  EXPECT_EQ(check(&out), 0) << out;
}

}  // namespace
}  // namespace surge::mds::testing
