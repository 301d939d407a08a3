// surge-ods with a real surge-mds (both as processes, over the net layer):
// registration and the kept target id, a silent data server marked DOWN,
// re-registration after an ODS restart and after an MDS restart (serving
// clients all the while), and orphan collection removing the objects of
// an unlinked file from the data server, and an MDS that never answers
// delaying no heartbeats to the others.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "net/proto/mds_methods.h"
#include "tests/ods/ods_fixture.h"

namespace surge::ods::testing {
namespace {

namespace mpb = surge::proto::mds;
using namespace std::chrono_literals;

constexpr uint64_t kRootIno = 1;

class OdsMdsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_file_ = make_key(dir_);
    key_ = key_of(key_file_);
    mds_config_ = dir_.path() + "/mds.toml";
    // One copy on plain targets (format 1): the object of a file is keyed by
    // its ino on the one data server, which is what these tests look for.
    std::ofstream(mds_config_) << "[targets]\nheartbeat_interval_ms = 100\ntimeout_ms = 600\n"
                               << "[orphans]\ninterval_ms = 100\nstartup_grace_ms = 0\n"
                               << "[namespace]\ndefault_replicas = 0\n";
    ods_config_ = dir_.path() + "/ods.toml";
    std::ofstream(ods_config_) << "[mds]\nretry_ms = 100\n";
    start_mds(listen_address());
  }

  void start_mds(const std::string& listen) {
    std::string line = mds_.start(build_dir() + "/mds/surge-mds",
                                  {"--config", mds_config_, "--data-dir", dir_.path() + "/mds", "--listen", listen,
                                   "--cluster-key-file", key_file_, "--log-level", "info"},
                                  dir_.path() + "/mds.log");
    mds_address_ = address_of(line);
    net::ChannelOptions o;
    o.cluster_key = key_;
    auto ch = net::RpcChannel::Connect(mds_address_, o);
    if (!ch.ok()) throw std::runtime_error(ch.status().ToString());
    mds_ch_ = *ch;
  }

  // Starts surge-ods registered with the MDS; returns the target id it
  // printed and sets ods_address_.
  // mds_list: every MDS it is told of (default: the one MDS).
  uint32_t start_ods_with_mds(const std::string& mds_list = "") {
    std::string line = ods_.start(
        build_dir() + "/ods/surge-ods",
        {"--config", ods_config_, "--data-dir", dir_.path() + "/ods", "--listen", listen_address(),
         "--mds", mds_list.empty() ? mds_address_ : mds_list, "--cluster-key-file", key_file_,
         "--pool-1m-buffers", "8", "--max-io-bytes", "4194304"},
        dir_.path() + "/ods.log");
    ods_address_ = address_of(line);
    auto p = line.find(" target ");
    return p == std::string::npos ? 0 : static_cast<uint32_t>(std::stoul(line.substr(p + 8)));
  }

  Result<mpb::TargetInfo> target(uint32_t id) {
    mpb::GetClusterMapRequest q;
    mpb::GetClusterMapReply a;
    SURGE_RETURN_IF_ERROR(mds_ch_->call<mpb::MdsGetClusterMap>(q, &a));
    for (const auto& t : a.map().targets()) {
      if (t.target_id() == id) return t;
    }
    return Status::NotFound("target " + std::to_string(id) + " not in the cluster map");
  }

  // Polls the cluster map until target id is in `state` (bounded).
  bool wait_state(uint32_t id, mpb::TargetState state, std::chrono::milliseconds limit = 30s) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      auto t = target(id);
      if (t.ok() && t->state() == state) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }

  std::string ods_log() { return file_text(dir_.path() + "/ods.log"); }
  std::string mds_log() { return file_text(dir_.path() + "/mds.log"); }
  static std::string file_text(const std::string& path) {
    std::ifstream in(path);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  TempDir dir_;
  std::string key_file_, key_, mds_config_, ods_config_, mds_address_, ods_address_;
  DaemonProcess mds_, ods_;
  std::shared_ptr<net::RpcChannel> mds_ch_;
};

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

TEST_F(OdsMdsTest, RegistersAndKeepsItsTargetIdAcrossRestarts) {
  uint32_t id = start_ods_with_mds();
  ASSERT_NE(id, 0u) << "surge-ods did not print an assigned target id";
  auto t = target(id);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->state(), mpb::TARGET_UP);
  EXPECT_EQ(t->address(), ods_address_);
  EXPECT_GT(t->capacity_bytes(), 0u);
  std::ifstream idf(dir_.path() + "/ods/target_id");
  uint32_t stored = 0;
  idf >> stored;
  EXPECT_EQ(stored, id);

  int st = ods_.stop();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  EXPECT_EQ(start_ods_with_mds(), id) << "a restarted data server keeps its target id";
}

TEST_F(OdsMdsTest, SilentDataServerIsMarkedDownAndComesBackUp) {
  uint32_t id = start_ods_with_mds();
  ASSERT_NE(id, 0u);
  ASSERT_TRUE(wait_state(id, mpb::TARGET_UP));
  ods_.kill(SIGKILL);
  EXPECT_TRUE(wait_state(id, mpb::TARGET_DOWN)) << "target " << id << " still not DOWN after 30 s of silence";
  EXPECT_EQ(start_ods_with_mds(), id);
  EXPECT_TRUE(wait_state(id, mpb::TARGET_UP)) << "restarted target " << id << " not UP again";
}

TEST_F(OdsMdsTest, ReRegistersAfterAnMdsRestartAndServesMeanwhile) {
  uint32_t id = start_ods_with_mds();
  ASSERT_NE(id, 0u);
  const std::string same_port = mds_address_;
  mds_ch_.reset();
  mds_.kill(SIGKILL);

  // The MDS is away: clients are still served.
  OdsClient cl(ods_address_, key_);
  auto data = pattern(300000, 1);
  ASSERT_TRUE(cl.write(42, 0, data, true).ok());
  std::this_thread::sleep_for(500ms);  // a few failed heartbeats
  auto r = cl.read(42, 0, data.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, data);

  start_mds(same_port);
  const uint64_t restarted_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  // Registered again and heartbeating: the heartbeat time moves past the
  // restart and the target stays UP well past the MDS's timeout.
  bool fresh = false;
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!fresh && std::chrono::steady_clock::now() < deadline) {
    auto t = target(id);
    fresh = t.ok() && t->state() == mpb::TARGET_UP && t->last_heartbeat_ms() > restarted_ms + 200;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(fresh) << "no heartbeat from target " << id << " after the MDS restart";
  std::this_thread::sleep_for(1s);  // > timeout_ms
  auto t = target(id);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->state(), mpb::TARGET_UP);
  EXPECT_GE(count_of(ods_log(), "registered with the MDS"), 2u) << ods_log();
}

TEST_F(OdsMdsTest, OrphanCollectionRemovesTheObjectsOfAnUnlinkedFile) {
  uint32_t id = start_ods_with_mds();
  ASSERT_NE(id, 0u);
  ASSERT_TRUE(wait_state(id, mpb::TARGET_UP));
  mpb::CreateRequest cq;
  cq.mutable_cred();
  cq.set_parent(kRootIno);
  cq.set_name("doomed");
  cq.set_mode(0644);
  cq.set_exclusive(true);
  mpb::EntryReply ca;
  Status st = mds_ch_->call<mpb::MdsCreate>(cq, &ca);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const uint64_t ino = ca.attr().ino();
  ASSERT_EQ(ca.attr().layout().targets_size(), 1);
  ASSERT_EQ(ca.attr().layout().targets(0), id);

  OdsClient cl(ods_address_, key_);
  ASSERT_TRUE(cl.write(ino, 0, pattern(200000, 2), true).ok());
  ASSERT_TRUE(cl.stat(ino).ok());
  // An unrelated object must survive the collection.
  ASSERT_TRUE(cl.write(ino + 1000, 0, pattern(10, 3)).ok());

  mpb::UnlinkRequest uq;
  uq.mutable_cred();
  uq.set_parent(kRootIno);
  uq.set_name("doomed");
  mpb::UnlinkReply ua;
  ASSERT_TRUE(mds_ch_->call<mpb::MdsUnlink>(uq, &ua).ok());

  bool gone = false;
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!gone && std::chrono::steady_clock::now() < deadline) {
    gone = cl.stat(ino).status().code() == Code::kNotFound;
    if (!gone) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(gone) << "object " << ino << " of the unlinked file is still on the data server after 30 s";
  EXPECT_TRUE(cl.stat(ino + 1000).ok());
}

}  // namespace
}  // namespace surge::ods::testing

namespace surge::ods::testing {
namespace {

// A TCP port that takes connections (into the kernel's queue) and never
// answers: an MDS host that is there but drops everything.
class SilentListener {
 public:
  SilentListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        ::listen(fd_, 1) != 0 || ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      throw std::runtime_error("silent listener: socket setup failed");
    }
    address_ = "tcp://127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  }
  ~SilentListener() { ::close(fd_); }
  const std::string& address() const { return address_; }

 private:
  int fd_ = -1;
  std::string address_;
};

// Each call to the silent MDS waits out its 3 s timeout; the real MDS
// must keep hearing heartbeats every 100 ms all the while.
TEST_F(OdsMdsTest, AnMdsThatNeverAnswersDelaysNoHeartbeatsToTheOthers) {
  // A timeout of 2 s: well under the 3 s a call to the silent MDS takes,
  // well over a heartbeat late on a loaded, sanitized build.
  mds_ch_.reset();
  mds_.stop();
  std::ofstream(mds_config_) << "[targets]\nheartbeat_interval_ms = 100\ntimeout_ms = 2000\n"
                             << "[namespace]\ndefault_replicas = 0\n";
  start_mds(listen_address());
  SilentListener silent;
  uint32_t id = start_ods_with_mds(mds_address_ + "," + silent.address());
  ASSERT_NE(id, 0u);
  ASSERT_TRUE(wait_state(id, mpb::TARGET_UP));
  // Registration at start tried the silent MDS once (3 s): settle first.
  std::this_thread::sleep_for(1s);
  ASSERT_TRUE(wait_state(id, mpb::TARGET_UP));
  const size_t downs_before = count_of(mds_log(), "marked down");
  std::this_thread::sleep_for(7s);  // two calls to the silent MDS time out
  EXPECT_EQ(count_of(mds_log(), "marked down"), downs_before)
      << "the real MDS stopped hearing heartbeats while the silent one was called:\n"
      << mds_log();
  auto t = target(id);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->state(), mpb::TARGET_UP);
  EXPECT_GE(count_of(ods_log(), silent.address()), 1u) << "the silent MDS was never tried";
}

}  // namespace
}  // namespace surge::ods::testing
