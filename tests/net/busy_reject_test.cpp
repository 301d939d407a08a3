// The "busy" private data of a rejected RDMA connection request
// (net/rdma/busy_reject.h) and the pauses of a client refused as busy
// (net/busy_retry.h): pure codecs, tested on any host.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "net/busy_retry.h"
#include "net/rdma/busy_reject.h"

namespace surge::net {
namespace {

TEST(BusyReject, RoundTripsAndSurvivesRdmaCmPadding) {
  const std::string pd = rdma::encode_busy_reject({true, 32});
  auto b = rdma::decode_busy_reject(pd);
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->per_address);
  EXPECT_EQ(b->limit, 32u);
  EXPECT_EQ(b->describe(), "its limit of 32 connections in the handshake per address");
  // rdma_cm hands the client the REJ's private data padded with zeros.
  auto padded = rdma::decode_busy_reject(rdma::encode_busy_reject({false, 256}) +
                                         std::string(136, '\0'));
  ASSERT_TRUE(padded.has_value());
  EXPECT_FALSE(padded->per_address);
  EXPECT_EQ(padded->limit, 256u);
}

TEST(BusyReject, AnyOtherRejectionIsNotBusy) {
  EXPECT_FALSE(rdma::decode_busy_reject("").has_value());
  EXPECT_FALSE(rdma::decode_busy_reject(std::string(148, '\0')).has_value());
  std::string bad_scope = rdma::encode_busy_reject({true, 1});
  bad_scope[4] = 7;
  EXPECT_FALSE(rdma::decode_busy_reject(bad_scope).has_value());
  std::string truncated = rdma::encode_busy_reject({true, 1}).substr(0, 8);
  EXPECT_FALSE(rdma::decode_busy_reject(truncated).has_value());
}

TEST(BusyRetry, PausesGrowFrom2MsTo128MsAndStayWithinHalfOfTheirCeiling) {
  for (int n = 2; n < 20; ++n) {
    const int64_t ceiling = int64_t{2000} << std::min(n - 2, 6);
    for (int i = 0; i < 50; ++i) {
      const auto p = busy_retry_pause(n).count();
      EXPECT_GE(p, ceiling / 2) << "try " << n;
      EXPECT_LE(p, ceiling) << "try " << n;
    }
  }
}

}  // namespace
}  // namespace surge::net
