// Truncates of EC files while positions are lost (issue 16;
// docs/redundancy.md, "EC truncates and lost positions"): 4 real data
// servers, a 2+2 file of 64 KiB units in one slot (its chain holds all four
// targets). A truncate made while data position 0's server is down stays
// pending at the MDS (the data position cannot cut); position 1 applies it
// when a write reaches it, and that write goes on past position 1's cut.
// Then position 1's server is lost too. A fresh client must read exactly
// what the file holds: position 0's bytes past the cut as zeros (it never
// applied the truncate, its parity still encodes the old bytes), position
// 1's new write as written (its parity knows it applied the truncate).
// Both servers return, are rebuilt, the MDS applies the truncate, and the
// file still reads the same, with every parity window consistent.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "tests/client/chain_state.h"
#include "tests/client/local_cluster.h"
#include "tests/common/time_scale.h"

namespace surge::test {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

constexpr uint64_t kUnit = 64 << 10;
constexpr uint64_t kGroup = 2 * kUnit;
constexpr int kIoTimeoutMs = 8000;

class EcTruncate : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterConfig cfg;
    cfg.ods_count = 4;
    cfg.client_io_timeout_ms = std::to_string(kIoTimeoutMs);
    auto c = LocalCluster::Start(cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    auto cl = cluster_->connect(kIoTimeoutMs);
    ASSERT_TRUE(cl.ok()) << cl.status().ToString();
    client_ = std::move(*cl);
    ASSERT_TRUE(client_->mkdir("/ec", 0777).ok());
    std::string out;
    ASSERT_EQ(
        run_surgectl(*cluster_,
                     "setstripe --ec 2+2 --count 1 --size " + std::to_string(kUnit) + " /ec", &out),
        0)
        << out;
    model_ = random_bytes(4 * kGroup, 5);
    auto f = client_->open("/ec/f", O_RDWR | O_CREAT | O_EXCL, 0644);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_TRUE(client_->pwrite(**f, model_.data(), model_.size(), 0).ok());
    ASSERT_TRUE(client_->fsync(**f, false).ok());
    ASSERT_TRUE(client_->close(*f).ok());
    ASSERT_EQ(run_surgectl(*cluster_, "--json getstripe /ec/f", &out), 0) << out;
    layout_ = Json::parse(out);
  }

  // The data server index holding `position` of the file's one slot.
  int server_of(uint32_t position) const {
    const auto t = layout_.at("slots")[0].at("positions")[position].at("target").get<uint32_t>();
    for (int i = 0; i < cluster_->config().ods_count; ++i) {
      if (target_id_of(*cluster_, i) == t) return i;
    }
    return -1;
  }

  // The whole file through a fresh client, against the model: "" or what
  // differs.
  std::string differs() {
    auto cl = cluster_->connect(sanitizer_scaled(10000));
    if (!cl.ok()) return cl.status().ToString();
    auto f = (*cl)->open("/ec/f", O_RDONLY);
    if (!f.ok()) return f.status().ToString();
    std::string got(model_.size() + 4096, '\0');
    auto n = (*cl)->pread(**f, got.data(), got.size(), 0);
    (void)(*cl)->close(*f);
    if (!n.ok()) return n.status().ToString();
    got.resize(*n);
    if (got.size() != model_.size()) {
      return "read " + std::to_string(got.size()) + " bytes, want " + std::to_string(model_.size());
    }
    size_t at = 0;
    while (at < got.size() && got[at] == model_[at]) ++at;
    return at == got.size() ? "" : "the bytes differ first at file offset " + std::to_string(at);
  }

  // Waits until the chain serves on all four positions again.
  void wait_healthy() {
    const auto give_up = std::chrono::steady_clock::now() + 180s;
    for (;;) {
      std::string out;
      ASSERT_EQ(run_surgectl(*cluster_, "--json chains", &out), 0) << out;
      auto chains = parse_chains(out);
      bool done = !chains.empty();
      for (const auto& c : chains) done = done && c.serving() == 4;
      if (done) return;
      ASSERT_LT(std::chrono::steady_clock::now(), give_up)
          << "the EC chain never served on all four positions again: "
          << (run_surgectl(*cluster_, "chains", &out), out);
      std::this_thread::sleep_for(200ms);
    }
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<Client> client_;
  std::string model_;
  Json layout_;
};

TEST_F(EcTruncate, DegradedReadsSeeEachLostPositionCutAsItWas) {
  const int d0 = server_of(0), d1 = server_of(1);
  ASSERT_GE(d0, 0);
  ASSERT_GE(d1, 0);
  ASSERT_TRUE(cluster_->kill_ods(d0).ok());
  // 1.5 units: position 0 keeps one unit, position 1 half of one.
  const uint64_t cut = kGroup - kUnit / 2;
  ASSERT_TRUE(client_->truncate("/ec/f", cut).ok());
  model_.resize(cut);
  // Half a unit at the start of position 1's unit of the last group: the
  // file grows again; position 1 cuts first, then writes.
  const std::string w = random_bytes(kUnit / 2, 6);
  const uint64_t at = 3 * kGroup + kUnit;
  {
    auto f = client_->open("/ec/f", O_RDWR);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    auto n = client_->pwrite(**f, w.data(), w.size(), at);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    ASSERT_TRUE(client_->fsync(**f, false).ok());
    ASSERT_TRUE(client_->close(*f).ok());
  }
  model_.resize(at, '\0');
  model_ += w;
  EXPECT_EQ(differs(), "") << "with position 0's server down";
  ASSERT_TRUE(cluster_->kill_ods(d1).ok());
  // Both data positions rebuilt from the two parity positions.
  EXPECT_EQ(differs(), "") << "with both data positions' servers down";

  ASSERT_TRUE(cluster_->start_ods(d0).ok());
  ASSERT_TRUE(cluster_->start_ods(d1).ok());
  ASSERT_NO_FATAL_FAILURE(wait_healthy());
  EXPECT_EQ(differs(), "") << "after both were rebuilt";
  std::string out;
  EXPECT_EQ(run_surgectl(*cluster_, "scrub", &out), 0) << out;
  EXPECT_NE(out.find("0 parity windows inconsistent, 0 chains not checked"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace surge::test
