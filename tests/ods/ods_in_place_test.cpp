// Writes whose payload a raw client holds back.
//
// The TCP transport runs brief ODS handlers (read, write, stat, statfs) in
// place on its I/O thread when that thread has nothing else in service and
// the request's payload has arrived (net/tcp/tcp_server.cpp). These tests
// check the other half of that promise: a write whose payload stalls is
// served by a worker, so the thread's other connections go on being
// served, and the stalled write still completes once its bytes arrive.
// The daemon runs with one I/O thread, so every connection shares it.
//
// A write stored piece by piece while its payload arrives, that then fails
// (a bad piece), must not take back more than its own extension: another
// writer's acknowledged bytes before its offset stay.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <thread>

#include "net/frame.h"
#include "net/proto/ods_write_pieces.h"
#include "tests/ods/ods_fixture.h"
#include "tests/ods/raw_ods_conn.h"

namespace surge::ods::testing {
namespace {

using std::chrono::milliseconds;

class OdsInPlaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_file_ = make_key(dir_);
    // TCP on loopback whatever the suite's transport: the raw client below
    // speaks the TCP framing.
    std::string line =
        ods_.start(build_dir() + "/ods/surge-ods",
                   {"--data-dir", dir_.path() + "/data", "--listen", "tcp://127.0.0.1:0", "--mds",
                    "", "--cluster-key-file", key_file_, "--log-level", "info", "--io-threads", "1",
                    "--pool-1m-buffers", "8", "--pool-64k-buffers", "16",
                    // The held-back payloads here must outlive a slow
                    // machine's pauses (cutting stalls: ods_stall_test).
                    "--bulk-stall-timeout-ms", "30000"},
                   dir_.path() + "/ods.log");
    address_ = address_of(line);
    ASSERT_FALSE(address_.empty()) << line;
    port_ = static_cast<uint16_t>(std::stoi(address_.substr(address_.rfind(':') + 1)));
  }
  void TearDown() override { ods_.stop(); }

  TempDir dir_;
  std::string key_file_;
  DaemonProcess ods_;
  std::string address_;
  uint16_t port_ = 0;
};

TEST_F(OdsInPlaceTest, StalledWritePayloadDoesNotHoldUpOtherConnections) {
  RawOdsConn stalled("127.0.0.1", port_);
  ASSERT_TRUE(stalled.handshake(key_of(key_file_)).ok());
  const auto data = pattern(256 << 10, 41);
  ASSERT_TRUE(stalled.send_write(1, 1, data, 1000).ok());  // the rest is held back

  // Another client on the same (only) I/O thread: connects, writes, reads.
  // Each call gives up after 5 s, well before the server's own 30 s stall
  // limit would free the thread.
  std::unique_ptr<OdsClient> other;
  try {
    other = std::make_unique<OdsClient>(address_, key_of(key_file_), milliseconds(5000));
  } catch (const std::exception& e) {
    FAIL() << "second client cannot connect while a payload stalls: " << e.what();
  }
  const auto mine = pattern(100000, 42);
  auto w = other->write(2, 0, mine);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  auto r = other->read(2, 0, mine.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, mine);

  // The stalled write completes once its bytes arrive, with the right data.
  ASSERT_TRUE(stalled.send_bytes(data.data() + 1000, data.size() - 1000).ok());
  auto reply = stalled.read_frame();
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->first.type, net::FrameType::kResponse);
  EXPECT_EQ(reply->first.status, 0) << reply->second;
  auto back = other->read(1, 0, data.size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, data);
}

TEST_F(OdsInPlaceTest, FailedPiecewiseWriteKeepsAnotherWritersBytesBeforeItsOffset) {
  // A writes [1 MiB, 1.75 MiB) of an empty object in 256 KiB pieces and
  // holds its third piece back after two are stored; B then writes and is
  // acknowledged for [0, 1 MiB); A's third piece fails its CRC. Undoing A's
  // extension must stop at A's offset, not at the empty object A began on.
  constexpr uint64_t kPiece = pb::kWritePieceBytes;
  constexpr uint64_t kOff = 1 << 20;
  RawOdsConn a("127.0.0.1", port_);
  ASSERT_TRUE(a.handshake(key_of(key_file_)).ok());
  const auto data = pattern(3 * kPiece, 51);
  pb::WriteRequest q;
  q.set_object_id(7);
  q.set_offset(kOff);
  q.set_length(data.size());
  pb::set_piece_crcs(q, data.data(), data.size());
  q.set_piece_crc32c(2, q.piece_crc32c(2) ^ 1);
  ASSERT_TRUE(a.send_write(1, q, data, 2 * kPiece).ok());

  OdsClient b(address_, key_of(key_file_), milliseconds(5000));
  // A's two pieces are stored while its third is awaited.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  uint64_t size = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    auto st = b.stat(7);
    if (st.ok() && (size = *st) == kOff + 2 * kPiece) break;
    std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_EQ(size, kOff + 2 * kPiece) << "A's first two pieces were not stored in time";
  const auto mine = pattern(kOff, 52);
  auto w = b.write(7, 0, mine);
  ASSERT_TRUE(w.ok()) << w.status().ToString();

  ASSERT_TRUE(a.send_bytes(data.data() + 2 * kPiece, kPiece).ok());
  auto reply = a.read_frame();
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->first.status, static_cast<uint16_t>(Code::kCorruption)) << reply->second;

  auto back = b.read(7, 0, kOff);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, mine) << "B's acknowledged write was cut";
  auto st = b.stat(7);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(*st, kOff) << "A's own extension is undone, down to its offset";
}

}  // namespace
}  // namespace surge::ods::testing
