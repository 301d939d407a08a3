// EC text of surgectl: see ec_report.h.
#include "tools/surgectl/ec_report.h"

#include <charconv>

#include "tools/surgectl/cluster_admin.h"

namespace surge::tools {

namespace pb = ::surge::proto::mds;

namespace {

bool parse_u32(std::string_view s, uint32_t* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

Result<EcScheme> parse_ec_scheme(std::string_view text) {
  const size_t plus = text.find('+');
  EcScheme s;
  if (plus == std::string_view::npos || !parse_u32(text.substr(0, plus), &s.data) ||
      !parse_u32(text.substr(plus + 1), &s.parity) || s.data == 0 || s.parity == 0) {
    return Status::InvalidArgument("--ec '" + std::string(text) +
                                   "': expected K+M with K >= 1 data and M >= 1 parity chunks "
                                   "(e.g. 4+2)");
  }
  return s;
}

std::string ec_groups_text(const pb::Layout& l) {
  const uint64_t unit = l.stripe_size();
  return "stripe groups: " + std::to_string(l.ec_data()) + " data + " +
         std::to_string(l.ec_parity()) + " parity chunks of " + std::to_string(unit) + " bytes (" +
         std::to_string(unit * l.ec_data()) + " file bytes per group), group g on slot g % " +
         std::to_string(l.stripe_count());
}

std::string ec_position_name(uint32_t position, uint32_t k) {
  return position < k ? "data " + std::to_string(position)
                      : "parity " + std::to_string(position - k);
}

std::string ec_positions_text(const pb::Chain& c) {
  std::string s;
  for (int p = 0; p < c.members_size(); ++p) {
    const auto& m = c.members(p);
    if (!s.empty()) s += ", ";
    s += ec_position_name(static_cast<uint32_t>(p), c.ec_data()) + " target " +
         std::to_string(m.target_id()) + " " + member_state_name(m.state());
    // Its writes went to a stand-in while it was away: rebuilt when back.
    if (m.stood_in()) s += " (stood in for)";
  }
  return s;
}

uint32_t default_ec_unit(uint32_t k) {
  uint32_t unit = 1u << 20;
  while (unit > (4u << 10) && static_cast<uint64_t>(unit) * k > (1u << 20)) unit >>= 1;
  return unit;
}

}  // namespace surge::tools
