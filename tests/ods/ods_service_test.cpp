// surge-ods over the net layer: a real daemon process, real sockets (TCP
// here; SURGE_NET_TRANSPORT=rdma in the VM). Byte-for-byte writes and
// reads of many sizes and offsets, concurrent clients on one object and on
// many, every other method, and bad requests that must get error replies
// while the server keeps serving.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "tests/common/loopback.h"
#include "tests/common/memory_bound.h"
#include "tests/ods/ods_fixture.h"

namespace surge::ods::testing {
namespace {

class OdsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_file_ = make_key(dir_);
    address_ = start_ods(ods_, dir_.path() + "/data", key_file_, dir_.path() + "/ods.log");
    ASSERT_FALSE(address_.empty());
    client_ = std::make_unique<OdsClient>(address_, key_of(key_file_));
  }
  void TearDown() override {
    client_.reset();
    // A clean stop: SIGTERM and exit status 0.
    int status = ods_.stop();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "surge-ods exit status " << status;
  }

  TempDir dir_;
  std::string key_file_;
  DaemonProcess ods_;
  std::string address_;
  std::unique_ptr<OdsClient> client_;
};

TEST_F(OdsServiceTest, WritesAndReadsOfManySizesAndOffsetsRoundTrip) {
  const uint64_t sizes[] = {1, 100, 4095, 4096, 4097, 65535, 65536, 65537, (1 << 20) - 1, 1 << 20, (1 << 20) + 1,
                            3 * (1 << 20) + 123};
  const uint64_t offsets[] = {0, 1, 4095, 4096, 65536 + 7, (1 << 20) + 4096};
  uint64_t id = 100;
  uint32_t seed = 1;
  for (uint64_t size : sizes) {
    for (uint64_t off : offsets) {
      ++id;
      auto data = pattern(size, ++seed);
      auto w = client_->write(id, off, data);
      ASSERT_TRUE(w.ok()) << "size " << size << " off " << off << ": " << w.status().ToString();
      EXPECT_EQ(*w, off + size);
      auto r = client_->read(id, off, size);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_EQ(*r, data) << "size " << size << " off " << off;
      // The bytes before the write are a hole of zeros; past the end is short.
      if (off > 0) {
        auto h = client_->read(id, 0, off);
        ASSERT_TRUE(h.ok());
        EXPECT_EQ(*h, std::vector<std::byte>(off, std::byte{0}));
      }
      auto tail = client_->read(id, off + size - 1, 4096);
      ASSERT_TRUE(tail.ok());
      EXPECT_EQ(tail->size(), 1u);
    }
  }
}

TEST_F(OdsServiceTest, ConcurrentClientsOnOneObjectKeepEveryByte) {
  // Unaligned neighbouring ranges, so clients share blocks and their CRCs.
  constexpr int kClients = 4, kWrites = 40;
  constexpr uint64_t kPiece = 10007;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  std::string key = key_of(key_file_);
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      OdsClient cl(address_, key);
      for (int i = 0; i < kWrites; ++i) {
        uint64_t slot = static_cast<uint64_t>(i * kClients + c);
        auto d = pattern(kPiece, static_cast<uint32_t>(slot + 1));
        if (!cl.write(7, slot * kPiece, d).ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  auto all = client_->read(7, 0, kClients * kWrites * kPiece);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), kClients * kWrites * kPiece);
  for (uint64_t slot = 0; slot < kClients * kWrites; ++slot) {
    auto d = pattern(kPiece, static_cast<uint32_t>(slot + 1));
    ASSERT_TRUE(std::equal(d.begin(), d.end(), all->begin() + static_cast<long>(slot * kPiece))) << slot;
  }
}

TEST_F(OdsServiceTest, ConcurrentClientsOnManyObjects) {
  constexpr int kClients = 4, kObjects = 12;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  std::string key = key_of(key_file_);
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      OdsClient cl(address_, key);
      for (int o = 0; o < kObjects; ++o) {
        uint64_t id = 1000 + static_cast<uint64_t>(c * kObjects + o);
        auto d = pattern(200000 + static_cast<size_t>(o) * 777, static_cast<uint32_t>(id));
        if (!cl.write(id, 333, d).ok()) ++failures;
        auto r = cl.read(id, 333, d.size());
        if (!r.ok() || *r != d) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// More large writes at once than the pool holds (16 x 1 MiB; each 8 MiB
// write needs 8): they queue for buffers and all complete, and the
// daemon's memory stays near the pool's size rather than the offered load.
TEST_F(OdsServiceTest, LoadBeyondThePoolWaitsAndCompletesWithBoundedMemory) {
  constexpr int kClients = 8, kWrites = 3;
  constexpr size_t kSize = 8 << 20;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  std::string key = key_of(key_file_);
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      OdsClient cl(address_, key);
      auto d = pattern(kSize, static_cast<uint32_t>(c + 1));
      for (int i = 0; i < kWrites; ++i) {
        auto w = cl.write(2000 + static_cast<uint64_t>(c), static_cast<uint64_t>(i) * kSize, d);
        if (!w.ok()) {
          ADD_FAILURE() << w.status().ToString();
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  for (int c = 0; c < kClients; ++c) {
    auto d = pattern(kSize, static_cast<uint32_t>(c + 1));
    auto r = client_->read(2000 + static_cast<uint64_t>(c), (kWrites - 1) * kSize, kSize);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(*r, d);
  }
  // 8 clients x 8 MiB offered; the server held at most its pool (16 MiB +
  // 4 MiB + 2 MiB) plus code and heap. The peak resident size says so
  // (widened in sanitized builds: tests/common/memory_bound.h).
  std::ifstream status("/proc/" + std::to_string(ods_.pid()) + "/status");
  std::string line;
  uint64_t hwm_kb = 0;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) hwm_kb = std::stoull(line.substr(6));
  }
  ASSERT_GT(hwm_kb, 0u);
  EXPECT_LT(hwm_kb, surge::test::sanitizer_memory_kib(50 * 1024))
      << "surge-ods peak RSS " << hwm_kb << " KiB";
  RecordProperty("surge_ods_peak_rss_kib", std::to_string(hwm_kb));
}

TEST_F(OdsServiceTest, TruncateStatRemoveSyncAndStatFs) {
  auto d = pattern(100000, 3);
  ASSERT_TRUE(client_->write(5, 0, d).ok());
  EXPECT_EQ(*client_->stat(5), 100000u);
  pb::TruncateRequest tq;
  tq.set_object_id(5);
  tq.set_size(5000);
  pb::TruncateReply ta;
  ASSERT_TRUE(client_->channel().call<pb::OdsTruncate>(tq, &ta).ok());
  EXPECT_EQ(*client_->stat(5), 5000u);
  auto r = client_->read(5, 0, 100000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, std::vector<std::byte>(d.begin(), d.begin() + 5000));
  EXPECT_TRUE(client_->sync({5}).ok());
  EXPECT_TRUE(client_->sync({}).ok());

  pb::StatFsRequest fq;
  pb::StatFsReply fa;
  ASSERT_TRUE(client_->channel().call<pb::OdsStatFs>(fq, &fa).ok());
  EXPECT_EQ(fa.objects(), 1u);
  EXPECT_GT(fa.capacity_bytes(), 0u);

  pb::RemoveRequest rq;
  rq.set_object_id(5);
  pb::RemoveReply ra;
  ASSERT_TRUE(client_->channel().call<pb::OdsRemove>(rq, &ra).ok());
  EXPECT_TRUE(ra.existed());
  ASSERT_TRUE(client_->channel().call<pb::OdsRemove>(rq, &ra).ok());  // idempotent
  EXPECT_FALSE(ra.existed());
  EXPECT_EQ(client_->stat(5).status().code(), Code::kNotFound);
}

TEST_F(OdsServiceTest, BadRequestsGetErrorRepliesAndTheServerKeepsServing) {
  auto d = pattern(8192, 4);
  auto call_write = [&](pb::WriteRequest q, std::vector<net::BulkRegion> regions) {
    pb::WriteReply a;
    return client_->channel().call<pb::OdsWrite>(q, &a, regions);
  };
  pb::WriteRequest good;
  good.set_object_id(9);
  good.set_offset(0);
  good.set_length(d.size());
  good.set_crc32c(surge::crc32c(d.data(), d.size()));
  net::BulkRegion pull{d.data(), d.size(), net::BulkAccess::kServerPull};

  pb::WriteRequest q = good;
  q.set_object_id(0);
  EXPECT_EQ(call_write(q, {pull}).code(), Code::kInvalidArgument) << "object id 0";
  q = good;
  q.set_length(d.size() - 1);
  EXPECT_EQ(call_write(q, {pull}).code(), Code::kInvalidArgument) << "length != bulk length";
  EXPECT_EQ(call_write(good, {}).code(), Code::kInvalidArgument) << "no bulk region";
  EXPECT_EQ(call_write(good, {pull, pull}).code(), Code::kInvalidArgument) << "two bulk regions";
  net::BulkRegion push{d.data(), d.size(), net::BulkAccess::kServerPush};
  EXPECT_EQ(call_write(good, {push}).code(), Code::kInvalidArgument) << "wrong access kind";
  q = good;
  q.set_offset(~uint64_t{0} - 100);
  EXPECT_EQ(call_write(q, {pull}).code(), Code::kInvalidArgument) << "past the maximum object size";
  q = good;
  q.set_crc32c(good.crc32c() ^ 1);
  EXPECT_EQ(call_write(q, {pull}).code(), Code::kCorruption) << "wrong CRC";
  EXPECT_EQ(client_->stat(9).status().code(), Code::kNotFound) << "a write with a bad CRC stored nothing";
  std::vector<std::byte> big(9 << 20);
  q = good;
  q.set_length(big.size());
  q.set_crc32c(surge::crc32c(big.data(), big.size()));
  EXPECT_EQ(call_write(q, {{big.data(), big.size(), net::BulkAccess::kServerPull}}).code(), Code::kInvalidArgument)
      << "over max_io_bytes";

  // Reads: region shorter than the length, wrong access, object 0.
  std::vector<std::byte> buf(4096);
  pb::ReadRequest rq;
  rq.set_object_id(9);
  rq.set_length(8192);
  pb::ReadReply ra;
  net::BulkRegion small{buf.data(), buf.size(), net::BulkAccess::kServerPush};
  EXPECT_EQ(client_->channel().call<pb::OdsRead>(rq, &ra, {&small, 1}).code(), Code::kInvalidArgument);
  rq.set_length(4096);
  net::BulkRegion wrong{buf.data(), buf.size(), net::BulkAccess::kServerPull};
  EXPECT_EQ(client_->channel().call<pb::OdsRead>(rq, &ra, {&wrong, 1}).code(), Code::kInvalidArgument);
  rq.set_object_id(0);
  EXPECT_EQ(client_->channel().call<pb::OdsRead>(rq, &ra, {&small, 1}).code(), Code::kInvalidArgument);

  // Still serving, on the same connection.
  ASSERT_TRUE(call_write(good, {pull}).ok());
  auto r = client_->read(9, 0, d.size());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, d);
  // A bad CRC over existing data leaves the old bytes readable.
  auto other = pattern(8192, 5);
  q = good;
  q.set_crc32c(surge::crc32c(other.data(), other.size()));
  EXPECT_EQ(call_write(q, {pull}).code(), Code::kCorruption);
  EXPECT_EQ(*client_->read(9, 0, d.size()), d);
}

// Writes in checksummed pieces (WriteRequest.piece_crc32c): each piece is
// checked before it is stored.
class OdsPieceTest : public OdsServiceTest {
 protected:
  // A write of data at off in 64 KiB pieces, piece `bad` (if any) with a
  // CRC that does not match.
  Status write_pieces(uint64_t id, uint64_t off, std::vector<std::byte>& data, int bad = -1) {
    pb::WriteRequest q;
    q.set_object_id(id);
    q.set_offset(off);
    q.set_length(data.size());
    pb::set_piece_crcs(q, data.data(), data.size(), kPiece);
    if (bad >= 0) q.set_piece_crc32c(bad, q.piece_crc32c(bad) ^ 1);
    net::BulkRegion pull{data.data(), data.size(), net::BulkAccess::kServerPull};
    pb::WriteReply a;
    return client_->channel().call<pb::OdsWrite>(q, &a, {&pull, 1});
  }
  static constexpr uint32_t kPiece = 64 * 1024;
};

TEST_F(OdsPieceTest, UnalignedWriteOfManyPiecesRoundTrips) {
  auto d = pattern(5 * kPiece + 1234, 21);
  const uint64_t off = kPiece - 100;  // the first piece is 100 bytes long
  ASSERT_TRUE(write_pieces(31, off, d).ok());
  auto r = client_->read(31, off, d.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, d);
}

TEST_F(OdsPieceTest, BadPieceStoresThePiecesBeforeItAndNothingAfter) {
  auto old = pattern(4 * kPiece, 22);
  ASSERT_TRUE(client_->write(32, 0, old).ok());
  auto d = pattern(4 * kPiece, 23);
  Status st = write_pieces(32, 0, d, 2);
  EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
  auto r = client_->read(32, 0, d.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto piece = static_cast<std::ptrdiff_t>(kPiece);
  EXPECT_TRUE(std::equal(r->begin(), r->begin() + 2 * piece, d.begin()))
      << "pieces 0 and 1 were checked and stored";
  EXPECT_TRUE(std::equal(r->begin() + 2 * piece, r->end(), old.begin() + 2 * piece))
      << "piece 2 on: untouched";
}

TEST_F(OdsPieceTest, BadPieceOfAnExtendingWriteLeavesTheOldSize) {
  auto old = pattern(10000, 24);
  ASSERT_TRUE(client_->write(33, 0, old).ok());
  auto d = pattern(3 * kPiece, 25);
  EXPECT_EQ(write_pieces(33, old.size(), d, 2).code(), Code::kCorruption);
  auto size = client_->stat(33);
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, old.size()) << "the stored pieces' extension was undone";
  EXPECT_EQ(*client_->read(33, 0, old.size()), old);
}

TEST_F(OdsPieceTest, MalformedPieceListsAreRefusedAndTheServerGoesOn) {
  auto d = pattern(3 * kPiece, 26);
  net::BulkRegion pull{d.data(), d.size(), net::BulkAccess::kServerPull};
  auto call = [&](const pb::WriteRequest& q) {
    pb::WriteReply a;
    return client_->channel().call<pb::OdsWrite>(q, &a, {&pull, 1});
  };
  pb::WriteRequest good;
  good.set_object_id(34);
  good.set_offset(0);
  good.set_length(d.size());
  pb::set_piece_crcs(good, d.data(), d.size(), kPiece);

  pb::WriteRequest q = good;
  q.add_piece_crc32c(0);
  EXPECT_EQ(call(q).code(), Code::kInvalidArgument) << "one CRC too many";
  q = good;
  q.mutable_piece_crc32c()->RemoveLast();
  EXPECT_EQ(call(q).code(), Code::kInvalidArgument) << "one CRC too few";
  for (uint32_t bytes : {0u, 3000u, 2048u, 3u << 16, 2u << 20}) {
    q = good;
    q.set_piece_bytes(bytes);
    EXPECT_EQ(call(q).code(), Code::kInvalidArgument) << "piece size " << bytes;
  }
  EXPECT_EQ(client_->stat(34).status().code(), Code::kNotFound) << "none of them stored anything";
  ASSERT_TRUE(call(good).ok());
  EXPECT_EQ(*client_->read(34, 0, d.size()), d);
}

TEST_F(OdsServiceTest, FlippedByteOnDiskIsACorruptionReplyOtherBlocksRead) {
  auto d = pattern(4 * 4096, 6);
  ASSERT_TRUE(client_->write(12, 0, d, true).ok());
  // Find the object file the way the store names it: any .dat under data/.
  std::string found;
  for (auto& e : std::filesystem::recursive_directory_iterator(dir_.path() + "/data/objects")) {
    if (e.path().extension() == ".dat") found = e.path();
  }
  ASSERT_FALSE(found.empty());
  {
    int fd = ::open(found.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    char c = 0;
    ASSERT_EQ(::pread(fd, &c, 1, 2 * 4096 + 9), 1);
    c ^= 1;
    ASSERT_EQ(::pwrite(fd, &c, 1, 2 * 4096 + 9), 1);
    ::close(fd);
  }
  // The page cache holds the file: the flip is what the server reads next.
  EXPECT_EQ(client_->read(12, 2 * 4096, 4096).status().code(), Code::kCorruption);
  auto ok = client_->read(12, 0, 2 * 4096);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, std::vector<std::byte>(d.begin(), d.begin() + 2 * 4096));
  EXPECT_TRUE(client_->read(12, 3 * 4096, 4096).ok());

  // A scrub over all fan-out directories finds exactly that block.
  std::vector<std::pair<uint64_t, uint64_t>> bad;
  uint64_t objects = 0;
  for (uint32_t dir = 0; dir < 65536;) {
    pb::ScrubRequest q;
    q.set_first_dir(dir);
    q.set_dir_count(4096);
    pb::ScrubReply a;
    Status st = client_->channel().call<pb::OdsScrub>(q, &a);
    ASSERT_TRUE(st.ok()) << st.ToString();
    objects += a.objects_checked();
    for (const auto& b : a.bad_blocks()) bad.emplace_back(b.object_id(), b.offset());
    ASSERT_GT(a.next_dir(), dir);
    dir = a.next_dir();
  }
  EXPECT_EQ(objects, 1u);
  EXPECT_EQ(bad, (std::vector<std::pair<uint64_t, uint64_t>>{{12, 2 * 4096}}));
  pb::ScrubRequest q;
  q.set_first_dir(0);
  q.set_dir_count(0);
  pb::ScrubReply a;
  EXPECT_EQ(client_->channel().call<pb::OdsScrub>(q, &a).code(), Code::kInvalidArgument);
}

using surge::test::free_port;
using surge::test::http_get;

TEST(OdsMetrics, PrometheusEndpointCountsRequestsBytesAndErrors) {
  TempDir dir;
  std::string key_file = make_key(dir);
  DaemonProcess ods;
  uint16_t port = free_port();
  std::string address = start_ods(ods, dir.path() + "/data", key_file, dir.path() + "/ods.log",
                                  {"--metrics-listen", "127.0.0.1:" + std::to_string(port)});
  OdsClient cl(address, key_of(key_file));
  auto d = pattern(10000, 1);
  ASSERT_TRUE(cl.write(3, 0, d).ok());
  ASSERT_TRUE(cl.read(3, 0, 4000).ok());
  EXPECT_FALSE(cl.write(0, 0, d).ok());
  std::string page = http_get(port, "/metrics");
  EXPECT_NE(page.find("HTTP/1.1 200"), std::string::npos) << page;
  EXPECT_NE(page.find("surge_ods_requests_total{method=\"write\"} 2\n"), std::string::npos) << page;
  EXPECT_NE(page.find("surge_ods_request_errors_total{method=\"write\"} 1\n"), std::string::npos) << page;
  EXPECT_NE(page.find("surge_ods_write_bytes_total 10000\n"), std::string::npos) << page;
  EXPECT_NE(page.find("surge_ods_read_bytes_total 4000\n"), std::string::npos) << page;
  EXPECT_NE(page.find("surge_ods_objects 1\n"), std::string::npos) << page;
  EXPECT_NE(page.find("surge_ods_request_duration_seconds_count{method=\"read\"} 1\n"),
            std::string::npos)
      << page;
  EXPECT_NE(http_get(port, "/other").find("HTTP/1.1 404"), std::string::npos);
  int st = ods.stop();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
}

}  // namespace
}  // namespace surge::ods::testing
