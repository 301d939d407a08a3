// Peers that never prove the cluster key, against real surge-mds and
// surge-ods processes over raw TCP sockets: nothing larger than the
// handshake is allocated for them, whatever a frame header declares (the
// daemon's resident memory stays put), and connections beyond the limits
// on unauthenticated connections per peer address and in total are refused
// at once with a GoAway(Unavailable), while a client that knows the key is
// still served. The raw peers bind 127.0.0.2, .3, ... so the per-address
// limit applies to them and not to the well-behaved client on 127.0.0.1.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <thread>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "net/cluster_key.h"
#include "net/frame.h"
#include "net/proto/mds_methods.h"
#include "net/proto/ods_methods.h"
#include "net/rpc_channel.h"
#include "tests/net/raw_peer.h"
#include "tests/ods/daemon_process.h"
#include "tests/ods/test_dir.h"

namespace surge::net::testing {
namespace {

using ods::testing::address_of;
using ods::testing::build_dir;
using ods::testing::DaemonProcess;
using ods::testing::TempDir;

uint64_t rss_bytes(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      std::istringstream in(line.substr(6));
      uint64_t kb = 0;
      in >> kb;
      return kb * 1024;
    }
  }
  throw std::runtime_error("no VmRSS for pid " + std::to_string(pid));
}

enum class Daemon { kMds, kOds };

struct Limits {
  uint32_t total = 256;
  uint32_t per_address = 32;
};

class PreauthTest : public ::testing::TestWithParam<Daemon> {
 protected:
  // Starts the daemon with these limits and a handshake deadline far past
  // anything the test waits for (so only the limits close connections).
  void start(Limits limits) {
    key_file_ = dir_.path() + "/cluster.key";
    Status st = generate_cluster_key(key_file_);
    ASSERT_TRUE(st.ok()) << st.ToString();
    key_ = *load_cluster_key(key_file_);
    const std::string config = dir_.path() + "/daemon.toml";
    std::ofstream(config) << "[server]\nhandshake_timeout_ms = 60000\n"
                          << "max_unauthenticated_connections = " << limits.total << "\n"
                          << "max_unauthenticated_per_address = " << limits.per_address << "\n";
    std::vector<std::string> args = {"--config", config, "--data-dir", dir_.path() + "/data",
                                     "--listen", "tcp://127.0.0.1:0", "--cluster-key-file",
                                     key_file_, "--log-level", "info"};
    std::string binary = build_dir() + "/mds/surge-mds";
    if (GetParam() == Daemon::kOds) {
      binary = build_dir() + "/ods/surge-ods";
      args.insert(args.end(), {"--mds", "", "--pool-1m-buffers", "16"});
    }
    address_ = address_of(daemon_.start(binary, args, dir_.path() + "/daemon.log"));
    port_ = static_cast<uint16_t>(std::stoi(address_.substr(address_.rfind(':') + 1)));
  }

  // A client that knows the key connects and gets an answer.
  Status served() {
    ChannelOptions o;
    o.cluster_key = key_;
    o.call_timeout = std::chrono::milliseconds(10000);
    SURGE_ASSIGN_OR_RETURN(auto ch, RpcChannel::Connect(address_, o));
    if (GetParam() == Daemon::kMds) {
      proto::mds::GetClusterMapRequest q;
      proto::mds::GetClusterMapReply a;
      return ch->call<proto::mds::MdsGetClusterMap>(q, &a);
    }
    proto::ods::StatFsRequest q;
    proto::ods::StatFsReply a;
    return ch->call<proto::ods::OdsStatFs>(q, &a);
  }

  // Peers from `from` that connect and say nothing (still in the handshake).
  std::vector<std::unique_ptr<RawPeer>> idle_peers(const std::string& from, int n) {
    std::vector<std::unique_ptr<RawPeer>> v;
    for (int i = 0; i < n; ++i) {
      v.push_back(std::make_unique<RawPeer>(from, port_));
      EXPECT_TRUE(v.back()->ok()) << "raw connect from " << from;
    }
    return v;
  }

  // The daemon refused this connection with a GoAway(Unavailable) naming
  // the limit.
  void expect_refused(RawPeer& p, const std::string& limit) {
    ASSERT_TRUE(p.closed_within(10000)) << "a connection over the limit was not closed";
    auto g = p.goaway();
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(g->first.type, FrameType::kGoAway);
    EXPECT_EQ(static_cast<Code>(g->first.status), Code::kUnavailable);
    EXPECT_NE(g->second.find(limit), std::string::npos) << g->second;
  }

  TempDir dir_{"surge-preauth-test"};
  DaemonProcess daemon_;
  std::string key_file_;
  std::string key_;
  std::string address_;
  uint16_t port_ = 0;
};

TEST_P(PreauthTest, HeadersDeclaringLargeBodiesAllocateNothing) {
  start({/*total=*/256, /*per_address=*/256});
  ASSERT_TRUE(served().ok());
  const uint64_t before = rss_bytes(daemon_.pid());
  // 64 peers, each one header declaring the largest body there is.
  std::vector<std::unique_ptr<RawPeer>> peers;
  for (int i = 0; i < 64; ++i) {
    peers.push_back(std::make_unique<RawPeer>("127.0.0.2", port_));
    ASSERT_TRUE(peers.back()->ok());
    ASSERT_TRUE(peers.back()->send_header(FrameType::kHello, kMaxBodyLength));
  }
  // Each is closed for it (the handshake deadline is a minute away)...
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int open = 0;
  for (auto& p : peers) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!p->closed_within(static_cast<int>(std::max<int64_t>(left.count(), 1)))) ++open;
  }
  EXPECT_EQ(open, 0) << "oversized hellos left open";
  // ...and the daemon holds no more than before, give or take 32 MiB
  // (before the fix each header made it allocate 16 MiB: +1 GiB).
  const uint64_t after = rss_bytes(daemon_.pid());
  EXPECT_LT(after, before + (32u << 20)) << "RSS went from " << (before >> 20) << " MiB to "
                                         << (after >> 20) << " MiB";
  EXPECT_TRUE(served().ok());
}

TEST_P(PreauthTest, PeersOverThePerAddressLimitAreRefused) {
  start({/*total=*/64, /*per_address=*/8});
  auto held = idle_peers("127.0.0.2", 8);
  RawPeer extra("127.0.0.2", port_);
  ASSERT_TRUE(extra.ok());
  expect_refused(extra, "limit per address (8)");
  // Another address is not held up by this one; nor is the client that
  // knows the key, however many times it connects (authenticated
  // connections hold no slot).
  auto other = idle_peers("127.0.0.3", 8);
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(served().ok()) << "connection " << i;
  for (auto& p : held) EXPECT_TRUE(p->still_open());
}

TEST_P(PreauthTest, PeersOverTheTotalLimitAreRefusedUntilSlotsComeBack) {
  start({/*total=*/16, /*per_address=*/8});
  auto a = idle_peers("127.0.0.2", 8);
  auto b = idle_peers("127.0.0.3", 8);
  RawPeer extra("127.0.0.4", port_);
  ASSERT_TRUE(extra.ok());
  expect_refused(extra, "16 unauthenticated connections in total");
  // Peers that give up give their slots back.
  a.clear();
  Status st;
  for (int i = 0; i < 200; ++i) {
    st = served();
    if (st.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(st.ok()) << st.ToString();
}

INSTANTIATE_TEST_SUITE_P(Daemons, PreauthTest, ::testing::Values(Daemon::kMds, Daemon::kOds),
                         [](const auto& info) {
                           return std::string(info.param == Daemon::kMds ? "Mds" : "Ods");
                         });

}  // namespace
}  // namespace surge::net::testing
