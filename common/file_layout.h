// FileLayout: where a file's bytes live, as the one model type the MDS, the
// client and surgectl share (docs/redundancy.md, "Layout v2"). The wire
// form is proto::mds::Layout and the MDS's stored form is its own record;
// both convert to this at their boundary. Pure data and checks only.
//
// Invariants (validate): stripe_size > 0 and stripe_count > 0; format 1
// names stripe_count distinct targets; format 2 names stripe_count chains
// and a scheme: replicas >= 1, or EC with ec_data >= 1 and ec_parity >= 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace surge {

enum class Redundancy : uint8_t {
  kNone = 0,      // format 1: one copy on a target, no chain
  kReplicas = 1,  // chain replication over `replicas` members
  kErasure = 2,   // Reed-Solomon ec_data + ec_parity over one chain
};

struct FileLayout {
  static constexpr uint32_t kFormatTargets = 1;  // v1: objects keyed by ino
  static constexpr uint32_t kFormatChains = 2;   // v2: chunks {ino, slot, position}

  uint32_t format = kFormatTargets;
  uint64_t stripe_size = 1 << 20;
  uint32_t stripe_count = 1;
  Redundancy scheme = Redundancy::kNone;
  uint32_t replicas = 1;  // kReplicas
  uint32_t ec_data = 0;   // kErasure: K
  uint32_t ec_parity = 0; // kErasure: M
  std::vector<uint32_t> targets;  // format 1: one target id per slot
  std::vector<uint32_t> chains;   // format 2: one chain id per slot
  // Not where the bytes live but which of them count, carried with the
  // layout to every chunk request (format 2): the file's last truncate
  // generation as its holder knows it (0: none) and the file size that
  // truncate set (docs/redundancy.md, "Truncate generations").
  uint64_t truncate_seq = 0;
  uint64_t truncate_size = 0;

  bool chained() const { return format == kFormatChains; }
  bool erasure() const { return chained() && scheme == Redundancy::kErasure; }
  // Data stripe units per stripe group: K for EC, 1 otherwise.
  uint32_t data_units() const { return erasure() ? ec_data : 1; }
  // Chunks per slot (chunk positions): K + M for EC, 1 otherwise.
  uint32_t positions() const { return erasure() ? ec_data + ec_parity : 1; }
  // The chain (format 2) or target (format 1) id of a slot.
  uint32_t slot_owner(uint32_t slot) const { return chained() ? chains[slot] : targets[slot]; }
};

// InvalidArgument naming the file (ino) and what is wrong.
Status validate(const FileLayout& layout, uint64_t ino);

// "1 MiB x 3, replicas 2, chains 4,5,6" / "64 KiB x 2, targets 1,2" / "... ec 4+2 ..."
std::string describe(const FileLayout& layout);

}  // namespace surge
