// What surgectl says about erasure coding (issue 16): the `--ec K+M`
// argument of setstripe, and getstripe's view of an EC file's stripe
// groups: each group is K data chunks and M parity chunks of stripe_size
// bytes on one slot's chain, position p on the chain's member p.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "net/proto/mds.pb.h"

namespace surge::tools {

struct EcScheme {
  uint32_t data = 0;    // K
  uint32_t parity = 0;  // M
};

// "4+2" -> {4, 2}; InvalidArgument naming the text otherwise (K and M
// are checked against the data servers by the MDS).
Result<EcScheme> parse_ec_scheme(std::string_view text);

// The stripe size setstripe --ec gives when none is named: the largest
// power of two at most 1 MiB / K (4 KiB at least), so an aligned 1 MiB
// write fills whole stripe groups and the client encodes their parity
// (docs/redundancy.md, "EC writes: full groups").
uint32_t default_ec_unit(uint32_t k);

// "stripe groups: 4 data + 2 parity chunks of 1048576 bytes (4194304 file
// bytes per group), group g on slot g % 3"
std::string ec_groups_text(const proto::mds::Layout& l);

// "data 0 target 1 serving, ..., parity 1 target 6 serving": which target
// holds which chunk of the chain's groups.
std::string ec_positions_text(const proto::mds::Chain& c);

// "data 0" / "parity 1" for chunk position p of an EC K+M chain.
std::string ec_position_name(uint32_t position, uint32_t k);

}  // namespace surge::tools
