// A fixture for tests of one EC stripe group's fate while its positions
// are lost: 4 real data servers, a 2+2 file of 64 KiB units in one slot
// (its chain holds all four targets), written with 4 groups of random
// bytes that model_ holds. Used by ec_truncate_test and
// ec_lost_delta_test.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "tests/client/chain_state.h"
#include "tests/client/local_cluster.h"
#include "tests/common/time_scale.h"

namespace surge::test {

class EcSmallGroup : public ::testing::Test {
 protected:
  static constexpr uint64_t kUnit = 64 << 10;
  static constexpr uint64_t kGroup = 2 * kUnit;
  static constexpr int kIoTimeoutMs = 8000;

  // The cluster: 4 data servers; a test may change the rest.
  virtual ClusterConfig cluster_config() {
    ClusterConfig cfg;
    cfg.client_io_timeout_ms = std::to_string(kIoTimeoutMs);
    return cfg;
  }
  int io_timeout_ms() const { return std::stoi(cluster_->config().client_io_timeout_ms); }

  void SetUp() override {
    ClusterConfig cfg = cluster_config();
    cfg.ods_count = 4;
    auto c = LocalCluster::Start(cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    auto cl = cluster_->connect(io_timeout_ms());
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
    layout_ = nlohmann::json::parse(out);
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

  // Waits until every chain serves on all four positions again.
  void wait_healthy(std::chrono::seconds most = std::chrono::seconds(180)) {
    wait_serving(4, most);
  }
  // Waits until every chain serves on `positions` positions (most: in a
  // build without sanitizers).
  void wait_serving(int positions, std::chrono::seconds most) {
    const auto give_up = std::chrono::steady_clock::now() + sanitizer_scaled(most);
    for (;;) {
      std::string out;
      ASSERT_EQ(run_surgectl(*cluster_, "--json chains", &out), 0) << out;
      auto chains = parse_chains(out);
      bool done = !chains.empty();
      for (const auto& c : chains) done = done && c.serving() == positions;
      if (done) return;
      ASSERT_LT(std::chrono::steady_clock::now(), give_up)
          << "the EC chains never served on " << positions
          << " positions: " << (run_surgectl(*cluster_, "chains", &out), out);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  // surgectl scrub's verdict on every parity window: "" when all are
  // consistent.
  std::string scrub_finds() {
    std::string out;
    const int rc = run_surgectl(*cluster_, "scrub", &out);
    if (rc == 0 &&
        out.find("0 parity windows inconsistent, 0 chains not checked") != std::string::npos) {
      return "";
    }
    return "scrub exited " + std::to_string(rc) + ": " + out;
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<Client> client_;
  std::string model_;
  nlohmann::json layout_;
};

}  // namespace surge::test
