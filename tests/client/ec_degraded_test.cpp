// Degraded reads of EC files (issue 16; docs/redundancy.md, "EC writes:
// the design"): 6 real data servers, a 4+2 directory of 64 KiB units over
// 2 slots (each chain holds all 6 targets, each in another position).
// With one and then M = 2 data servers SIGKILLed, a fresh libsurge client
// reads every byte back exactly (the positions they held rebuilt from K
// others); with M + 1 gone the read fails with EIO, never wrong bytes.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/client/local_cluster.h"
#include "tests/common/time_scale.h"

namespace surge::test {
namespace {

constexpr uint64_t kUnit = 64 << 10;

class EcDegraded : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterConfig cfg;
    cfg.ods_count = 6;
    cfg.client_io_timeout_ms = "4000";
    auto c = LocalCluster::Start(cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    auto cl = cluster_->connect(4000);
    ASSERT_TRUE(cl.ok()) << cl.status().ToString();
    ASSERT_TRUE((*cl)->mkdir("/ec", 0777).ok());
    ASSERT_EQ(surgectl("setstripe --ec 4+2 --count 2 --size " + std::to_string(kUnit) + " /ec"), 0)
        << out_;
    model_ = random_bytes(4 * kUnit * 2 * 5 + 777, 42);
    auto f = (*cl)->open("/ec/f", O_RDWR | O_CREAT | O_EXCL, 0644);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_TRUE((*cl)->pwrite(**f, model_.data(), model_.size(), 0).ok());
    ASSERT_TRUE((*cl)->fsync(**f, false).ok());
    ASSERT_TRUE((*cl)->close(*f).ok());
  }

  int surgectl(const std::string& args) {
    const char* b = std::getenv("SURGE_BUILD_DIR");
    if (b == nullptr) {
      out_ = "SURGE_BUILD_DIR is not set (run through ctest)";
      return -1;
    }
    out_.clear();
    return sh(std::string(b) + "/tools/surgectl --mds " + cluster_->mds_address() + " --key-file " +
                  cluster_->key_file() + " " + args + " 2>&1",
              &out_);
  }

  // The whole file through a fresh client (io timeout in ms), or the error.
  Result<std::string> read_all(int io_timeout_ms) {
    auto cl = cluster_->connect(io_timeout_ms);
    if (!cl.ok()) return cl.status();
    auto f = (*cl)->open("/ec/f", O_RDONLY);
    if (!f.ok()) return f.status();
    std::string out(model_.size() + 4096, '\0');
    auto n = (*cl)->pread(**f, out.data(), out.size(), 0);
    (void)(*cl)->close(*f);
    if (!n.ok()) return n.status();
    out.resize(*n);
    return out;
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::string model_, out_;
};

TEST_F(EcDegraded, ReadsStayExactWithUpToMServersLost) {
  // Formation rotates positions over the chains (docs/redundancy.md), so
  // of the file's two chains at most one target holds parity in both: the
  // two servers killed hold a data position between them, and a read of
  // it is rebuilt. getstripe, for the messages: who held what.
  ASSERT_EQ(surgectl("getstripe /ec/f"), 0) << out_;
  const std::string layout = out_;
  for (int dead : {0, 1}) {
    ASSERT_TRUE(cluster_->kill_ods(dead).ok());
    auto got = read_all(sanitizer_scaled(10000));
    ASSERT_TRUE(got.ok()) << "with " << dead + 1 << " lost: " << got.status().ToString() << "\n"
                          << layout;
    EXPECT_TRUE(*got == model_) << "with " << dead + 1 << " lost, the bytes differ\n" << layout;
  }
}

TEST_F(EcDegraded, MorePositionsLostThanParityFailsWithEio) {
  for (int dead : {0, 1, 2}) ASSERT_TRUE(cluster_->kill_ods(dead).ok());
  auto got = read_all(3000);
  ASSERT_FALSE(got.ok()) << "read " << got->size() << " bytes with 3 of 6 positions lost";
  EXPECT_EQ(got.status().code(), Code::kIOError) << got.status().ToString();
  EXPECT_NE(got.status().message().find("needed"), std::string::npos) << got.status().ToString();
}

}  // namespace
}  // namespace surge::test
