// Clients that a busy server refuses in the handshake, against real
// surge-mds and surge-ods processes: a server at its limit of
// unauthenticated connections from one address refuses more with a
// GoAway(Unavailable) (net/preauth_limits.h), and a client that knows the
// key retries such a refusal with backoff until its connect deadline
// rather than fail (many processes of one host starting at once: ranks of
// an MPI job). Idle raw peers from the client's own address, 127.0.0.1,
// hold the slots.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "net/cluster_key.h"
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

enum class Daemon { kMds, kOds };

class HandshakeRetryTest : public ::testing::TestWithParam<Daemon> {
 protected:
  // The daemon with this limit per address; the handshake deadline is far
  // past anything the test waits for, so only the test frees slots.
  void start(uint32_t per_address) {
    key_file_ = dir_.path() + "/cluster.key";
    Status st = generate_cluster_key(key_file_);
    ASSERT_TRUE(st.ok()) << st.ToString();
    key_ = *load_cluster_key(key_file_);
    const std::string config = dir_.path() + "/daemon.toml";
    std::ofstream(config) << "[server]\nhandshake_timeout_ms = 60000\n"
                          << "max_unauthenticated_per_address = " << per_address << "\n";
    std::vector<std::string> args = {"--config", config, "--data-dir", dir_.path() + "/data",
                                     "--listen", "tcp://127.0.0.1:0", "--cluster-key-file",
                                     key_file_, "--log-level", "info"};
    std::string binary = build_dir() + "/mds/surge-mds";
    if (GetParam() == Daemon::kOds) {
      binary = build_dir() + "/ods/surge-ods";
      args.insert(args.end(), {"--mds", "", "--pool-1m-buffers", "16"});
    }
    log_ = dir_.path() + "/daemon.log";
    address_ = address_of(daemon_.start(binary, args, log_));
    port_ = static_cast<uint16_t>(std::stoi(address_.substr(address_.rfind(':') + 1)));
  }

  // Connects (by default the clients' 3 s connect timeout) and makes one call.
  Status served(std::chrono::milliseconds connect_timeout = std::chrono::milliseconds(3000)) {
    ChannelOptions o;
    o.cluster_key = key_;
    o.connect_timeout = connect_timeout;
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

  bool logged(const std::string& what) const {
    std::ifstream f(log_);
    std::string line;
    while (std::getline(f, line)) {
      if (line.find(what) != std::string::npos) return true;
    }
    return false;
  }

  TempDir dir_{"surge-handshake-retry-test"};
  DaemonProcess daemon_;
  std::string key_file_;
  std::string key_;
  std::string log_;
  std::string address_;
  uint16_t port_ = 0;
};

TEST_P(HandshakeRetryTest, ARefusedClientRetriesUntilASlotComesBack) {
  start(/*per_address=*/4);
  std::vector<std::unique_ptr<RawPeer>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<RawPeer>("127.0.0.1", port_));
    ASSERT_TRUE(held.back()->ok());
  }
  Status st = Status::Internal("the client thread did not run");
  std::atomic<bool> done{false};
  std::thread client([&] {
    st = served();
    done = true;
  });
  // Refused while the slots are held (the daemon says so in its log)...
  for (int i = 0; i < 400 && !logged("refusing connection from tcp://127.0.0.1"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const bool was_refused = logged("refusing connection from tcp://127.0.0.1");
  const bool gave_up_early = done.load();
  // ...and served once they come back, within its connect timeout.
  held.clear();
  client.join();
  EXPECT_TRUE(was_refused) << "the daemon never refused the client: the test proves nothing";
  EXPECT_FALSE(gave_up_early) << st.ToString();
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST_P(HandshakeRetryTest, RefusedUntilTheDeadlineFailsSayingSo) {
  start(/*per_address=*/1);
  RawPeer holder("127.0.0.1", port_);
  ASSERT_TRUE(holder.ok());
  // However the deadline falls (between tries, or during the last one),
  // the refusals are the reason given, with the address.
  for (int i = 0; i < 5; ++i) {
    Status st = served(std::chrono::milliseconds(300));
    EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
    EXPECT_NE(st.ToString().find(address_), std::string::npos) << st.ToString();
    EXPECT_NE(st.ToString().find("refused"), std::string::npos) << st.ToString();
  }
}

TEST_P(HandshakeRetryTest, ManyConnectionsFromOneAddressAtOnceAreAllServed) {
  start(/*per_address=*/32);  // the default
  constexpr int kClients = 128;
  std::vector<Status> results(kClients);
  std::atomic<int> ready{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < kClients) std::this_thread::yield();
      results[i] = served();
    });
  }
  for (auto& t : clients) t.join();
  int failed = 0;
  std::string first;
  for (const Status& s : results) {
    if (s.ok()) continue;
    if (failed++ == 0) first = s.ToString();
  }
  EXPECT_EQ(failed, 0) << "of " << kClients << " clients; the first: " << first;
}

INSTANTIATE_TEST_SUITE_P(Daemons, HandshakeRetryTest, ::testing::Values(Daemon::kMds, Daemon::kOds),
                         [](const auto& info) {
                           return std::string(info.param == Daemon::kMds ? "Mds" : "Ods");
                         });

}  // namespace
}  // namespace surge::net::testing
