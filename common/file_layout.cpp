#include "common/file_layout.h"

#include <algorithm>

namespace surge {

namespace {

std::string ids(const std::vector<uint32_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i != 0) s += ',';
    s += std::to_string(v[i]);
  }
  return s;
}

std::string size_text(uint64_t n) {
  if (n % (1 << 20) == 0) return std::to_string(n >> 20) + " MiB";
  if (n % (1 << 10) == 0) return std::to_string(n >> 10) + " KiB";
  return std::to_string(n) + " B";
}

}  // namespace

Status validate(const FileLayout& l, uint64_t ino) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("layout of inode " + std::to_string(ino) + " (" + describe(l) +
                                   "): " + why);
  };
  if (l.stripe_size == 0) return bad("stripe size 0");
  if (l.stripe_count == 0) return bad("stripe count 0");
  if (l.format == FileLayout::kFormatTargets) {
    if (l.targets.size() != l.stripe_count) return bad("needs one target per slot");
    std::vector<uint32_t> sorted = l.targets;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      return bad("a target is named twice");
    }
    return Status::OK();
  }
  if (l.format != FileLayout::kFormatChains) return bad("unknown format");
  if (l.chains.size() != l.stripe_count) return bad("needs one chain per slot");
  if (std::find(l.chains.begin(), l.chains.end(), 0u) != l.chains.end()) return bad("chain id 0");
  switch (l.scheme) {
    case Redundancy::kReplicas:
      if (l.replicas == 0) return bad("replicas 0");
      return Status::OK();
    case Redundancy::kErasure:
      if (l.ec_data == 0 || l.ec_parity == 0) return bad("EC needs K >= 1 and M >= 1");
      return Status::OK();
    case Redundancy::kNone:
      break;
  }
  return bad("format 2 without a scheme");
}

std::string describe(const FileLayout& l) {
  std::string s = size_text(l.stripe_size) + " x " + std::to_string(l.stripe_count);
  if (!l.chained()) return s + ", targets " + ids(l.targets);
  if (l.scheme == Redundancy::kErasure) {
    s += ", ec " + std::to_string(l.ec_data) + "+" + std::to_string(l.ec_parity);
  } else {
    s += ", replicas " + std::to_string(l.replicas);
  }
  return s + ", chains " + ids(l.chains);
}

}  // namespace surge
