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

TEST(Crc32cShift, CombineEqualsTheCrcOfTheConcatenation) {
  std::string s(3 * 4096 + 17, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i * 167 + 3);
  for (size_t n : {1ul, 7ul, 4096ul, 8192ul + 17}) {
    Crc32cShift shift(n);
    for (size_t a_len : {0ul, 1ul, 4096ul, s.size() - n}) {
      uint32_t a = crc32c(s.data(), a_len);
      uint32_t b = crc32c(s.data() + a_len, n);
      EXPECT_EQ(shift.combine(a, b), crc32c(s.data(), a_len + n)) << "n " << n << " a " << a_len;
    }
  }
}

TEST(Crc32cShift, CombineOfBlocksGivesThePayloadCrc) {
  // What the data server does: each 4 KiB block's own CRC, folded into the
  // CRC of the whole payload.
  std::string s(64 * 4096, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>((i * 2654435761u) >> 13);
  Crc32cShift shift(4096);
  uint32_t running = 0;
  for (size_t off = 0; off < s.size(); off += 4096)
    running = shift.combine(running, crc32c(s.data() + off, 4096));
  EXPECT_EQ(running, crc32c(s.data(), s.size()));
}

}  // namespace
}  // namespace surge
