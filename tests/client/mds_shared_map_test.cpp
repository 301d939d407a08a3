// Two surge-mds serving one file system from one etcd prefix share the
// cluster map (issue 17): data servers that list both heartbeat to both,
// either MDS places regular files on them, one MDS elected by an etcd lease
// marks silent data servers down (and the work moves when it dies), and a
// client writing files carries on through the other MDS when its MDS is
// SIGKILLed; every acknowledged byte reads back through the survivor.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "client/include/surge/client.h"
#include "tests/mds/mds_daemon_fixture.h"

namespace surge::mds::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kDataServers = 3;

// File k's bytes: its own pattern, a size that crosses a 64 KiB boundary.
std::string contents(int k) {
  std::string s(64 * 1024 + 1000 + static_cast<size_t>(k) * 37, '\0');
  for (size_t i = 0; i < s.size(); ++i)
    s[i] = static_cast<char>((i * 131 + static_cast<size_t>(k) * 7) & 0xff);
  return s;
}

class MdsSharedMapTest : public MdsDaemonTest {
 protected:
  void SetUp() override {
    on_etcd_ = true;
    MdsDaemonTest::SetUp();
    // A short lease, so the tests see the leadership move within seconds.
    std::ofstream(config_, std::ios::app) << "[store]\netcd_leader_ttl_s = 2\n";
  }
  void TearDown() override {
    for (auto& o : ods_) o->kill(SIGKILL);
  }

  std::string start_second() {
    b_ = start_peer(second_, "mds-b");
    return b_;
  }
  std::string a_log() const { return tmp_.path() + "/mds.log"; }
  std::string b_log() const { return tmp_.path() + "/mds-b.log"; }

  // Data servers that know both MDS.
  void start_data_servers(const std::string& mds_list) {
    for (int i = 0; i < kDataServers; ++i) {
      auto d = std::make_unique<DaemonProcess>();
      const std::string dir = tmp_.path() + "/ods" + std::to_string(i);
      std::filesystem::create_directories(dir);
      d->start(build_dir() + "/ods/surge-ods",
               {"--data-dir", dir, "--listen", "tcp://127.0.0.1:0", "--mds", mds_list,
                "--cluster-key-file", key_file_, "--log-level", "info", "--pool-1m-buffers", "16"},
               tmp_.path() + "/ods" + std::to_string(i) + ".log");
      ods_.push_back(std::move(d));
    }
  }

  // The cluster map and leader as the MDS at `address` hands them out.
  Result<pb::GetClusterMapReply> map_of(const std::string& address) {
    net::ChannelOptions o;
    o.cluster_key = key_;
    o.call_timeout = std::chrono::milliseconds(5000);
    SURGE_ASSIGN_OR_RETURN(auto ch, net::RpcChannel::Connect(address, o));
    pb::GetClusterMapReply r;
    SURGE_RETURN_IF_ERROR(ch->call<pb::MdsGetClusterMap>(pb::GetClusterMapRequest{}, &r));
    return r;
  }
  static int count_state(const pb::GetClusterMapReply& r, pb::TargetState s) {
    int n = 0;
    for (const auto& t : r.map().targets()) n += t.state() == s;
    return n;
  }
  // Polls until pred holds or `limit` passes; false on timeout.
  static bool wait_for(const std::function<bool()>& pred, std::chrono::milliseconds limit) {
    const auto end = Clock::now() + limit;
    while (Clock::now() < end) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return pred();
  }
  bool all_up_at(const std::string& address) {
    auto r = map_of(address);
    return r.ok() && r->map().targets_size() == kDataServers &&
           count_state(*r, pb::TARGET_UP) == kDataServers;
  }
  // Both MDS see every data server up, and agree on a leader.
  void wait_cluster_ready() {
    ASSERT_TRUE(
        wait_for([&] { return all_up_at(address_) && all_up_at(b_); }, std::chrono::seconds(20)))
        << "the data servers never showed up in both MDS's maps";
    ASSERT_TRUE(wait_for(
        [&] {
          auto ra = map_of(address_), rb = map_of(b_);
          return ra.ok() && rb.ok() && !ra->mds_leader().empty() &&
                 ra->mds_leader() == rb->mds_leader();
        },
        std::chrono::seconds(20)))
        << "the two MDS never agreed on a leader";
  }

  // Which MDS leads (as the first hands it out), and the other.
  struct Roles {
    std::string leader, follower, leader_log;
    DaemonProcess* follower_process = nullptr;
  };
  void roles(Roles* out) {
    auto first = map_of(address_);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    const bool a_leads = first->mds_leader() == address_;
    *out = a_leads ? Roles{address_, b_, a_log(), &second_} : Roles{b_, address_, b_log(), &mds_};
  }

  Result<std::unique_ptr<Client>> connect(
      const std::string& addresses,
      std::chrono::milliseconds mds_timeout = std::chrono::seconds(30)) {
    ClientOptions o;
    o.mds_address = addresses;
    o.mds_timeout = mds_timeout;
    o.cluster_key = key_;
    o.client_name = "shared-map-test";
    return Client::Connect(o);
  }
  static Status write_file(Client& c, const std::string& dir_path, const std::string& name,
                           const std::string& bytes) {
    SURGE_ASSIGN_OR_RETURN(Attr dir, c.resolve(dir_path, Caller{}));
    SURGE_ASSIGN_OR_RETURN(FileRef f,
                           c.create(dir.ino, name, 0644, O_RDWR | O_EXCL, Caller{}, nullptr));
    auto n = c.pwrite(*f, bytes.data(), bytes.size(), 0);
    Status closed = c.close(std::move(f));
    if (!n.ok()) return n.status();
    return closed;
  }
  static Result<std::string> read_file(Client& c, const std::string& path) {
    SURGE_ASSIGN_OR_RETURN(Attr a, c.resolve(path, Caller{}));
    SURGE_ASSIGN_OR_RETURN(FileRef f, c.open(a.ino, O_RDONLY, Caller{}, nullptr));
    std::string out(a.size, '\0');
    auto n = c.pread(*f, out.data(), out.size(), 0);
    Status closed = c.close(std::move(f));
    if (!n.ok()) return n.status();
    SURGE_RETURN_IF_ERROR(closed);
    out.resize(*n);
    return out;
  }
  static size_t count_in(const std::string& path, const std::string& needle) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    size_t n = 0;
    for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
    return n;
  }

  DaemonProcess second_;
  std::string b_;
  std::vector<std::unique_ptr<DaemonProcess>> ods_;
};

TEST_F(MdsSharedMapTest, EitherMdsPlacesFilesOnTheDataServersBothKnow) {
  start();
  start_second();
  start_data_servers(address_ + "," + b_);
  ASSERT_NO_FATAL_FAILURE(wait_cluster_ready());

  auto ca = connect(address_);
  auto cb = connect(b_);
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  ASSERT_TRUE(cb.ok()) << cb.status().ToString();
  const std::string fa = contents(1), fb = contents(2);
  Status wa = write_file(**ca, "/", "through-a", fa);
  ASSERT_TRUE(wa.ok()) << "create and write through the first MDS: " << wa.ToString();
  Status wb = write_file(**cb, "/", "through-b", fb);
  ASSERT_TRUE(wb.ok()) << "create and write through the second MDS: " << wb.ToString();
  // Each read through the other MDS.
  auto ra = read_file(**cb, "/through-a");
  ASSERT_TRUE(ra.ok()) << ra.status().ToString();
  EXPECT_TRUE(*ra == fa) << "the file written through the first MDS reads back wrong";
  auto rb = read_file(**ca, "/through-b");
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  EXPECT_TRUE(*rb == fb) << "the file written through the second MDS reads back wrong";
  // One map: the same version and chains from both.
  auto ma = map_of(address_), mb = map_of(b_);
  ASSERT_TRUE(ma.ok() && mb.ok());
  EXPECT_EQ(ma->map().version(), mb->map().version());
  EXPECT_EQ(ma->map().chains().SerializeAsString(), mb->map().chains().SerializeAsString());
}

TEST_F(MdsSharedMapTest, OnlyTheLeaderMarksDataServersDownAndLeadershipMovesWhenItDies) {
  start();
  start_second();
  start_data_servers(address_ + "," + b_);
  ASSERT_NO_FATAL_FAILURE(wait_cluster_ready());
  auto first = map_of(address_);
  ASSERT_TRUE(first.ok());
  const std::string leader = first->mds_leader();
  ASSERT_TRUE(leader == address_ || leader == b_) << "leader '" << leader << "' is neither MDS";
  const bool a_leads = leader == address_;
  const std::string follower = a_leads ? b_ : address_;
  DaemonProcess& leader_proc = a_leads ? mds_ : second_;
  const std::string leader_log = a_leads ? a_log() : b_log();
  const std::string follower_log = a_leads ? b_log() : a_log();

  // A data server dies while both MDS run: marked down, by the leader alone.
  ods_[2]->kill(SIGKILL);
  ASSERT_TRUE(wait_for(
      [&] {
        auto r = map_of(follower);
        return r.ok() && count_state(*r, pb::TARGET_DOWN) == 1;
      },
      std::chrono::seconds(10)))
      << "the killed data server was never marked down";
  EXPECT_EQ(count_in(leader_log, "marked down"), 1u) << "in " << leader_log;
  EXPECT_EQ(count_in(follower_log, "marked down"), 0u)
      << "the MDS that does not lead marked a data server down";

  // The leader dies: the other MDS takes over within the lease, and the
  // next silent data server is marked down by it.
  const auto killed = Clock::now();
  leader_proc.kill(SIGKILL);
  ASSERT_TRUE(wait_for(
      [&] {
        auto r = map_of(follower);
        return r.ok() && r->mds_leader() == follower;
      },
      std::chrono::seconds(15)))
      << "the surviving MDS never became the leader";
  std::printf("leadership moved %.1f s after the SIGKILL of the leader (lease 2 s)\n",
              std::chrono::duration<double>(Clock::now() - killed).count());
  ods_[0]->kill(SIGKILL);
  ASSERT_TRUE(wait_for(
      [&] {
        auto r = map_of(follower);
        return r.ok() && count_state(*r, pb::TARGET_DOWN) == 2;
      },
      std::chrono::seconds(10)))
      << "the new leader never marked the second killed data server down";
  EXPECT_EQ(count_in(follower_log, "marked down"), 1u) << "in " << follower_log;
}

TEST_F(MdsSharedMapTest, AFileOpenThroughOneMdsOutlivesItsUnlinkThroughTheLeader) {
  start();
  start_second();
  start_data_servers(address_ + "," + b_);
  ASSERT_NO_FATAL_FAILURE(wait_cluster_ready());
  Roles r;
  ASSERT_NO_FATAL_FAILURE(roles(&r));
  const std::string &leader = r.leader, &follower = r.follower, &leader_log = r.leader_log;

  // Held open through the MDS that does not lead (and does not collect).
  auto holder = connect(follower);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  const std::string bytes = contents(5);
  ASSERT_TRUE(write_file(**holder, "/", "held", bytes).ok());
  auto attr = (*holder)->resolve("/held", Caller{});
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  auto f = (*holder)->open(attr->ino, O_RDONLY, Caller{}, nullptr);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  // Unlinked through the leader, whose collector passes every 100 ms with
  // no grace in this configuration.
  auto other = connect(leader);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  ASSERT_TRUE((*other)->unlink("/held").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  std::string got(bytes.size(), '\0');
  auto n = (*holder)->pread(**f, got.data(), got.size(), 0);
  ASSERT_TRUE(n.ok()) << "reading the open, unlinked file: " << n.status().ToString();
  EXPECT_EQ(*n, bytes.size());
  EXPECT_TRUE(got == bytes) << "the open file's data was removed while it was open";
  // Closed: now the leader collects it.
  ASSERT_TRUE((*holder)->close(std::move(*f)).ok());
  EXPECT_TRUE(wait_for([&] { return count_in(leader_log, "orphan collection: 1 removed") == 1; },
                       std::chrono::seconds(15)))
      << "the closed orphan was never collected (see " << leader_log << ")";
}

// Sessions and open files are in etcd (mds/cluster/session_table.h): a
// client whose MDS dies keeps its session through the other one, opens
// included, so a file it holds open is never collected meanwhile. There is
// no grace in this configuration to hide a gap: the collector passes every
// 100 ms from the start.
TEST_F(MdsSharedMapTest, AFileHeldOpenThroughAKilledMdsIsKeptAndItsSessionTakenOver) {
  std::ofstream(config_, std::ios::app) << "[sessions]\nheartbeat_interval_ms = 200\n";
  start();
  start_second();
  start_data_servers(address_ + "," + b_);
  ASSERT_NO_FATAL_FAILURE(wait_cluster_ready());
  Roles r;
  ASSERT_NO_FATAL_FAILURE(roles(&r));
  const std::string &leader = r.leader, &follower = r.follower, &leader_log = r.leader_log;
  DaemonProcess& follower_process = *r.follower_process;

  // Written by a client of its own, whose session ends with it: the holder
  // then holds exactly one open, counted in the store when it is answered
  // (a close is stored by the MDS's next pass, which the MDS killed below
  // might not reach).
  const std::string bytes = contents(6);
  {
    auto writer = connect(follower);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    ASSERT_TRUE(write_file(**writer, "/", "held", bytes).ok());
  }
  // Talks to the MDS that does not lead, and knows the leader as the next.
  auto holder = connect(follower + "," + leader);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  auto attr = (*holder)->resolve("/held", Caller{});
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  auto f = (*holder)->open(attr->ino, O_RDONLY, Caller{}, nullptr);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto other = connect(leader);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  ASSERT_TRUE((*other)->unlink("/held").ok());

  follower_process.kill(SIGKILL);
  // The holder's heartbeats move to the leader, which adopts the session.
  EXPECT_TRUE(wait_for([&] { return count_in(leader_log, "taken over here, 1 open files") >= 1; },
                       std::chrono::seconds(15)))
      << "the leader never took the holder's session over (see " << leader_log << ")";
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // 15 collector passes
  std::string got(bytes.size(), '\0');
  auto n = (*holder)->pread(**f, got.data(), got.size(), 0);
  ASSERT_TRUE(n.ok()) << "reading the open, unlinked file: " << n.status().ToString();
  EXPECT_EQ(*n, bytes.size());
  EXPECT_TRUE(got == bytes) << "the open file's data was removed while it was open";
  EXPECT_EQ(count_in(leader_log, "orphan collection: 1 removed"), 0u);
  // Closed through the leader: now it collects the file.
  ASSERT_TRUE((*holder)->close(std::move(*f)).ok());
  EXPECT_TRUE(wait_for([&] { return count_in(leader_log, "orphan collection: 1 removed") == 1; },
                       std::chrono::seconds(15)))
      << "the closed orphan was never collected (see " << leader_log << ")";
}

// A client and the MDS it talked to both gone: the leader expires the
// session once its stored beat has not moved for the session timeout, and
// collects the file it held open. Not before: the open is in etcd.
TEST_F(MdsSharedMapTest, TheLeaderExpiresTheSessionOfAClientWhoseMdsDied) {
  std::ofstream(config_, std::ios::app)
      << "[sessions]\nheartbeat_interval_ms = 200\ntimeout_ms = 2000\n";
  start();
  start_second();
  start_data_servers(address_ + "," + b_);
  ASSERT_NO_FATAL_FAILURE(wait_cluster_ready());
  Roles r;
  ASSERT_NO_FATAL_FAILURE(roles(&r));
  const std::string &leader = r.leader, &follower = r.follower, &leader_log = r.leader_log;
  DaemonProcess& follower_process = *r.follower_process;

  // Knows only the MDS that dies: its session falls silent with it (and
  // gives up on it after 3 s when the test ends).
  auto holder = connect(follower, std::chrono::seconds(3));
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  ASSERT_TRUE(write_file(**holder, "/", "held", contents(7)).ok());
  auto attr = (*holder)->resolve("/held", Caller{});
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  auto f = (*holder)->open(attr->ino, O_RDONLY, Caller{}, nullptr);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto other = connect(leader);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  ASSERT_TRUE((*other)->unlink("/held").ok());
  follower_process.kill(SIGKILL);

  // Within the timeout of the last beat the leader can have seen, it stays.
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  EXPECT_EQ(count_in(leader_log, "orphan collection: 1 removed"), 0u)
      << "collected while its session could still be alive";
  EXPECT_TRUE(wait_for([&] { return count_in(leader_log, "orphan collection: 1 removed") == 1; },
                       std::chrono::seconds(20)))
      << "the dead client's orphan was never collected (see " << leader_log << ")";
  EXPECT_GE(count_in(leader_log, "silent past 2000 ms: expired"), 1u);
  f->reset();
  holder->reset();
}

TEST_F(MdsSharedMapTest, AWriterCarriesOnWithFileDataWhenItsMdsIsKilled) {
  start();
  start_second();
  start_data_servers(address_ + "," + b_);
  ASSERT_NO_FATAL_FAILURE(wait_cluster_ready());
  auto c = connect(address_ + "," + b_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE((*c)->mkdir("/w", 0755).ok());

  constexpr int kFiles = 40, kKillAfter = 10;
  std::atomic<int> written{0};
  std::string failed;
  std::thread writer([&] {
    for (int k = 0; k < kFiles; ++k) {
      Status st = write_file(**c, "/w", "f" + std::to_string(k), contents(k));
      if (!st.ok()) {
        failed = "file " + std::to_string(k) + ": " + st.ToString();
        return;
      }
      written.fetch_add(1);
    }
  });
  while (written.load() < kKillAfter && failed.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  mds_.kill(SIGKILL);  // the MDS the client talks to: the first of its list
  writer.join();
  ASSERT_TRUE(failed.empty()) << failed;
  ASSERT_EQ(written.load(), kFiles);
  c->reset();

  auto survivor = connect(b_);
  ASSERT_TRUE(survivor.ok()) << survivor.status().ToString();
  for (int k = 0; k < kFiles; ++k) {
    auto got = read_file(**survivor, "/w/f" + std::to_string(k));
    ASSERT_TRUE(got.ok()) << "f" << k << ": " << got.status().ToString();
    EXPECT_TRUE(*got == contents(k))
        << "f" << k << " reads back wrong (" << got->size() << " bytes)";
  }
  survivor->reset();
  second_.kill(SIGKILL);
  std::string out;
  EXPECT_EQ(check(&out), 0) << "namespace checker:\n" << out;
}

}  // namespace
}  // namespace surge::mds::testing
