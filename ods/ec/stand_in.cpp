// Writes to an EC data position whose member is down. See stand_in.h.
#include "ods/ec/stand_in.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "net/proto/ods_write_pieces.h"
#include "ods/chain/chunk_lives.h"
#include "ods/ec/chunk_bytes.h"
#include "ods/ec/group_cut.h"
#include "ods/ec/position_reads.h"

namespace surge::ods {
namespace {

namespace pb = proto::ods;
namespace mpb = proto::mds;

// A cut that no longer fits the parity once the order is held (a data
// position's delta landed in between) is read again after a pause.
constexpr int kFitAttempts = 50;
constexpr auto kFitPause = std::chrono::milliseconds(10);
// Reads in a row (kFitPause apart) that find the parity naming two
// versions of p before the older is taken as lagging.
constexpr int kSplitReads = 10;

std::string member_text(const ChainPlace& place, uint32_t i) {
  const auto& m = place.ec_members[i];
  return "position " + std::to_string(i) + " (target " + std::to_string(m.target_id) + ", " +
         mpb::ChainMemberState_Name(m.state) + ")";
}

}  // namespace

EcStandIn::EcStandIn(ChainedChunks& chained, ChainView& view, ChainForwarder& forwarder,
                     net::BufferPool& pool, CodecOf codec, LaggingParity& lagging, SendDeltas send)
    : chained_(chained),
      view_(view),
      forwarder_(forwarder),
      pool_(pool),
      codec_(std::move(codec)),
      lagging_(lagging),
      send_(std::move(send)) {}

std::optional<uint32_t> EcStandIn::stand_in_of(const ChainPlace& place) {
  const uint32_t k = place.ec_data, n = k + place.ec_parity;
  for (uint32_t i = k; i < n && i < place.ec_members.size(); ++i) {
    if (place.ec_members[i].state == mpb::MEMBER_SERVING) return i;
  }
  return std::nullopt;
}

bool EcStandIn::position_down(const ChainPlace& place, uint32_t p) {
  if (p >= place.ec_members.size()) return false;
  const auto state = place.ec_members[p].state;
  return state != mpb::MEMBER_SERVING && state != mpb::MEMBER_SYNCING;
}

Status EcStandIn::write(net::RpcContext& ctx, const pb::WriteRequest& req, const ChainPlace& place,
                        net::PoolBuffer buf, pb::WriteReply& resp) {
  const uint32_t k = place.ec_data, p = req.ref().position();
  const ChunkKey key{req.ref().ino(), req.ref().slot(), p};
  const std::string what = "EC stand-in write of " + key.describe() + " of EC chain " +
                           std::to_string(place.chain_id) + " (version " +
                           std::to_string(place.version) + ") on target " +
                           std::to_string(view_.own_id()) + " from " + ctx.peer();
  if (!place.ec || p >= k || place.ec_position < k) {
    return Status::InvalidArgument(what + ": a stand-in write names a data position (0.." +
                                   std::to_string(k - 1) + ") and goes to a parity position");
  }
  if (req.ec_hold() || req.ec_group_versions_size() > 0) {
    return Status::InvalidArgument(what +
                                   ": a stand-in write is a plain write (no ec_hold, no "
                                   "group versions)");
  }
  const auto stand_in = stand_in_of(place);
  if (!stand_in || *stand_in != place.ec_position) {
    return Status::WrongTarget(
        what + ": this member holds " + member_text(place, place.ec_position) +
        "; the stand-in is " +
        (stand_in ? member_text(place, *stand_in) : "none (no parity serves)"));
  }
  if (!position_down(place, p)) {
    return Status::WrongTarget(what + ": " + member_text(place, p) + " takes its own writes");
  }
  // K positions beside p must serve to rebuild its bytes. Checked before
  // the MDS marks p's member: a mark without a write would keep that
  // member from coming back as it is for nothing, and with more members
  // down the chain could then wait for it for good.
  uint32_t serving = 0;
  for (uint32_t i = 0; i < place.ec_members.size(); ++i) {
    serving += i != p && place.ec_members[i].state == mpb::MEMBER_SERVING;
  }
  if (serving < k) {
    return Status::Unavailable(what + ": only " + std::to_string(serving) +
                               " other positions serve, " + std::to_string(k) +
                               " needed to rebuild its bytes");
  }
  SURGE_RETURN_IF_ERROR(noted(place, p, what));
  SURGE_RETURN_IF_ERROR(cut(place, req.ref(), what));
  const uint64_t off = req.offset(), len = req.length();
  const size_t cap = buf.capacity();
  SURGE_RETURN_IF_ERROR(check_write_request(
      ctx, req, chained_.chunks().objects().options().max_object_size, cap, what));
  const uint32_t pbytes = req.piece_bytes();
  const std::vector<uint32_t> whole_crc{req.crc32c()};
  // One update per window: a cut is rebuilt per window, and windows end
  // at multiples of every piece size, so pieces never straddle two.
  const uint64_t unit = std::min<uint64_t>(cap, kCutWindow);
  size_t first_piece = 0;
  uint64_t version = 0;
  for (uint64_t done = 0; done < len;) {
    const uint64_t at = off + done;
    const uint64_t n = std::min<uint64_t>(len - done, unit - at % unit);
    if (pbytes == 0 && n != len) {
      return Status::InvalidArgument(what + ": over one window without piece CRCs");
    }
    const size_t npieces = pbytes ? pb::piece_count(at, n, pbytes) : 1;
    std::span<const uint32_t> crcs =
        pbytes ? std::span<const uint32_t>(req.piece_crc32c().data() + first_piece, npieces)
               : std::span<const uint32_t>(whole_crc);
    SURGE_RETURN_IF_ERROR(pull_verified(ctx, done, at, n, pbytes, crcs, buf.data(), what).status());
    SURGE_ASSIGN_OR_RETURN(version, write_unit(place, req.ref(), at, {buf.data(), n}, false, what));
    first_piece += npieces;
    done += n;
  }
  resp.set_chunk_version(version);
  return Status::OK();
}

Status EcStandIn::noted(const ChainPlace& place, uint32_t p, const std::string& what) {
  const auto key = std::make_tuple(place.chain_id, place.version, p);
  {
    std::lock_guard lk(mu_);
    if (noted_.count(key) != 0) return Status::OK();
  }
  proto::mds::NoteStandInRequest req;
  req.set_chain_id(place.chain_id);
  req.set_chain_version(place.version);
  req.set_position(p);
  req.set_stand_in_target_id(view_.own_id());
  SURGE_RETURN_IF_ERROR(view_.note_stand_in(req).WithContext(what));
  std::lock_guard lk(mu_);
  // Entries of versions the chain has left are never asked for again.
  std::erase_if(noted_, [&](const auto& k) {
    return std::get<0>(k) == place.chain_id && std::get<1>(k) < place.version;
  });
  noted_.insert(key);
  return Status::OK();
}

Status EcStandIn::complete_lagging(const ChainPlace& place, const ChainPlace& as_p,
                                   const ChunkKey& key_p, const ec::RsCodec& rs,
                                   const std::string& what) {
  const uint32_t n = place.ec_data + place.ec_parity, p = as_p.ec_position;
  std::vector<uint32_t> sources;
  for (uint32_t i = 0; i < n; ++i) {
    if (i != p && place.ec_members[i].state == mpb::MEMBER_SERVING) sources.push_back(i);
  }
  PositionBuffers bufs = position_buffers(place);
  int splits = 0;  // reads in a row whose parity named two versions of p
  for (int attempt = 0; attempt < kFitAttempts; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(kFitPause);
    auto cut = read_cut(forwarder_, as_p, key_p, rs, sources, 0, std::nullopt, bufs);
    if (!cut.ok()) return cut.status().WithContext(what);
    if (cut->names.size() <= 1) return Status::OK();
    // Two versions of p named: an update caught between the parity
    // positions (read apart), or one that reached some only. Read again;
    // if they still differ, the update is completed from the group.
    if (++splits < kSplitReads) continue;
    splits = 0;
    SURGE_RETURN_IF_ERROR(
        lagging_.roll_forward(as_p, key_p, sources, cut->names).WithContext(what));
  }
  return Status::Unavailable(what + ": the parity positions kept naming two versions of position " +
                             std::to_string(p) + " (" + std::to_string(kFitAttempts) + " tries)");
}

Status EcStandIn::cut(const ChainPlace& place, const pb::ChunkRef& ref, const std::string& what) {
  if (ref.truncate_seq() == 0) return Status::OK();
  const uint32_t p = ref.position(), own = place.ec_position;
  const ChunkKey key_own{ref.ino(), ref.slot(), own};
  // Read without the order: only whether a cut may be needed, and how far
  // the parity (so any data position's bytes) reaches. Each window checks
  // again under the order.
  SURGE_ASSIGN_OR_RETURN(auto found, chained_.record(key_own, ref_in_chain(place, key_own), false));
  if (!found) return Status::OK();  // no parity: p holds nothing either
  const ChunkRecord& rec = *found;
  if (rec.applied_count != place.ec_data) return Status::OK();  // write_unit reports it
  if (ref.truncate_seq() <= std::max(rec.applied_truncate[p], rec.truncate_seq))
    return Status::OK();
  SURGE_ASSIGN_OR_RETURN(uint64_t held, chained_.chunks().size(rec));
  const uint64_t size = ref.truncate_size();
  if (held <= size) return Status::OK();
  const std::string cutting = what + " (cutting position " + std::to_string(p) + " to " +
                              std::to_string(size) + " for truncate generation " +
                              std::to_string(ref.truncate_seq()) + " on its behalf)";
  SURGE_ASSIGN_OR_RETURN(net::PoolBuffer buf, pool_.acquire(kCutWindow, std::chrono::seconds(30)));
  // Windows of the write path's alignment, from the end backwards as a
  // data position cuts.
  for (uint64_t end = held; end > size;) {
    const uint64_t at = std::max(size, (end - 1) / kCutWindow * kCutWindow);
    std::memset(buf.data(), 0, end - at);
    SURGE_RETURN_IF_ERROR(
        write_unit(place, ref, at, {buf.data(), end - at}, true, cutting).status());
    end = at;
  }
  return Status::OK();
}

Result<uint64_t> EcStandIn::write_unit(const ChainPlace& place, const pb::ChunkRef& ref,
                                       uint64_t at, std::span<std::byte> bytes, bool cutting,
                                       const std::string& what) {
  // Synced on every parity position before the reply, sync asked or not:
  // the parity is the new bytes' only copy, and a client's fsync skips a
  // position that is down.
  constexpr bool sync = true;
  const uint32_t k = place.ec_data, n = k + place.ec_parity, p = ref.position();
  const uint32_t own = place.ec_position;
  const uint64_t len = bytes.size();
  SURGE_ASSIGN_OR_RETURN(const ec::RsCodec* rs, codec_(place));
  // The group seen from p.
  ChainPlace as_p = place;
  as_p.ec_position = p;
  as_p.state = place.ec_members[p].state;
  const ChunkKey key_p{ref.ino(), ref.slot(), p}, key_own{ref.ino(), ref.slot(), own};
  // K copies beside p: the other data positions that serve, this member's
  // parity (read here, under its order), and as many other parity
  // positions as are still needed (only while another data position is
  // down too). Every other serving parity position is read: p's next
  // version goes to each, so each must name the version this one does.
  std::vector<uint32_t> data, others;
  for (uint32_t q = 0; q < k; ++q) {
    if (q != p && place.ec_members[q].state == mpb::MEMBER_SERVING) data.push_back(q);
  }
  for (uint32_t j = k; j < n; ++j) {
    if (j != own && place.ec_members[j].state == mpb::MEMBER_SERVING) others.push_back(j);
  }
  const size_t extra = data.size() + 1 >= k ? 0 : k - 1 - data.size();  // parity copies used
  if (others.size() < extra) {
    return Status::Unavailable(what + ": only " + std::to_string(data.size() + others.size() + 1) +
                               " positions beside it serve, " + std::to_string(k) + " needed");
  }
  ChunkStore& chunks = chained_.chunks();
  std::vector<std::vector<std::byte>> copy(n);
  for (uint32_t q : data) copy[q].resize(len);
  for (uint32_t j : others) copy[j].resize(len);
  copy[own].resize(len);
  copy[p].resize(len);
  std::vector<PositionWindow> read(n);
  std::vector<uint32_t> reads = data;  // data copies first, then the other parity positions
  reads.insert(reads.end(), others.begin(), others.end());
  for (int attempt = 0; attempt < kFitAttempts; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(kFitPause);
    // Read without the order (a data position's delta to this parity
    // needs it); checked against the parity once it is held. Data copies
    // clean only: a dirty one's bytes may not be of the version it names.
    bool dirty = false;
    for (uint32_t i : reads) {
      auto w = read_position(forwarder_, place, i, {key_p.ino, key_p.slot, i}, at, copy[i], i < k);
      if (!w.ok() && w.status().code() == Code::kChunkDirty) {
        dirty = true;
        break;
      }
      if (!w.ok()) return w.status().WithContext(what);
      std::memset(copy[i].data() + w->length, 0, len - w->length);
      read[i] = std::move(*w);
    }
    if (dirty) continue;
    std::optional<UpdateOrder::Guard> order(std::in_place, chained_.order(), key_own);
    SURGE_RETURN_IF_ERROR(chained_.still_current(place, what));
    SURGE_ASSIGN_OR_RETURN(auto found,
                           chained_.record(key_own, ref_in_chain(place, key_own), true));
    ChunkRecord rec = chained_.begin_life(*found);
    if (rec.applied_count == 0) rec.applied_count = k;
    if (rec.applied_count != k) {
      return Status::Corruption(what + ": the parity record holds " +
                                std::to_string(rec.applied_count) + " applied versions for a " +
                                std::to_string(k) + "-data-chunk group");
    }
    if (rec.incomplete || rec.dirty()) continue;  // left so by a crash: repaired by a rebuild
    bool fits = true, split = false;
    for (uint32_t q : data) fits = fits && rec.applied[q] == read[q].version;
    for (size_t i = 0; i < others.size(); ++i) {
      const PositionWindow& w = read[others[i]];
      split = split || w.applied_of(p) != rec.applied[p];
      for (uint32_t q = 0; i < extra && q < k; ++q)
        fits = fits && w.applied_of(q) == rec.applied[q];
    }
    if (split) {
      // Another parity position names another version of p: only this
      // member's stand-in deltas move it, and none is under way while the
      // order is held, so one reached some positions only (or p was lost
      // mid-write). Brought together first, so the next comes in turn
      // everywhere.
      order.reset();
      SURGE_RETURN_IF_ERROR(complete_lagging(place, as_p, key_p, *rs, what));
      continue;
    }
    if (!fits) continue;  // a delta landed between the reads and the order
    // The truncate generation p is known to have applied: its last delta's,
    // or this parity's own (the MDS sends a parity position a truncate only
    // after every data position of its group applied it). A cut goes under
    // it and ends once p has applied the ref's (another write's cut came
    // first); a write after cut() records the ref's.
    uint64_t p_truncate = std::max(rec.applied_truncate[p], rec.truncate_seq);
    if (cutting && ref.truncate_seq() <= p_truncate) return rec.applied[p];
    if (!cutting) p_truncate = std::max(p_truncate, ref.truncate_seq());
    // p's bytes as the group holds them: from the copies read and this
    // parity's own bytes.
    SURGE_RETURN_IF_ERROR(read_range(chunks, rec, at, copy[own], what));
    std::vector<uint8_t*> ptrs(n, nullptr);
    ec::ChunkSet present, want;
    for (uint32_t q : data) present.set(q);
    for (size_t i = 0; i < extra; ++i) present.set(others[i]);
    present.set(own);
    want.set(p);
    for (uint32_t i = 0; i < n; ++i) {
      if (present.test(i) || i == p) ptrs[i] = reinterpret_cast<uint8_t*>(copy[i].data());
    }
    SURGE_RETURN_IF_ERROR(rs->Reconstruct(ptrs, present, want, len).WithContext(what));
    xor_into(bytes.data(), copy[p].data(), len);  // bytes now hold the delta
    const uint64_t v =
        rec.applied[p] == 0 ? life_base(view_.own_id(), rec.object_id) + 1 : rec.applied[p] + 1;
    std::byte* parity = copy[own].data();
    SURGE_RETURN_IF_ERROR(rs->UpdateOneParity(p, own - k,
                                              reinterpret_cast<const uint8_t*>(bytes.data()),
                                              reinterpret_cast<uint8_t*>(parity), len)
                              .WithContext(what));
    // Dirty first, then the fence (stand_in.h): a rebuild of p that read
    // this parity clean has moved the chain on, and that is seen here.
    const ChunkRecord before = rec;
    const uint64_t pv = rec.version + 1;
    rec.version = pv;
    rec.applied[p] = v;
    rec.applied_truncate[p] = p_truncate;
    SURGE_RETURN_IF_ERROR(chunks.index().put(key_own, rec, false).WithContext(what));
    Status fence = chained_.still_current(place, what);
    if (!fence.ok()) {
      SURGE_RETURN_IF_ERROR(chunks.index().put(key_own, before, false).WithContext(what));
      chained_.waits().changed();
      return fence;
    }
    iovec seg{parity, len};
    auto stored = chunks.objects().write(rec.object_id, at, {&seg, 1}, sync);
    if (!stored.ok()) return stored.status().WithContext(what);
    pb::ChunkRef ref_p = ref_in_chain(as_p, key_p);
    ref_p.set_truncate_seq(p_truncate);
    Status sent = send_(as_p, ref_p, at, bytes, v, p_truncate, sync, uint64_t{1} << own);
    // Committed here either way: a parity position the delta did not reach
    // names the version before, and the next stand-in write of the chunk
    // (or p's rebuild) completes it from the group.
    rec.committed_version = pv;
    SURGE_RETURN_IF_ERROR(chunks.index().put(key_own, rec, sync).WithContext(what));
    chained_.waits().changed();
    if (!sent.ok()) return sent.WithContext(what);
    return v;
  }
  return Status::Unavailable(what + ": the group kept changing under the read (" +
                             std::to_string(kFitAttempts) + " tries); retry");
}

}  // namespace surge::ods
