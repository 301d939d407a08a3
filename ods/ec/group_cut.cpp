// A consistent cut of an EC group. See group_cut.h.
#include "ods/ec/group_cut.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

namespace surge::ods {
namespace {

// A copy dirty or mid-write is read again after a pause.
constexpr int kCutAttempts = 100;
constexpr auto kCutPause = std::chrono::milliseconds(10);
// Bytes read of a parity chunk to learn what it applied.
constexpr size_t kProbeBytes = 4096;

}  // namespace

PositionBuffers position_buffers(const ChainPlace& place) {
  return PositionBuffers(place.ec_data + place.ec_parity, std::vector<std::byte>(kCutWindow));
}

Result<GroupCut> read_cut(ChainForwarder& forwarder, const ChainPlace& place, const ChunkKey& key,
                          const ec::RsCodec& rs, const std::vector<uint32_t>& sources, uint64_t off,
                          std::optional<uint64_t> of_p, PositionBuffers& bufs) {
  const uint32_t k = place.ec_data, n = k + place.ec_parity, p = place.ec_position;
  for (int attempt = 0; attempt < kCutAttempts; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(kCutPause);
    std::vector<std::optional<PositionWindow>> got(n);
    for (uint32_t i : sources) {
      auto w = read_position(forwarder, place, i, {key.ino, key.slot, i}, off, bufs[i]);
      if (w.ok()) {
        std::memset(bufs[i].data() + w->length, 0, kCutWindow - w->length);
        got[i] = std::move(*w);
      } else if (w.status().code() != Code::kChunkDirty) {
        return w.status();
      }
    }
    GroupCut cut;
    if (p < k) {
      // The versions of p the parity copies read name. Only p's own
      // updates move them, and p takes none while its rebuild holds its
      // update order, so copies that differ stay so: a write of p was
      // under way when it was lost, its delta applied at some parity
      // positions only.
      for (uint32_t i : sources) {
        if (i >= k && got[i]) cut.names[got[i]->applied_of(p)].set(i);
      }
      if (cut.names.empty()) continue;  // no parity copy read this time
      if (of_p && cut.names.count(*of_p) == 0) {
        return Status::Unavailable("the parity moved from version " + std::to_string(*of_p) +
                                   " of data position " + std::to_string(p) +
                                   " during its rebuild");
      }
      cut.version = of_p ? *of_p : cut.names.rbegin()->first;
    }
    // K copies at a consistent cut: the data copies read, then parity
    // copies that name p at cut.version (a data p) and exactly the data
    // copies' versions, and agree on those of the data positions not read.
    ec::ChunkSet present;
    cut.versions.assign(k, 0);
    cut.truncates.assign(k, 0);
    for (uint32_t i : sources) {
      if (i < k && got[i]) {
        present.set(i);
        cut.versions[i] = got[i]->version;
        cut.truncates[i] = got[i]->truncate_seq;
      }
    }
    const ec::ChunkSet data_read = present;
    bool named = false;  // cut.versions of the data positions not read come from parity
    for (uint32_t i : sources) {
      if (i < k || !got[i] || present.count() >= k) continue;
      if (p < k && got[i]->applied_of(p) != cut.version) continue;
      bool fits = true;
      for (uint32_t q = 0; q < k; ++q) {
        if (data_read.test(q)) {
          fits = fits && got[i]->applied_of(q) == got[q]->version;
        } else if (q != p && named) {
          fits = fits && got[i]->applied_of(q) == cut.versions[q];
        }
      }
      if (!fits) continue;
      present.set(i);
      for (uint32_t q = 0; q < k; ++q) {
        if (data_read.test(q) || q == p || named) continue;
        cut.versions[q] = got[i]->applied_of(q);
        cut.truncates[q] = got[i]->applied_truncate_of(q);
      }
      named = true;
      if (p < k) cut.truncated = std::max(cut.truncated, got[i]->applied_truncate_of(p));
    }
    if (present.count() < k) continue;
    for (uint32_t i = 0; i < n; ++i) {
      if (present.test(i)) cut.length = std::max(cut.length, got[i]->length);
    }
    if (cut.length > 0) {
      std::vector<uint8_t*> ptrs(n, nullptr);
      for (uint32_t i = 0; i < n; ++i) {
        if (present.test(i) || i == p) ptrs[i] = reinterpret_cast<uint8_t*>(bufs[i].data());
      }
      ec::ChunkSet want;
      want.set(p);
      SURGE_RETURN_IF_ERROR(rs.Reconstruct(ptrs, present, want, cut.length));
    }
    return cut;
  }
  return Status::Unavailable("no consistent cut of " + std::to_string(k) +
                             " other positions at offset " + std::to_string(off) + " in " +
                             std::to_string(kCutAttempts) + " tries");
}

Result<PositionWindow> probe_parity(ChainForwarder& forwarder, const ChainPlace& place,
                                    const ChunkKey& key, uint32_t position) {
  std::vector<std::byte> probe(kProbeBytes);
  Result<PositionWindow> w = Status::OK();
  for (int attempt = 0; attempt < kCutAttempts; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(kCutPause);
    w = read_position(forwarder, place, position, {key.ino, key.slot, position}, 0, probe);
    if (w.ok() || w.status().code() != Code::kChunkDirty) break;
  }
  return w;
}

}  // namespace surge::ods
