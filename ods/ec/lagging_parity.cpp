// LaggingParity: completing an update some parity positions missed. See
// lagging_parity.h.
#include "ods/ec/lagging_parity.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/log.h"
#include "ods/ec/group_cut.h"

namespace surge::ods {
namespace {

namespace mpb = proto::mds;

}  // namespace

LaggingParity::LaggingParity(ChainedChunks& chained, ChainView& view, ChainForwarder& forwarder,
                             CodecOf codec, SendDelta send_delta)
    : chained_(chained),
      view_(view),
      forwarder_(forwarder),
      codec_(std::move(codec)),
      send_delta_(std::move(send_delta)) {}

Status LaggingParity::send_difference(const ChainPlace& place, const ChunkKey& key,
                                      const ec::RsCodec& rs, const std::vector<uint32_t>& sources,
                                      uint64_t older, uint64_t newer, uint64_t skip,
                                      const NewerWindow& newer_window) {
  const uint32_t p = place.ec_position;
  // p's bytes at both versions, window by window; their XOR is the delta
  // the lagging positions never applied. It covers one lost update, so it
  // spans at most what one update does (a pool buffer).
  PositionBuffers at_old = position_buffers(place);
  std::map<uint64_t, std::vector<std::byte>> changed;  // window offset -> XOR
  uint64_t first = UINT64_MAX, last = 0, truncated = 0;
  for (uint64_t off = 0;; off += kCutWindow) {
    SURGE_ASSIGN_OR_RETURN(auto hi, newer_window(off));
    SURGE_ASSIGN_OR_RETURN(GroupCut lo,
                           read_cut(forwarder_, place, key, rs, sources, off, older, at_old));
    if (off == 0) truncated = hi.truncated;
    const uint64_t len = std::max<uint64_t>(hi.bytes.size(), lo.length);
    std::vector<std::byte> x(len);
    for (uint64_t b = 0; b < len; ++b) {
      x[b] = (b < hi.bytes.size() ? hi.bytes[b] : std::byte{0}) ^
             (b < lo.length ? at_old[p][b] : std::byte{0});
      if (x[b] != std::byte{0}) {
        first = std::min(first, off + b);
        last = off + b + 1;
      }
    }
    if (last > off) changed.emplace(off, std::move(x));
    if (len < kCutWindow) break;
  }
  // An update that wrote the bytes already there changes no parity byte,
  // but its version must still reach the lagging positions.
  if (first == UINT64_MAX) first = 0, last = 1;
  std::vector<std::byte> delta(last - first);
  for (const auto& [off, x] : changed) {
    for (uint64_t b = 0; b < x.size(); ++b) {
      if (off + b >= first && off + b < last) delta[off + b - first] = x[b];
    }
  }
  SLOG_WARN(
      "{} of EC chain {} on target {}: the update to version {} reached some parity positions "
      "only (the others applied {}): sending its delta ({} bytes at offset {}) to them",
      key.describe(), place.chain_id, view_.own_id(), newer, older, delta.size(), first);
  return send_delta_(place, key, first, delta, newer, truncated, skip)
      .WithContext("sending the delta of version " + std::to_string(newer) + " of " +
                   key.describe() + " to the parity positions at " + std::to_string(older));
}

uint64_t LaggingParity::skip_all_but(const ChainPlace& place, const ec::ChunkSet& lagging) {
  uint64_t skip = 0;
  for (uint32_t i = place.ec_data; i < place.ec_data + place.ec_parity; ++i) {
    if (!lagging.test(i)) skip |= uint64_t{1} << i;
  }
  return skip;
}

Status LaggingParity::roll_forward(const ChainPlace& place, const ChunkKey& key,
                                   const std::vector<uint32_t>& sources,
                                   const std::map<uint64_t, ec::ChunkSet>& names) {
  const uint32_t p = place.ec_position;
  const uint64_t older = names.begin()->first, newer = names.rbegin()->first;
  if (names.size() != 2) {
    return Status::Unavailable("parity positions name " + std::to_string(names.size()) +
                               " different versions of data position " + std::to_string(p) +
                               "; one delta cannot bring them together");
  }
  SURGE_ASSIGN_OR_RETURN(const ec::RsCodec* rs, codec_(place));
  // The newer bytes are rebuilt too: this member's own copy is not trusted.
  PositionBuffers at_new = position_buffers(place);
  auto rebuilt_newer = [&](uint64_t off) -> Result<NewerBytes> {
    SURGE_ASSIGN_OR_RETURN(GroupCut hi,
                           read_cut(forwarder_, place, key, *rs, sources, off, newer, at_new));
    return NewerBytes{{at_new[p].data(), hi.length}, hi.truncated};
  };
  return send_difference(place, key, *rs, sources, older, newer,
                         skip_all_but(place, names.begin()->second), rebuilt_newer);
}

Status LaggingParity::resend_lost(const ChainPlace& place, const ChunkKey& key,
                                  const ChunkRecord& rec) {
  const uint32_t k = place.ec_data, n = k + place.ec_parity, p = place.ec_position;
  SURGE_ASSIGN_OR_RETURN(const ec::RsCodec* rs, codec_(place));
  // The other positions that serve, and SYNCING data positions for the
  // copies they hold (checked against the versions the parity names):
  // after a whole restart the other data members may be syncing, and
  // their syncs wait for this update to be completed.
  std::vector<uint32_t> sources;
  for (uint32_t i = 0; i < n; ++i) {
    const auto state = place.ec_members[i].state;
    if (i != p && (state == mpb::MEMBER_SERVING || (i < k && state == mpb::MEMBER_SYNCING))) {
      sources.push_back(i);
    }
  }
  // What every SERVING parity position applied of p. A SYNCING one cannot
  // be read; it is sent the delta whenever one is: it applies it in turn,
  // acknowledges it as applied, or leaves the chunk to its rebuild.
  std::map<uint64_t, ec::ChunkSet> names;
  for (uint32_t i : sources) {
    if (i < k) continue;
    SURGE_ASSIGN_OR_RETURN(PositionWindow w, probe_parity(forwarder_, place, key, i));
    names[w.applied_of(p)].set(i);
  }
  ec::ChunkSet lagging;
  std::optional<uint64_t> older;
  for (const auto& [v, at] : names) {
    if (v == rec.version) continue;
    if (older || v > rec.version) {
      return Status::Unavailable("parity positions name versions " + std::to_string(v) +
                                 " of data position " + std::to_string(p) + " beside its " +
                                 std::to_string(rec.version) +
                                 "; one delta cannot bring them together");
    }
    older = v;
    lagging = at;
  }
  // Every one applied it (the position it failed at has left the chain).
  // A SYNCING parity position's rebuild reads this chunk as held, unless
  // it rebuilt it before this update and then failed its delta without
  // the chain moving: not handled, scrub would report it.
  if (!older) return Status::OK();
  for (uint32_t i = k; i < n; ++i) {
    if (place.ec_members[i].state == mpb::MEMBER_SYNCING) lagging.set(i);
  }
  ChunkStore& chunks = chained_.chunks();
  SURGE_ASSIGN_OR_RETURN(const uint64_t size, chunks.size(rec));
  std::vector<std::byte> held(kCutWindow);
  auto held_newer = [&](uint64_t off) -> Result<NewerBytes> {
    const uint64_t len = off >= size ? 0 : std::min<uint64_t>(kCutWindow, size - off);
    for (uint64_t done = 0; done < len;) {
      SURGE_ASSIGN_OR_RETURN(
          size_t got, chunks.objects().read(rec.object_id, off + done,
                                            std::span<std::byte>(held).subspan(done, len - done)));
      if (got == 0) {
        std::memset(held.data() + done, 0, len - done);
        break;
      }
      done += got;
    }
    return NewerBytes{{held.data(), len}, rec.truncate_seq};
  };
  return send_difference(place, key, *rs, sources, *older, rec.version,
                         skip_all_but(place, lagging), held_newer);
}

}  // namespace surge::ods
