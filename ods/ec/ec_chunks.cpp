// EcChunks: EC data-position writes, parity deltas and reads. See
// ec_chunks.h.
#include "ods/ec/ec_chunks.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <optional>

#include "common/log.h"
#include "net/proto/ods_write_pieces.h"
#include "ods/chain/chunk_lives.h"
#include "ods/ec/chunk_bytes.h"
#include "ods/ec/position_reads.h"

namespace surge::ods {
namespace {

namespace pb = proto::ods;

// As ChainedChunks: how long a delta that came before its source's previous
// one waits for it (a source sends a chunk's deltas one at a time, but a
// resend after a failure can cross a late original).
constexpr auto kTurnWait = std::chrono::milliseconds(500);
// How long a client's parity of a full group waits for its turn before it
// is declined (its data positions then send deltas, which is always
// right). Two runs of one chunk set in flight at once from one client (its
// write behind keeps several batches going, and sends a batch's parity only
// when it waits for the batch) can get their versions in crossed orders at
// two data positions; the older run's parity then needs the newer one's,
// which is not sent until the older is done. Waiting kTurnWait there cost
// half a second per crossing (through the mount, 1 GiB of 1 MiB writes met
// 4 to 14 of them).
constexpr auto kParityTurnWait = std::chrono::milliseconds(20);
constexpr size_t kReadPieceBytes = 256 << 10;
// A delta's most bytes: what a receiving lane's pool buffer holds.
constexpr uint64_t kMaxDelta = 1 << 20;

ChunkKey key_of(const pb::ChunkRef& ref) {
  return {ref.ino(), ref.slot(), ref.position()};
}

std::string name_of(const pb::ChunkRef& ref) {
  return key_of(ref).describe() + " of EC chain " + std::to_string(ref.chain_id());
}

std::string version_text(uint64_t v) {
  return "version " + std::to_string(v) + " (life " + std::to_string(life_of(v)) + ", update " +
         std::to_string(v & kSeqMask) + ")";
}

uint64_t bit(uint32_t position) {
  return uint64_t{1} << position;
}

// The CRCs a request's payload is checked against: one per piece, or with
// no pieces `whole`, the payload's own.
template <typename Req>
std::span<const uint32_t> payload_crcs(const Req& req, const uint32_t& whole) {
  return req.piece_bytes()
             ? std::span<const uint32_t>(req.piece_crc32c().data(), req.piece_crc32c_size())
             : std::span<const uint32_t>(&whole, 1);
}

// Unavailable: own_id's position of place's chain is being rebuilt (its
// bytes are stale: no update may start from them).
Status not_serving(const ChainPlace& place, uint32_t own_id, const std::string& what) {
  return Status::Unavailable(what + ": target " + std::to_string(own_id) +
                             " is being rebuilt in the chain (version " +
                             std::to_string(place.version) + ")");
}

// Unavailable: fewer than K positions of place's chain serve. A write or
// cut then could reach too few positions to be rebuilt from, and a member
// away would miss it with nothing to say so: the MDS takes a member back
// as it is when no chain version with K serving was made since it went
// (ChainMember.current_while_away), which holds only if none lands.
Status too_few_serve(const ChainPlace& place, const std::string& what) {
  uint32_t serving = 0;
  for (const auto& m : place.ec_members) serving += m.state == proto::mds::MEMBER_SERVING;
  if (serving >= place.ec_data) return Status::OK();
  return Status::Unavailable(what + ": only " + std::to_string(serving) +
                             " positions of EC chain " + std::to_string(place.chain_id) +
                             " (version " + std::to_string(place.version) + ") serve, " +
                             std::to_string(place.ec_data) + " needed for a write to land");
}

}  // namespace

Status check_ec_position(const pb::ChunkRef& ref, const ChainPlace& place, uint32_t own_id,
                         const std::string& what) {
  if (!place.ec) {
    return Status::InvalidArgument(what + ": chain " + std::to_string(place.chain_id) +
                                   " is not an EC chain");
  }
  if (ref.position() != place.ec_position) {
    return Status::WrongTarget(what + ": target " + std::to_string(own_id) + " holds position " +
                               std::to_string(place.ec_position) + " of EC chain " +
                               std::to_string(place.chain_id) + " (version " +
                               std::to_string(place.version) + "), not position " +
                               std::to_string(ref.position()));
  }
  return Status::OK();
}

EcChunks::EcChunks(ChainedChunks& chained, ChainView& view, ChainForwarder& forwarder,
                   net::BufferPool& pool, size_t kept_deltas)
    : chained_(chained),
      view_(view),
      forwarder_(forwarder),
      pool_(pool),
      kept_(kept_deltas),
      lagging_(
          chained, view, forwarder, [this](const ChainPlace& p) { return codec(p); },
          [this](const ChainPlace& place, const ChunkKey& key, uint64_t at,
                 std::span<const std::byte> delta, uint64_t v, uint64_t truncate_seq,
                 uint64_t skip) {
            return send_lost_delta(place, key, at, delta, v, truncate_seq, skip);
          }),
      rebuild_(
          chained, view, forwarder, [this](const ChainPlace& p) { return codec(p); },
          [this](const ChunkKey& key) { kept_.erase(key); }, lagging_),
      stand_in_(
          chained, view, forwarder, pool, [this](const ChainPlace& p) { return codec(p); },
          lagging_,
          [this](const ChainPlace& as_source, const pb::ChunkRef& ref, uint64_t at,
                 std::span<const std::byte> delta, uint64_t v, uint64_t truncate_seq, bool sync,
                 uint64_t skip) {
            return send_deltas(as_source, ref, at, delta, v, truncate_seq, sync,
                               "stand-in delta of " + name_of(ref) + " at " + version_text(v), skip,
                               true);
          }) {
  sweeper_ = std::jthread([this](std::stop_token stop) {
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lk(mu);
    while (!cv.wait_for(lk, stop, std::chrono::seconds(1), [] { return false; })) {
      if (stop.stop_requested()) break;
      note_unsent();
      send_expired();
    }
  });
}

Result<const ec::RsCodec*> EcChunks::codec(const ChainPlace& place) {
  std::lock_guard lk(codecs_mu_);
  auto& c = codecs_[{place.ec_data, place.ec_parity}];
  if (!c) {
    SURGE_ASSIGN_OR_RETURN(ec::RsCodec made, ec::RsCodec::Create(place.ec_data, place.ec_parity));
    c = std::make_unique<ec::RsCodec>(std::move(made));
  }
  return c.get();
}

Status EcChunks::write(net::RpcContext& ctx, const pb::WriteRequest& req, const ChainPlace& place,
                       net::PoolBuffer buf, pb::WriteReply& resp) {
  if (req.ec_stand_in()) return stand_in_.write(ctx, req, place, std::move(buf), resp);
  const std::string what = "EC write of " + name_of(req.ref());
  SURGE_RETURN_IF_ERROR(check_ec_position(req.ref(), place, view_.own_id(), what));
  SURGE_RETURN_IF_ERROR(too_few_serve(place, what));
  const bool parity = place.ec_position >= place.ec_data;
  if (parity && req.ec_group_versions_size() == 0) {
    return Status::InvalidArgument(what + ": position " + std::to_string(place.ec_position) +
                                   " holds parity; writes go to data positions 0.." +
                                   std::to_string(place.ec_data - 1) +
                                   " (or a full group's parity, with its versions)");
  }
  // A data position being rebuilt takes writes (each chunk rebuilt
  // first); the client's parity goes only where parity serves.
  const bool takes = place.state == proto::mds::MEMBER_SERVING ||
                     (!parity && place.state == proto::mds::MEMBER_SYNCING);
  if (!takes) return not_serving(place, view_.own_id(), what);
  const uint64_t off = req.offset(), len = req.length();
  const size_t cap = buf.capacity();
  SURGE_RETURN_IF_ERROR(check_write_request(
      ctx, req, chained_.chunks().objects().options().max_object_size, cap, what));
  if (parity) return write_parity(ctx, req, place, std::move(buf), resp);
  const uint32_t pbytes = req.piece_bytes();
  const std::vector<uint32_t> whole_crc{req.crc32c()};
  // A hold is one update (a sync write is never held: its reply means durable).
  const bool hold = req.ec_hold() && !req.sync() && off % cap + len <= cap;
  bool held = false;
  size_t first_piece = 0;
  ChunkRecord rec;  // as the last unit left it
  // One update per unit, as in replicated chains: units end at multiples
  // of the buffer size, so pieces never straddle two.
  for (uint64_t done = 0; done < len;) {
    const uint64_t at = off + done;
    const uint64_t n = std::min<uint64_t>(len - done, cap - at % cap);
    const size_t npieces = pbytes ? pb::piece_count(at, n, pbytes) : 1;
    std::span<const uint32_t> crcs =
        pbytes ? std::span<const uint32_t>(req.piece_crc32c().data() + first_piece, npieces)
               : std::span<const uint32_t>(whole_crc);
    SURGE_ASSIGN_OR_RETURN(auto pieces,
                           pull_verified(ctx, done, at, n, pbytes, crcs, buf.data(), what));
    SURGE_RETURN_IF_ERROR(write_unit(place, req.ref(), at, n, buf, pieces,
                                     req.sync() && done + n == len, hold, what, rec, held));
    first_piece += npieces;
    done += n;
  }
  SURGE_ASSIGN_OR_RETURN(uint64_t size, chained_.chunks().size(rec));
  resp.set_object_size(size);
  resp.set_chunk_version(rec.version);
  resp.set_ec_held(held);
  // The parity positions synced the last delta before replying.
  if (req.sync()) SURGE_RETURN_IF_ERROR(chained_.chunks().sync(key_of(req.ref()), rec));
  return Status::OK();
}

Status EcChunks::rebuilt_first(const ChainPlace& place, const ChunkKey& key,
                               const std::string& what) {
  if (place.state != proto::mds::MEMBER_SYNCING || rebuild_.rebuilt(place, key)) {
    return Status::OK();
  }
  return rebuild_.rebuild(place, key).WithContext(what);
}

Status EcChunks::write_unit(const ChainPlace& place, const pb::ChunkRef& ref, uint64_t at,
                            uint64_t n, net::PoolBuffer& buf,
                            const std::vector<PulledPiece>& pieces, bool sync, bool hold,
                            const std::string& what, ChunkRecord& rec, bool& held) {
  held = false;
  const ChunkKey key = key_of(ref);
  ChunkStore& chunks = chained_.chunks();
  auto order = chained_.order().lock(key);
  SURGE_RETURN_IF_ERROR(chained_.still_current(place, what));
  SURGE_RETURN_IF_ERROR(rebuilt_first(place, key, what));
  SURGE_ASSIGN_OR_RETURN(auto found, chained_.record(key, ref, true));
  rec = chained_.begin_life(*found);
  const bool cut_first = ref.truncate_seq() > rec.truncate_seq;
  const bool holding = hold && kept_.held_bytes() + n <= kMaxHeldBytes;
  // Deltas not yet sent go first (parity applies a position's in version
  // order), unless this update is held behind held ones too.
  if (rec.dirty() &&
      (!holding || cut_first || !kept_.all_held(key, rec.committed_version + 1, rec.version))) {
    SURGE_RETURN_IF_ERROR(send_kept(place, ref, rec, rec.version, 0, what));
  }
  if (cut_first) {
    // A truncate this chunk has not applied: cut first, as a chain head does.
    SURGE_RETURN_IF_ERROR(cut(place, ref, rec, ref.truncate_size(), ref.truncate_seq(), what));
  }
  std::unique_ptr<std::byte[]> old(new std::byte[n]);  // read_range fills every byte
  SURGE_RETURN_IF_ERROR(read_range(chunks, rec, at, {old.get(), n}, what));
  rec.version += 1;
  SURGE_RETURN_IF_ERROR(chunks.index().put(key, rec, false).WithContext(what));
  Status stored = store_pulled(chunks.objects(), rec.object_id, at, buf.data(), pieces, what);
  if (!stored.ok()) {
    // Part of the range may have changed (a full disk, a failed piece):
    // the parity gets whatever did, so the version names the bytes held,
    // and the write fails.
    if (read_range(chunks, rec, at, {buf.data(), n}, what).ok() &&
        send_kept(place, ref, rec, rec.version - 1, 0, what).ok()) {
      xor_into(buf.data(), old.get(), n);
      (void)deliver(place, ref, rec, rec.version, rec.truncate_seq, at, {buf.data(), n}, false,
                    what);
    }
    return stored;
  }
  if (holding) {
    // Step 1 of a full-group write: the client sends the parity; the
    // commit says which parity positions still need this delta.
    xor_into(old.get(), buf.data(), n);  // old now holds the delta
    KeptDelta d;
    d.version = rec.version;
    d.at = at;
    d.truncate_seq = rec.truncate_seq;
    d.delta = std::move(old);
    d.length = n;
    d.held = true;
    d.since = std::chrono::steady_clock::now();
    d.ref = ref;
    held = kept_.put(key, std::move(d));
    if (held) return Status::OK();
    return Status::Internal(what + ": a held delta was refused");  // put() takes every hold
  }
  xor_into(buf.data(), old.get(), n);  // buf now holds the delta
  return deliver(place, ref, rec, rec.version, rec.truncate_seq, at, {buf.data(), n}, sync, what);
}

Status EcChunks::deliver(const ChainPlace& place, const pb::ChunkRef& ref, ChunkRecord& rec,
                         uint64_t v, uint64_t truncate_seq, uint64_t at,
                         std::span<const std::byte> delta, bool sync, const std::string& what,
                         uint64_t skip) {
  const ChunkKey key = key_of(ref);
  // Sent to the parity positions in the write chain only, and committed
  // then: with fewer than K serving, a parity position away may come back
  // as it is (current_while_away), so the delta is kept for it instead.
  Status sent = too_few_serve(place, what);
  if (sent.ok()) sent = send_deltas(place, ref, at, delta, v, truncate_seq, sync, what, skip);
  if (!sent.ok()) {
    keep_pending(ref, v, at, truncate_seq, delta);
    return sent;
  }
  rec.committed_version = v;
  SURGE_RETURN_IF_ERROR(chained_.chunks().index().put(key, rec, false).WithContext(what));
  chained_.waits().changed();
  return Status::OK();
}

void EcChunks::keep_pending(const pb::ChunkRef& ref, uint64_t v, uint64_t at, uint64_t truncate_seq,
                            std::span<const std::byte> delta) {
  const ChunkKey key = key_of(ref);
  KeptDelta d;
  d.version = v;
  d.at = at;
  d.truncate_seq = truncate_seq;
  d.delta.reset(new std::byte[delta.size()]);
  std::memcpy(d.delta.get(), delta.data(), delta.size());
  d.length = delta.size();
  d.since = std::chrono::steady_clock::now();
  d.ref = ref;
  (void)kept_.put(key, std::move(d));
}

void EcChunks::note_unsent() {
  for (const ChainPlace& place : view_.places()) {
    if (!place.ec || place.state != proto::mds::MEMBER_SERVING ||
        place.ec_position >= place.ec_data || !noted_chains_.insert(place.chain_id).second) {
      continue;
    }
    std::optional<ChunkKey> after;
    for (;;) {
      auto page = chained_.chunks().index().list(place.chain_id, after, kNotePage);
      if (!page.ok()) {
        SLOG_WARN("EC chain {} on target {}: listing its chunks for updates not sent: {}",
                  place.chain_id, view_.own_id(), page.status().ToString());
        noted_chains_.erase(place.chain_id);  // the next sweep tries again
        break;
      }
      for (const auto& [key, rec] : *page) {
        if (!rec.dirty() || rec.incomplete || key.position != place.ec_position) continue;
        KeptDelta marker;
        marker.version = rec.version;
        marker.since = std::chrono::steady_clock::now() - kResendAfter;
        marker.ref = ref_in_chain(place, key);
        marker.ref.set_truncate_seq(rec.truncate_seq);
        const std::string name = name_of(marker.ref);
        // A chunk with anything kept is under way (a failed or held delta).
        if (kept_.mark_if_none(key, std::move(marker))) {
          SLOG_INFO(
              "{}: its update {} was not known applied at every parity position when this "
              "server began to serve it; its delta is rebuilt and sent",
              name, version_text(rec.version));
        }
      }
      if (page->size() < kNotePage) break;
      after = page->back().first;
    }
  }
}

void EcChunks::send_expired() {
  const auto due = kept_.due(std::chrono::steady_clock::now(), kHoldTimeout, kResendAfter);
  for (const auto& [key, ref] : due) {
    const std::string what =
        "EC write of " + name_of(ref) + " (its delta held or failed, and not sent since)";
    auto order = chained_.order().lock(key);
    auto place = view_.place(ref.chain_id());
    auto found = place.ok() ? chained_.record(key, ref, false)
                            : Result<std::optional<ChunkRecord>>(place.status());
    if (!found.ok() || !*found || !(*found)->dirty() || !place->ec) {
      // Gone, or sent by a later update: nothing is left to send.
      if (found.ok()) kept_.erase(key);
      continue;
    }
    if (!too_few_serve(*place, what).ok()) continue;  // kept until K serve (deliver())
    ChunkRecord rec = **found;
    Status st = send_kept(*place, ref, rec, rec.version, 0, what);
    if (!st.ok()) SLOG_WARN("{}", st.ToString());
  }
}

Status EcChunks::cut(const ChainPlace& place, const pb::ChunkRef& ref, ChunkRecord& rec,
                     uint64_t size, uint64_t seq, const std::string& what) {
  ChunkStore& chunks = chained_.chunks();
  const ChunkKey key = key_of(ref);
  SURGE_ASSIGN_OR_RETURN(uint64_t held, chunks.size(rec));
  if (held > size) {
    SURGE_ASSIGN_OR_RETURN(net::PoolBuffer buf, pool_.acquire(kMaxDelta, std::chrono::seconds(30)));
    const uint64_t unit = std::min<uint64_t>(buf.capacity(), kMaxDelta);
    // From the end backwards: the bytes left always end where the chunk
    // does, and each cut's version names exactly the bytes it left.
    for (uint64_t end = held; end > size;) {
      const uint64_t at = end - std::min(unit, end - size);
      const uint64_t n = end - at;
      SURGE_RETURN_IF_ERROR(read_range(chunks, rec, at, {buf.data(), n}, what));
      rec.version += 1;
      SURGE_RETURN_IF_ERROR(chunks.index().put(key, rec, false).WithContext(what));
      SURGE_RETURN_IF_ERROR_CTX(chunks.objects().truncate(rec.object_id, at), what);
      // old ^ zeros: the delta of a cut is the bytes cut.
      SURGE_RETURN_IF_ERROR(deliver(place, ref, rec, rec.version, rec.truncate_seq, at,
                                    {buf.data(), n}, false, what));
      end = at;
    }
  }
  if (seq > rec.truncate_seq) {
    rec.truncate_seq = seq;
    SURGE_RETURN_IF_ERROR(chunks.index().put(key, rec, false));
  }
  return Status::OK();
}

Status EcChunks::truncate(const pb::TruncateRequest& req, const ChainPlace& place,
                          pb::TruncateReply& resp) {
  const std::string what =
      "EC truncate of " + name_of(req.ref()) + " to " + std::to_string(req.size());
  SURGE_RETURN_IF_ERROR(check_ec_position(req.ref(), place, view_.own_id(), what));
  if (req.size() > chained_.chunks().objects().options().max_object_size) {
    return Status::InvalidArgument(what + ": past the maximum chunk size");
  }
  const ChunkKey key = key_of(req.ref());
  auto order = chained_.order().lock(key);
  SURGE_RETURN_IF_ERROR(chained_.still_current(place, what));
  const bool parity = place.ec_position >= place.ec_data;
  if (!parity) SURGE_RETURN_IF_ERROR(too_few_serve(place, what));
  // A data position being rebuilt: its copy is stale until then (a cut of
  // it would send the parity a delta of bytes the group does not hold).
  if (!parity) SURGE_RETURN_IF_ERROR(rebuilt_first(place, key, what));
  resp.set_chunk_version(0);
  // A chunk never written holds nothing to cut.
  SURGE_ASSIGN_OR_RETURN(auto found, chained_.record(key, req.ref(), false));
  if (!found) return Status::OK();
  ChunkRecord rec = *found;
  const uint64_t seq = req.ref().truncate_seq();
  if (seq != 0 && rec.truncate_seq >= seq) {
    resp.set_chunk_version(rec.version);
    return Status::OK();  // applied before (a later writer may have written since)
  }
  if (parity) {
    // Parity: the data positions' cuts send the bytes they cut, which
    // leaves the parity of zeros (zero) wherever every data chunk is cut.
    if (seq > rec.truncate_seq) {
      rec.truncate_seq = seq;
      SURGE_RETURN_IF_ERROR(chained_.chunks().index().put(key, rec, false));
    }
    resp.set_chunk_version(rec.version);
    return Status::OK();
  }
  if (rec.dirty()) SURGE_RETURN_IF_ERROR(send_kept(place, req.ref(), rec, rec.version, 0, what));
  SURGE_RETURN_IF_ERROR(cut(place, req.ref(), rec, req.size(), seq, what));
  resp.set_chunk_version(rec.version);
  return Status::OK();
}

Status EcChunks::remove(const pb::RemoveRequest& req, const ChainPlace& place,
                        pb::RemoveReply& resp) {
  const std::string what = "EC remove of " + name_of(req.ref());
  SURGE_RETURN_IF_ERROR(check_ec_position(req.ref(), place, view_.own_id(), what));
  const ChunkKey key = key_of(req.ref());
  auto order = chained_.order().lock(key);
  SURGE_RETURN_IF_ERROR(chained_.still_current(place, what));
  SURGE_ASSIGN_OR_RETURN(auto rec, chained_.record(key, req.ref(), false));
  const uint64_t seq = req.ref().truncate_seq();
  if (rec && seq != 0 && rec->truncate_seq >= seq) {
    resp.set_existed(true);  // a newer layout's chunk of the same name stays
    return Status::OK();
  }
  bool existed = false;
  if (rec) {
    existed = chained_.chunks().objects().stat(rec->object_id).ok();
    SURGE_RETURN_IF_ERROR(chained_.chunks().remove(key, *rec, false));
  }
  kept_.erase(key);
  resp.set_existed(existed);
  return Status::OK();
}

Status EcChunks::sync(const pb::ChunkRef& ref, const ChainPlace& place) {
  const std::string what = "EC sync of " + name_of(ref);
  SURGE_RETURN_IF_ERROR(check_ec_position(ref, place, view_.own_id(), what));
  const ChunkKey key = key_of(ref);
  auto order = chained_.order().lock(key);
  SURGE_ASSIGN_OR_RETURN(auto rec, chained_.record(key, ref, false));
  if (!rec) return Status::OK();
  return chained_.chunks().sync(key, *rec).WithContext(what);
}

Status EcChunks::send_kept(const ChainPlace& place, const pb::ChunkRef& ref, ChunkRecord& rec,
                           uint64_t upto, uint64_t skip, const std::string& what) {
  const ChunkKey key = key_of(ref);
  // Kept for a parity position that may come back as it is (deliver()).
  SURGE_RETURN_IF_ERROR(too_few_serve(place, what));
  // Versions of one chunk's life follow each other: the updates not yet
  // at every parity position are committed_version + 1 .. version.
  while (rec.committed_version < upto) {
    const uint64_t v = rec.committed_version + 1;
    // Older ones are sent already (a failed send keeps them again).
    KeptDelta p = kept_.take(key, v);
    if (!p.delta && v == rec.version) {
      // Not kept (more failed at once than are kept): rebuilt from this
      // chunk's bytes and the group.
      Status resent = lagging_.resend_lost(place, key, rec);
      if (!resent.ok()) {
        // Still missing somewhere: the sweeper tries again.
        KeptDelta marker;
        marker.version = v;
        marker.since = std::chrono::steady_clock::now();
        marker.ref = ref;
        (void)kept_.put(key, std::move(marker));
        return resent.WithContext(what);
      }
      rec.committed_version = v;
      SURGE_RETURN_IF_ERROR(chained_.chunks().index().put(key, rec, false).WithContext(what));
      chained_.waits().changed();
      continue;
    }
    if (!p.delta) {
      return Status::Unavailable(
          what + ": target " + std::to_string(view_.own_id()) + " holds " + version_text(v) +
          " not known applied at every parity position (committed " +
          std::to_string(rec.committed_version) +
          ") and no longer holds its delta; the group's parity needs repair");
    }
    auto buf = pool_.acquire(p.length, std::chrono::seconds(30));
    if (!buf.ok()) {
      (void)kept_.put(key, std::move(p));
      return buf.status().WithContext(what + ": sending a kept delta");
    }
    std::memcpy(buf->data(), p.delta.get(), p.length);
    SURGE_RETURN_IF_ERROR(deliver(place, ref, rec, v, p.truncate_seq, p.at, {buf->data(), p.length},
                                  false, what + " (sending " + version_text(v) + ")",
                                  v == upto ? skip : 0));
  }
  return Status::OK();
}

Status EcChunks::send_lost_delta(const ChainPlace& place, const ChunkKey& key, uint64_t at,
                                 std::span<const std::byte> delta, uint64_t v,
                                 uint64_t truncate_seq, uint64_t skip) {
  const pb::ChunkRef ref = ref_in_chain(place, key);
  const std::string what = "delta of " + name_of(ref) + " at " + version_text(v);
  auto buf = pool_.acquire(delta.size(), std::chrono::seconds(30));
  if (!buf.ok()) return buf.status().WithContext(what);
  std::memcpy(buf->data(), delta.data(), delta.size());
  return send_deltas(place, ref, at, {buf->data(), delta.size()}, v, truncate_seq, true, what,
                     skip);
}

Status EcChunks::send_deltas(const ChainPlace& place, const pb::ChunkRef& ref, uint64_t at,
                             std::span<const std::byte> delta, uint64_t v, uint64_t truncate_seq,
                             bool sync, const std::string& what, uint64_t skip, bool stand_in) {
  const uint32_t k = place.ec_data;
  ChunkUpdate u;
  u.ec_stand_in = stand_in;
  u.kind = pb::UPDATE_EC_DELTA;
  u.version = v;
  u.offset = at;
  u.data = delta;
  u.piece_bytes = static_cast<uint32_t>(pb::kMaxPieceBytes);
  u.piece_crcs = piece_crcs_of(delta, at, u.piece_bytes);
  u.truncate_seq = truncate_seq;
  u.sync = sync;
  u.source_position = place.ec_position;
  // Every parity position at once; each waits on nobody (hop 1), so the
  // lane argument of replicated chains holds. All sent are waited for
  // before returning: they pull from buf.
  std::vector<ChainForwarder::SentForward> sent;
  Status first;
  for (uint32_t j = 0; j < place.ec_parity; ++j) {
    const ChainPlace::EcMember& m = place.ec_members[k + j];
    // The write chain's positions: a SYNCING one (being rebuilt) takes
    // every delta from when it was made SYNCING, so none is missed
    // between its rebuild of a chunk and its serving.
    const bool in_chain =
        m.state == proto::mds::MEMBER_SERVING || m.state == proto::mds::MEMBER_SYNCING;
    if (!in_chain || (skip & bit(k + j)) != 0) continue;
    auto s = forwarder_.send_to(place, m.target_id, m.address, 1,
                                ChunkKey{ref.ino(), ref.slot(), k + j}, u);
    if (!s.ok()) {
      first = s.status();
      break;
    }
    sent.push_back(std::move(*s));
  }
  for (auto& s : sent) {
    Status st = forwarder_.finish_forward(s);
    if (!st.ok() && first.ok()) first = st;
  }
  return first.WithContext(what);
}

Result<std::pair<ChunkRecord, EcChunks::Turn>> EcChunks::await_turn(
    const ChainPlace& place, const pb::ChunkRef& ref, std::optional<UpdateOrder::Guard>& order,
    const Judge& judge, const std::string& what, std::chrono::milliseconds wait) {
  const ChunkKey key = key_of(ref);
  const uint32_t k = place.ec_data;
  SURGE_RETURN_IF_ERROR(chained_.still_current(place, what));
  const auto deadline = VersionWaits::Clock::now() + wait;
  for (;;) {
    SURGE_ASSIGN_OR_RETURN(auto found, chained_.record(key, ref, true));
    ChunkRecord rec = chained_.begin_life(*found);
    if (rec.applied_count == 0) rec.applied_count = k;
    if (rec.applied_count != k) {
      return Status::Corruption(what + ": the record holds " + std::to_string(rec.applied_count) +
                                " applied versions for a " + std::to_string(k) +
                                "-data-chunk group");
    }
    const Turn turn = judge(rec);
    if (turn != Turn::kEarly || VersionWaits::Clock::now() >= deadline) {
      return std::pair{std::move(rec), turn};
    }
    const uint64_t seen = chained_.waits().generation();
    order.reset();
    (void)chained_.waits().wait_past(seen, deadline);
    order.emplace(chained_.order(), key);
    SURGE_RETURN_IF_ERROR(chained_.still_current(place, what));
  }
}

EcChunks::Turn EcChunks::turn_of(uint64_t a, uint64_t v) {
  if (a != 0 && life_of(a) == life_of(v)) {
    return v <= a ? Turn::kDone : v == a + 1 ? Turn::kNow : Turn::kEarly;
  }
  // The source's chunk began a life (it was made, or removed and made
  // again): only its first update starts applying it.
  return first_of_life(v) ? Turn::kNow : Turn::kEarly;
}

Status EcChunks::write_parity(net::RpcContext& ctx, const pb::WriteRequest& req,
                              const ChainPlace& place, net::PoolBuffer buf, pb::WriteReply& resp) {
  const std::string what = "EC parity write of " + name_of(req.ref()) + " from " + ctx.peer();
  const uint32_t k = place.ec_data;
  const auto& want = req.ec_group_versions();
  const auto& base = req.ec_group_base_versions();
  if (static_cast<uint32_t>(want.size()) != k || (!base.empty() && base.size() != want.size())) {
    return Status::InvalidArgument(what + ": " + std::to_string(want.size()) + " data versions (" +
                                   std::to_string(base.size()) + " base versions) for a group of " +
                                   std::to_string(k));
  }
  for (int i = 0; i < want.size(); ++i) {
    const uint64_t lo = base.empty() ? want[i] - 1 : base[i];
    if (want[i] == 0 || lo >= want[i] || life_of(lo) != life_of(want[i])) {
      return Status::InvalidArgument(what + ": data position " + std::to_string(i) + " at " +
                                     version_text(want[i]) + " from " + version_text(lo));
    }
  }
  const uint64_t off = req.offset(), len = req.length();
  const size_t cap = buf.capacity();
  if (off % cap + len > cap) {
    return Status::InvalidArgument(what + ": range [" + std::to_string(off) + ", +" +
                                   std::to_string(len) + ") crosses a " + std::to_string(cap) +
                                   "-byte window");
  }
  const uint32_t whole = req.crc32c();
  SURGE_ASSIGN_OR_RETURN(auto pieces, pull_verified(ctx, 0, off, len, req.piece_bytes(),
                                                    payload_crcs(req, whole), buf.data(), what));
  const ChunkKey key = key_of(req.ref());
  ChunkStore& chunks = chained_.chunks();
  // The bytes are the code of the data at `want` over the range: right to
  // store where every position's applied version is from its base to its
  // want (the data differs from any of them only inside this range). A
  // position applied past want (a later update) makes them stale:
  // declined.
  auto judge = [&](const ChunkRecord& r) {
    Turn all = Turn::kNow;
    for (uint32_t i = 0; i < k; ++i) {
      const uint64_t a = r.applied[i], hi = want[static_cast<int>(i)];
      const uint64_t lo = base.empty() ? hi - 1 : base[static_cast<int>(i)];
      Turn t;
      if (a != 0 && life_of(a) == life_of(hi)) {
        t = a > hi ? Turn::kDone : a >= lo ? Turn::kNow : Turn::kEarly;
      } else {
        // Nothing of this life applied: right only from the life's start.
        t = (lo & kSeqMask) == 0 ? Turn::kNow : Turn::kEarly;
      }
      if (t == Turn::kDone) return Turn::kDone;
      if (t == Turn::kEarly) all = Turn::kEarly;
    }
    return all;
  };
  std::optional<UpdateOrder::Guard> order(std::in_place, chained_.order(), key);
  SURGE_ASSIGN_OR_RETURN(auto judged,
                         await_turn(place, req.ref(), order, judge, what, kParityTurnWait));
  auto& [rec, turn] = judged;
  resp.set_ec_applied(false);
  if (turn != Turn::kNow) return Status::OK();  // the data positions send deltas instead
  const uint64_t pv = rec.version + 1;
  rec.version = pv;
  for (uint32_t i = 0; i < k; ++i) {
    rec.applied[i] = want[static_cast<int>(i)];
    // Every data position stored its part of the group under this ref's
    // generation (cutting first where it had not applied it).
    rec.applied_truncate[i] = std::max(rec.applied_truncate[i], req.ref().truncate_seq());
  }
  SURGE_RETURN_IF_ERROR(chunks.index().put(key, rec, false).WithContext(what));
  SURGE_RETURN_IF_ERROR(
      store_pulled(chunks.objects(), rec.object_id, off, buf.data(), pieces, what));
  rec.committed_version = pv;
  SURGE_RETURN_IF_ERROR(chunks.index().put(key, rec, false).WithContext(what));
  chained_.waits().changed();
  SURGE_ASSIGN_OR_RETURN(uint64_t size, chunks.size(rec));
  resp.set_ec_applied(true);
  resp.set_chunk_version(pv);
  resp.set_object_size(size);
  return Status::OK();
}

Status EcChunks::commit(const pb::EcCommitRequest& req, const ChainPlace& place) {
  const std::string what = "EC commit of " + name_of(req.ref());
  SURGE_RETURN_IF_ERROR(check_ec_position(req.ref(), place, view_.own_id(), what));
  const uint32_t k = place.ec_data;
  if (place.ec_position >= k) {
    return Status::InvalidArgument(what + ": position " + std::to_string(place.ec_position) +
                                   " holds parity; commits go to data positions");
  }
  // version -> parity positions that stored the client's parity of it.
  std::map<uint64_t, uint64_t> updates;
  for (const pb::EcHeldUpdate& u : req.updates()) {
    uint64_t skip = 0;
    for (uint32_t p : u.parity_applied()) {
      if (p < k || p >= k + place.ec_parity) {
        return Status::InvalidArgument(what + ": " + std::to_string(p) +
                                       " is not a parity position");
      }
      skip |= bit(p);
    }
    updates[u.version()] = skip;
  }
  const ChunkKey key = key_of(req.ref());
  auto order = chained_.order().lock(key);
  SURGE_RETURN_IF_ERROR(chained_.still_current(place, what));
  SURGE_ASSIGN_OR_RETURN(auto found, chained_.record(key, req.ref(), false));
  if (!found) return Status::OK();  // removed since
  ChunkRecord rec = *found;
  for (const auto& [v, skip] : updates) {
    // Sent already (a later update sends the held ones first, as does the
    // sweeper), or of an older life: committed.
    if (rec.committed_version >= v || rec.version < v) continue;
    SURGE_RETURN_IF_ERROR(send_kept(place, req.ref(), rec, v, skip, what));
  }
  return Status::OK();
}

Status EcChunks::apply_delta(net::RpcContext& ctx, const pb::ChainForwardRequest& req,
                             const ChainPlace& place, net::PoolBuffer buf,
                             pb::ChainForwardReply& resp) {
  const uint32_t src = req.source_position();
  const uint64_t v = req.update_version();
  const std::string what = "EC delta of position " + std::to_string(src) + " at " +
                           version_text(v) + " for " + name_of(req.ref()) + " from " + ctx.peer();
  SURGE_RETURN_IF_ERROR(check_ec_position(req.ref(), place, view_.own_id(), what));
  const uint32_t k = place.ec_data;
  if (place.ec_position < k || src >= k || v == 0) {
    return Status::InvalidArgument(what + ": a delta goes from a data position (0.." +
                                   std::to_string(k - 1) + ") to a parity position, at a version");
  }
  if (req.ec_stand_in() && !EcStandIn::position_down(place, src)) {
    // Its member is back (or never left, as this member sees the chain):
    // only the member writes its chunk now (stand_in.h, the fence).
    return Status::StaleChain(what + ": position " + std::to_string(src) + " (target " +
                              std::to_string(place.ec_members[src].target_id) +
                              ") takes its own writes in chain version " +
                              std::to_string(place.version) + "; its stand-in's deltas end");
  }
  const uint64_t off = req.offset(), len = req.length();
  const uint64_t max_size = chained_.chunks().objects().options().max_object_size;
  if (len == 0 || off > max_size || len > max_size - off || len > buf.capacity()) {
    return Status::InvalidArgument(what + ": range [" + std::to_string(off) + ", +" +
                                   std::to_string(len) +
                                   ") empty, past the maximum chunk size or over one buffer");
  }
  SURGE_RETURN_IF_ERROR(check_region(ctx, net::BulkAccess::kServerPull, len, what));
  SURGE_RETURN_IF_ERROR(
      check_pieces(off, len, req.piece_bytes(), req.piece_crc32c_size(), buf.capacity(), what));
  SURGE_ASSIGN_OR_RETURN(const ec::RsCodec* rs, codec(place));
  const ChunkKey key = key_of(req.ref());
  ChunkStore& chunks = chained_.chunks();
  std::optional<UpdateOrder::Guard> order(std::in_place, chained_.order(), key);
  const bool syncing = place.state == proto::mds::MEMBER_SYNCING;
  // At a SYNCING member, a chunk not rebuilt yet, or one that missed a
  // delta, is left to the rebuild pass, which reads data holding this
  // update (a data position stores before it sends): not applying it
  // loses nothing. Only a closing pass has the delta's thread rebuild it.
  auto unrebuilt = [&]() -> Result<bool> {
    if (rebuild_.defer(place, key)) {
      SLOG_DEBUG("{}: not applied, left to the rebuild of this position", what);
      resp.set_chunk_size(0);
      return true;
    }
    SURGE_RETURN_IF_ERROR(rebuild_.rebuild(place, key).WithContext(what));
    return false;
  };
  if (syncing && !rebuild_.rebuilt(place, key)) {
    SURGE_ASSIGN_OR_RETURN(bool left, unrebuilt());
    if (left) return Status::OK();
  }
  auto judge = [&](const ChunkRecord& r) { return turn_of(r.applied[src], v); };
  SURGE_ASSIGN_OR_RETURN(auto judged, await_turn(place, req.ref(), order, judge, what, kTurnWait));
  if (syncing && judged.second == Turn::kEarly) {
    // A delta this rebuilt chunk never got (the data holds every update
    // up to this one).
    SURGE_ASSIGN_OR_RETURN(bool left, unrebuilt());
    if (left) return Status::OK();
    SURGE_ASSIGN_OR_RETURN(judged, await_turn(place, req.ref(), order, judge, what, kTurnWait));
  }
  auto& [rec, turn] = judged;
  if (turn == Turn::kEarly) {
    return Status::ChunkVersionGap(what + ": target " + std::to_string(view_.own_id()) +
                                   " applied " + version_text(rec.applied[src]) +
                                   " of that position last");
  }
  if (turn == Turn::kNow) {
    const uint32_t whole = req.crc32c();
    SURGE_RETURN_IF_ERROR(pull_verified(ctx, 0, off, len, req.piece_bytes(),
                                        payload_crcs(req, whole), buf.data(), what)
                              .status());
    std::unique_ptr<std::byte[]> parity(new std::byte[len]);  // read_range fills every byte
    SURGE_RETURN_IF_ERROR(read_range(chunks, rec, off, {parity.get(), len}, what));
    SURGE_RETURN_IF_ERROR(rs->UpdateOneParity(src, place.ec_position - k,
                                              reinterpret_cast<const uint8_t*>(buf.data()),
                                              reinterpret_cast<uint8_t*>(parity.get()), len)
                              .WithContext(what));
    // Dirty while the bytes change: a reader never combines a half-applied
    // parity with data, and a crash here leaves it marked for repair.
    const ChunkRecord before = rec;
    const uint64_t pv = rec.version + 1;
    rec.version = pv;
    rec.applied[src] = v;
    rec.applied_truncate[src] = std::max(rec.applied_truncate[src], req.ref().truncate_seq());
    SURGE_RETURN_IF_ERROR(chunks.index().put(key, rec, false));
    if (req.ec_stand_in()) {
      // The fence (stand_in.h): dirty first, then the chain checked, so a
      // rebuild of src that read this chunk clean is seen here.
      Status fence = chained_.still_current(place, what);
      if (!fence.ok()) {
        SURGE_RETURN_IF_ERROR(chunks.index().put(key, before, false));
        chained_.waits().changed();
        return fence;
      }
    }
    iovec seg{parity.get(), len};
    auto stored = chunks.objects().write(rec.object_id, off, {&seg, 1}, req.sync());
    if (!stored.ok()) return stored.status().WithContext(what);
    rec.committed_version = pv;
    SURGE_RETURN_IF_ERROR(chunks.index().put(key, rec, req.sync()));
    chained_.waits().changed();
  }
  SURGE_ASSIGN_OR_RETURN(uint64_t size, chunks.size(rec));
  resp.set_chunk_size(size);
  return Status::OK();
}

Status EcChunks::read(net::RpcContext& ctx, const pb::ReadRequest& req, const ChainPlace& place,
                      net::PoolBuffer buf, pb::ReadReply& resp) {
  const std::string what = "EC read of " + name_of(req.ref());
  SURGE_RETURN_IF_ERROR(check_ec_position(req.ref(), place, view_.own_id(), what));
  const bool held_copy = req.held_copy() && place.state == proto::mds::MEMBER_SYNCING &&
                         place.ec_position < place.ec_data;
  if (place.state != proto::mds::MEMBER_SERVING && !held_copy) {
    return Status::NotServing(what + ": target " + std::to_string(view_.own_id()) +
                              " is being rebuilt in the chain (version " +
                              std::to_string(place.version) + "); read the other positions");
  }
  const uint64_t off = req.offset(), len = req.length();
  SURGE_RETURN_IF_ERROR(check_region(ctx, net::BulkAccess::kServerPush, len, what));
  resp.set_length(0);
  resp.set_crc32c(0);
  const ChunkKey key = key_of(req.ref());
  const bool parity = place.ec_position >= place.ec_data;
  SURGE_ASSIGN_OR_RETURN(auto rec, chained_.record(key, req.ref(), false));
  if (!rec) return Status::OK();  // never written: a hole (version 0, nothing applied)
  auto changing = [&](const ChunkRecord& r) {
    return Status::ChunkDirty(what + ": target " + std::to_string(view_.own_id()) +
                              " is applying a delta to it (" + version_text(r.version) +
                              "); retry");
  };
  if (rec->incomplete) {
    return Status::Unavailable(what + ": target " + std::to_string(view_.own_id()) +
                               " holds it incomplete at " + version_text(rec->version));
  }
  const bool clean = parity || req.clean_only();
  if (clean && rec->dirty()) return changing(*rec);
  uint64_t want = len;
  // A data chunk that has not applied the file's last truncate reads as
  // cut. Parity never: its bytes are the code of the data positions'
  // bytes as stored, cut or not (applied_truncate_seqs says which), and
  // only those combine into the right bytes of a lost position.
  if (!parity && req.ref().truncate_seq() > rec->truncate_seq) {
    const uint64_t t = req.ref().truncate_size();
    want = off >= t ? 0 : std::min(len, t - off);
  }
  const size_t piece = std::min<size_t>(buf.capacity(), kReadPieceBytes);
  uint32_t crc = 0;
  uint64_t done = 0;
  while (done < want && off < chained_.chunks().objects().options().max_object_size) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(piece, want - done));
    auto got = chained_.chunks().objects().read(rec->object_id, off + done, {buf.data(), n}, &crc);
    if (!got.ok()) return got.status().WithContext(what);
    if (*got == 0) break;
    SURGE_RETURN_IF_ERROR_CTX(ctx.bulk().push(0, done, {buf.data(), *got}),
                              "pushing " + what + " to " + ctx.peer());
    done += *got;
    if (*got < n) break;
  }
  // The bytes pushed are those of the version named only if no update
  // came meanwhile (updates take the order, reads do not).
  SURGE_ASSIGN_OR_RETURN(auto again, chained_.record(key, req.ref(), false));
  if (!again || again->version != rec->version || (clean && again->dirty())) {
    return changing(again ? *again : *rec);
  }
  resp.set_length(done);
  resp.set_crc32c(crc);
  resp.set_chunk_version(rec->version);
  resp.set_truncate_seq(rec->truncate_seq);
  if (parity) {
    for (uint32_t i = 0; i < rec->applied_count; ++i) {
      resp.add_applied_versions(rec->applied[i]);
      // The parity's own generation comes from the MDS, which sends it a
      // truncate only after every data position of its group applied it.
      resp.add_applied_truncate_seqs(std::max(rec->applied_truncate[i], rec->truncate_seq));
    }
  }
  return Status::OK();
}

}  // namespace surge::ods
