// Peers that stall next to one that behaves (issue 13, "Hostile peers").
//
// Authenticated raw peers declare 8 MiB writes and never send the payload
// (or stop halfway): between them they take every IO buffer unit of a real
// surge-ods, and one more waits for units. A well-behaved client
// (RpcChannel, with a client's 10 s IO timeout) writes and reads on the
// same server meanwhile: every one of its calls must succeed, which needs
// the stalled peers cut off and their units given back well inside its
// timeout (ServerOptions::bulk_stall_timeout, 3 s by default; it was a
// fixed 30 s, so the good client's first write failed at 10 s). Afterwards
// every stalled peer is closed, the server's log names each one with its
// object, and no unit is left held.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/loopback.h"
#include "tests/ods/ods_fixture.h"
#include "tests/ods/raw_ods_conn.h"

namespace surge::ods::testing {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kDeclared = 8 << 20;  // what each stalled peer says it writes
constexpr int kUnits = 32;               // 1 MiB buffers: four such writes take them all

class OdsStallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_file_ = make_key(dir_);
    metrics_port_ = surge::test::free_port();
    // TCP on loopback whatever the suite's transport: the raw peers speak
    // the TCP framing. The stall timeout is the default one.
    std::string line = ods_.start(
        build_dir() + "/ods/surge-ods",
        {"--data-dir", dir_.path() + "/data", "--listen", "tcp://127.0.0.1:0", "--mds", "",
         "--cluster-key-file", key_file_, "--log-level", "info", "--pool-1m-buffers",
         std::to_string(kUnits), "--pool-64k-buffers", "64", "--metrics-listen",
         "127.0.0.1:" + std::to_string(metrics_port_)},
        dir_.path() + "/ods.log");
    address_ = address_of(line);
    ASSERT_FALSE(address_.empty()) << line;
    port_ = static_cast<uint16_t>(std::stoi(address_.substr(address_.rfind(':') + 1)));
  }
  void TearDown() override { ods_.stop(); }

  // A gauge of the server's /metrics page; -1 when it is not there.
  double gauge(const std::string& name) {
    page_ = surge::test::http_get(metrics_port_, "/metrics");
    const std::string key = "\n" + name + " ";
    auto p = page_.find(key);
    if (p == std::string::npos) return -1;
    return std::stod(page_.substr(p + key.size()));
  }

  // Polls (every 10 ms, `polls` times) until ok() holds.
  template <typename F>
  static bool eventually(F&& ok, int polls = 3000) {
    for (int i = 0; i < polls; ++i) {
      if (ok()) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return false;
  }

  // The server's log has a line naming both.
  bool logged(const std::string& a, const std::string& b) const {
    return eventually(
        [&] {
          std::ifstream in(dir_.path() + "/ods.log");
          std::string line;
          while (std::getline(in, line)) {
            if (line.find(a) != std::string::npos && line.find(b) != std::string::npos) return true;
          }
          return false;
        },
        500);
  }

  // A peer that authenticates and declares a write of kDeclared bytes to
  // `object`, sending only `sent` of them.
  std::unique_ptr<RawOdsConn> stalled_writer(uint64_t object, size_t sent) {
    auto c = std::make_unique<RawOdsConn>("127.0.0.1", port_);
    Status st = c->handshake(key_of(key_file_));
    EXPECT_TRUE(st.ok()) << st.ToString();
    st = c->send_write(1, object, declared_, sent);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return c;
  }

  TempDir dir_;
  std::string key_file_;
  DaemonProcess ods_;
  std::string address_;
  uint16_t port_ = 0;
  uint16_t metrics_port_ = 0;
  std::string page_;
  const std::vector<std::byte> declared_ = pattern(kDeclared, 7);
};

TEST_F(OdsStallTest, PeersThatDeclareWritesAndSendNothingDoNotStarveAWellBehavedClient) {
  constexpr int kStalled = 5;
  std::vector<std::unique_ptr<RawOdsConn>> stalled;
  for (int i = 0; i < kStalled; ++i) stalled.push_back(stalled_writer(100 + i, 0));
  // Four hold every unit; the fifth waits for units.
  ASSERT_TRUE(eventually([&] {
    return gauge("surge_ods_io_buffers_in_use") == kUnits &&
           gauge("surge_ods_io_buffer_waiters") >= 1;
  })) << "the stalled peers never took the pool:\n"
      << page_;

  // The well-behaved client, side by side with them: a full-size write
  // first (it waits for units the stalled peers hold), then smaller ones,
  // each read back.
  OdsClient good(address_, key_of(key_file_), milliseconds(10000));
  const size_t sizes[] = {kDeclared, 1 << 20, 100000};
  for (int i = 0; i < 3; ++i) {
    const auto data = pattern(sizes[i], 60 + i);
    auto w = good.write(1 + i, 0, data);
    ASSERT_TRUE(w.ok()) << "write " << i << " next to stalled peers: " << w.status().ToString();
    auto r = good.read(1 + i, 0, data.size());
    ASSERT_TRUE(r.ok()) << "read " << i << " next to stalled peers: " << r.status().ToString();
    EXPECT_EQ(*r, data);
  }

  // Every stalled peer is cut off, named with its object in the log, and
  // nothing it held is left held.
  for (int i = 0; i < kStalled; ++i) {
    Status st = stalled[i]->wait_closed(milliseconds(60000));
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(logged(stalled[i]->peer(), "object " + std::to_string(100 + i)))
        << "no log line names " << stalled[i]->peer() << " and object " << 100 + i;
  }
  EXPECT_TRUE(eventually([&] { return gauge("surge_ods_io_buffers_in_use") == 0; })) << page_;
  // The stalled writes stored nothing.
  for (int i = 0; i < kStalled; ++i) {
    EXPECT_EQ(good.stat(100 + i).status().code(), Code::kNotFound) << "object " << 100 + i;
  }
}

TEST_F(OdsStallTest, PayloadsThatStopHalfwayAreCutOffAndTheirUnitsGoBack) {
  // Four peers send half of their 8 MiB and stop: the pool is theirs.
  std::vector<std::unique_ptr<RawOdsConn>> halfway;
  for (int i = 0; i < 4; ++i) halfway.push_back(stalled_writer(200 + i, kDeclared / 2));
  ASSERT_TRUE(eventually([&] { return gauge("surge_ods_io_buffers_in_use") == kUnits; }))
      << page_;
  OdsClient good(address_, key_of(key_file_), milliseconds(10000));
  const auto data = pattern(1 << 20, 9);
  auto w = good.write(1, 0, data);
  ASSERT_TRUE(w.ok()) << "write next to peers stalled mid-payload: " << w.status().ToString();
  for (int i = 0; i < 4; ++i) {
    Status st = halfway[i]->wait_closed(milliseconds(60000));
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(logged(halfway[i]->peer(), "object " + std::to_string(200 + i)));
  }
  EXPECT_TRUE(eventually([&] { return gauge("surge_ods_io_buffers_in_use") == 0; })) << page_;
}

}  // namespace
}  // namespace surge::ods::testing
