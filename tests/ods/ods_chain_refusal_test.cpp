// surge-ods refuses what is not meant for it (docs/redundancy.md, "What
// every data-server request carries, and the refusals"), against a real
// surge-mds that assigned its target id: a request naming another target
// id (a stale map, or our address reused by another target) is refused
// with WrongTarget and stores nothing; a request naming a chain the MDS's
// table does not list us in is refused with WrongTarget too; so is a
// fallocate for another target, which reserves nothing. Requests
// naming our own id, or none (senders from before chains), are served.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "common/crc32c.h"
#include "net/proto/mds_methods.h"
#include "net/proto/ods_write_pieces.h"
#include "tests/ods/ods_fixture.h"

namespace surge::ods::testing {
namespace {

namespace mpb = surge::proto::mds;

class OdsChainRefusalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_file_ = make_key(dir_);
    key_ = key_of(key_file_);
    const std::string mds_config = dir_.path() + "/mds.toml";
    std::ofstream(mds_config) << "[targets]\nheartbeat_interval_ms = 100\n";
    std::string line = mds_.start(build_dir() + "/mds/surge-mds",
                                  {"--config", mds_config, "--data-dir", dir_.path() + "/mds",
                                   "--listen", listen_address(), "--cluster-key-file", key_file_},
                                  dir_.path() + "/mds.log");
    const std::string mds_address = address_of(line);
    const std::string ods_config = dir_.path() + "/ods.toml";
    std::ofstream(ods_config) << "[mds]\nretry_ms = 100\n";
    line = ods_.start(
        build_dir() + "/ods/surge-ods",
        {"--config", ods_config, "--data-dir", dir_.path() + "/ods", "--listen", listen_address(),
         "--mds", mds_address, "--cluster-key-file", key_file_, "--pool-1m-buffers", "8"},
        dir_.path() + "/ods.log");
    ods_address_ = address_of(line);
    auto p = line.find(" target ");
    ASSERT_NE(p, std::string::npos) << line;
    own_id_ = static_cast<uint32_t>(std::stoul(line.substr(p + 8)));
    if (own_id_ == 0) {
      std::ifstream in(dir_.path() + "/ods.log");
      FAIL() << "surge-ods did not register with the MDS: " << line << "\n"
             << std::string(std::istreambuf_iterator<char>(in), {});
    }
    client_ = std::make_unique<OdsClient>(ods_address_, key_);
  }

  Status write(uint64_t id, const pb::ChunkRef& ref, const std::vector<std::byte>& d) {
    pb::WriteRequest q;
    q.set_object_id(id);
    q.set_offset(0);
    q.set_length(d.size());
    pb::set_piece_crcs(q, d.data(), d.size());
    *q.mutable_ref() = ref;
    net::BulkRegion r{const_cast<std::byte*>(d.data()), d.size(), net::BulkAccess::kServerPull};
    pb::WriteReply a;
    return client_->channel().call<pb::OdsWrite>(q, &a, {&r, 1});
  }

  Status read(uint64_t id, const pb::ChunkRef& ref, std::vector<std::byte>& into) {
    pb::ReadRequest q;
    q.set_object_id(id);
    q.set_offset(0);
    q.set_length(into.size());
    *q.mutable_ref() = ref;
    net::BulkRegion r{into.data(), into.size(), net::BulkAccess::kServerPush};
    pb::ReadReply a;
    return client_->channel().call<pb::OdsRead>(q, &a, {&r, 1});
  }

  Status fallocate(uint64_t id, const pb::ChunkRef& ref, uint64_t length) {
    pb::FallocateRequest q;
    q.set_object_id(id);
    q.set_offset(0);
    q.set_length(length);
    q.set_mode(pb::FALLOCATE_RESERVE);
    *q.mutable_ref() = ref;
    pb::FallocateReply a;
    return client_->channel().call<pb::OdsFallocate>(q, &a);
  }

  TempDir dir_;
  std::string key_file_, key_, ods_address_;
  DaemonProcess mds_, ods_;
  uint32_t own_id_ = 0;
  std::unique_ptr<OdsClient> client_;
};

TEST_F(OdsChainRefusalTest, ARequestForAnotherTargetIsRefusedAndStoresNothing) {
  pb::ChunkRef other;
  other.set_target_id(own_id_ + 7);
  Status st = write(41, other, pattern(5000, 1));
  EXPECT_EQ(st.code(), Code::kWrongTarget) << st.ToString();
  EXPECT_NE(st.message().find("target " + std::to_string(own_id_ + 7)), std::string::npos)
      << "the refusal names the target the request meant: " << st.ToString();
  EXPECT_EQ(client_->stat(41).status().code(), Code::kNotFound) << "a refused write stored bytes";
  std::vector<std::byte> buf(100);
  EXPECT_EQ(read(41, other, buf).code(), Code::kWrongTarget);
}

TEST_F(OdsChainRefusalTest, AFallocateForAnotherTargetIsRefusedAndReservesNothing) {
  pb::ChunkRef other;
  other.set_target_id(own_id_ + 7);
  Status st = fallocate(45, other, 8192);
  EXPECT_EQ(st.code(), Code::kWrongTarget) << st.ToString();
  EXPECT_EQ(client_->stat(45).status().code(), Code::kNotFound)
      << "a refused fallocate made the object";
  pb::ChunkRef mine;
  mine.set_target_id(own_id_);
  st = fallocate(45, mine, 8192);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto size = client_->stat(45);
  ASSERT_TRUE(size.ok()) << size.status().ToString();
  EXPECT_EQ(*size, 8192u);
}

TEST_F(OdsChainRefusalTest, OwnTargetIdAndNoTargetIdAreServed) {
  pb::ChunkRef mine;
  mine.set_target_id(own_id_);
  auto d = pattern(5000, 2);
  Status st = write(42, mine, d);
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::vector<std::byte> buf(d.size());
  st = read(42, mine, buf);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(buf, d);
  st = write(43, pb::ChunkRef{}, d);  // a sender from before chains
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST_F(OdsChainRefusalTest, AChainThatDoesNotListThisTargetIsRefused) {
  pb::ChunkRef ref;
  ref.set_target_id(own_id_);
  ref.set_chain_id(987654);  // no such chain in the MDS's table
  ref.set_chain_version(1);
  ref.set_ino(44);
  std::vector<std::byte> buf(100);
  Status st = read(0, ref, buf);
  EXPECT_EQ(st.code(), Code::kWrongTarget) << st.ToString();
  EXPECT_NE(st.message().find("chain 987654"), std::string::npos) << st.ToString();
  st = write(0, ref, pattern(100, 3));
  EXPECT_EQ(st.code(), Code::kWrongTarget) << st.ToString();
}

}  // namespace
}  // namespace surge::ods::testing
