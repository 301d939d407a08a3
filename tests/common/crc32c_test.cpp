#include "common/crc32c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace surge {
namespace {

TEST(Crc32c, KnownVector) {
  // The CRC32C check value of "123456789" (RFC 3720, B.4).
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
}

TEST(Crc32c, EmptyIsZero) { EXPECT_EQ(crc32c("", 0), 0u); }

TEST(Crc32c, ThirtyTwoZeroBytes) {
  std::vector<unsigned char> z(32, 0);
  EXPECT_EQ(crc32c(z.data(), z.size()), 0x8A9136AAu);  // RFC 3720 B.4
}

TEST(Crc32c, ChainsAcrossSplits) {
  std::string s(100000, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i * 131 + 7);
  uint32_t whole = crc32c(s.data(), s.size());
  for (size_t cut : {0ul, 1ul, 4095ul, 4096ul, 65537ul, s.size()}) {
    uint32_t a = crc32c(s.data(), cut);
    EXPECT_EQ(crc32c(s.data() + cut, s.size() - cut, a), whole) << "cut at " << cut;
  }
}

}  // namespace
}  // namespace surge
