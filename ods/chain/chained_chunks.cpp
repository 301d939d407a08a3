// ChainedChunks: versions, update order, CRAQ reads and the receiving side
// of forwards and resyncs. See chained_chunks.h.
#include "ods/chain/chained_chunks.h"

#include <algorithm>
#include <optional>

#include "common/crc32c.h"
#include "common/log.h"
#include "net/proto/ods_write_pieces.h"
#include "ods/chain/chunk_lives.h"
#include "ods/chain/pause_points.h"
#include "ods/store/block_checksum.h"

namespace surge::ods {
namespace {

namespace pb = proto::ods;

constexpr size_t kReadPieceBytes = 256 << 10;
// How long a forwarded update that came before its turn waits for the
// update it follows (ChainedChunks::forward): a pipelining head sends a chunk's
// updates back to back and different lane threads take them, so one can
// be a moment early; past this the gap is real and the chunk comes whole.
constexpr auto kTurnWait = std::chrono::milliseconds(500);

ChunkKey key_of(const pb::ChunkRef& ref) { return {ref.ino(), ref.slot(), ref.position()}; }

std::string name_of(const pb::ChunkRef& ref) {
  return key_of(ref).describe() + " of chain " + std::to_string(ref.chain_id());
}

Result<ObjectStore::SpaceOp> space_op(pb::FallocateMode m, const std::string& what) {
  switch (m) {
    case pb::FALLOCATE_RESERVE: return ObjectStore::SpaceOp::kReserve;
    case pb::FALLOCATE_PUNCH: return ObjectStore::SpaceOp::kPunch;
    case pb::FALLOCATE_ZERO: return ObjectStore::SpaceOp::kZero;
    default:
      return Status::NotSupported(what + ": unknown mode " + std::to_string(static_cast<int>(m)));
  }
}

// Pulls piece `index` ([at + done, +plen), bulk offset base + done) into
// dst + done and checks it against crcs[index]: its checksums, for storing.
Result<PayloadChecksums> pull_piece(net::RpcContext& ctx, uint64_t base, uint64_t at, uint64_t done,
                                    uint64_t plen, size_t index, std::span<const uint32_t> crcs,
                                    std::byte* dst, const std::string& what) {
  SURGE_RETURN_IF_ERROR_CTX(ctx.bulk().pull(0, base + done, {dst + done, plen}),
                            "pulling " + what + " from " + ctx.peer());
  iovec seg{dst + done, plen};
  PayloadChecksums sums = checksum_payload({&seg, 1}, at + done);
  if (index >= crcs.size() || sums.payload != crcs[index]) {
    return Status::Corruption(what + ": payload checksum mismatch in [" +
                              std::to_string(at + done) + ", +" + std::to_string(plen) + ")");
  }
  return sums;
}

// A write's update as it goes down the chain: its bytes in our buffer,
// with the piece CRCs it came with (piece_bytes > 0) or computed here.
ChunkUpdate write_update(uint64_t version, uint64_t offset, std::span<const std::byte> data,
                         uint32_t piece_bytes, std::span<const uint32_t> crcs, bool sync) {
  ChunkUpdate u;
  u.kind = pb::UPDATE_WRITE;
  u.version = version;
  u.offset = offset;
  u.data = data;
  u.piece_bytes = piece_bytes ? piece_bytes : static_cast<uint32_t>(pb::kMaxPieceBytes);
  u.piece_crcs = piece_bytes ? std::vector<uint32_t>(crcs.begin(), crcs.end())
                             : piece_crcs_of(data, offset, u.piece_bytes);
  u.sync = sync;
  return u;
}

// A forwarded update v that came before its turn: the update before it
// (or, before the tail, v's commit) is still on another lane thread.
bool out_of_turn(const ChunkRecord& rec, uint64_t v, const ChainPlace& place) {
  if (rec.incomplete) return false;
  // v - 1 not here yet: the life's first update for a chunk we do not
  // hold, else the update before v of the life we hold.
  const bool early = rec.version == 0 ? !first_of_life(v)
                                      : life_of(v) == life_of(rec.version) && v > rec.version + 1;
  // Older than what we hold and not known stored further down yet.
  const bool unsettled = place.successor != 0 && v < rec.version && v > rec.committed_version;
  return early || unsettled;
}

}  // namespace

Status check_pieces(uint64_t off, uint64_t len, uint32_t piece_bytes, int ncrcs, size_t cap,
                    const std::string& what) {
  if (piece_bytes == 0) {
    if (len > cap) {
      return Status::InvalidArgument(what + ": " + std::to_string(len) +
                                     " bytes under one CRC; chained updates over " +
                                     std::to_string(cap) + " bytes send piece CRCs");
    }
    return Status::OK();
  }
  if (!pb::valid_piece_bytes(piece_bytes) || piece_bytes > cap) {
    return Status::InvalidArgument(
        what + ": piece size " + std::to_string(piece_bytes) + " is not a power of two in [" +
        std::to_string(pb::kMinPieceBytes) + ", " +
        std::to_string(std::min<uint64_t>(cap, pb::kMaxPieceBytes)) + "]");
  }
  if (static_cast<uint64_t>(ncrcs) != pb::piece_count(off, len, piece_bytes)) {
    return Status::InvalidArgument(what + ": " + std::to_string(ncrcs) + " piece CRCs for " +
                                   std::to_string(pb::piece_count(off, len, piece_bytes)) +
                                   " pieces");
  }
  return Status::OK();
}

Status check_region(net::RpcContext& ctx, net::BulkAccess want, uint64_t len,
                    const std::string& what) {
  if (ctx.bulk().count() != 1 || ctx.bulk().access(0) != want || ctx.bulk().length(0) < len) {
    return Status::InvalidArgument(what + " from " + ctx.peer() +
                                   ": expected one bulk region of the right kind for " +
                                   std::to_string(len) + " bytes");
  }
  return Status::OK();
}

Status check_write_request(net::RpcContext& ctx, const pb::WriteRequest& req, uint64_t max_size,
                           size_t cap, const std::string& what) {
  const uint64_t off = req.offset(), len = req.length();
  if (len == 0 || off > max_size || len > max_size - off) {
    return Status::InvalidArgument(what + ": range [" + std::to_string(off) + ", +" +
                                   std::to_string(len) + ") empty or past the maximum chunk size");
  }
  SURGE_RETURN_IF_ERROR(check_region(ctx, net::BulkAccess::kServerPull, len, what));
  if (ctx.bulk().length(0) != len) {
    return Status::InvalidArgument(what + ": bulk region longer than the write");
  }
  SURGE_RETURN_IF_ERROR(
      check_pieces(off, len, req.piece_bytes(), req.piece_crc32c_size(), cap, what));
  if (req.piece_bytes() == 0 && req.piece_crc32c_size() != 0) {
    return Status::InvalidArgument(what + ": piece CRCs without a piece size");
  }
  return Status::OK();
}

Status pull_checked(net::RpcContext& ctx, uint64_t base, uint64_t at, uint64_t len,
                    uint32_t piece_bytes, std::span<const uint32_t> crcs, std::byte* dst,
                    ObjectStore& store, uint64_t id, const std::string& what) {
  size_t piece = 0;
  for (uint64_t done = 0; done < len; ++piece) {
    const uint64_t plen = piece_bytes ? pb::piece_length(at + done, len - done, piece_bytes) : len;
    SURGE_ASSIGN_OR_RETURN(PayloadChecksums sums,
                           pull_piece(ctx, base, at, done, plen, piece, crcs, dst, what));
    iovec seg{dst + done, plen};
    auto stored = store.write(id, at + done, {&seg, 1}, false, &sums);
    if (!stored.ok()) return stored.status().WithContext(what);
    done += plen;
  }
  return Status::OK();
}

Result<std::vector<PulledPiece>> pull_verified(net::RpcContext& ctx, uint64_t base, uint64_t at,
                                               uint64_t len, uint32_t piece_bytes,
                                               std::span<const uint32_t> crcs, std::byte* dst,
                                               const std::string& what) {
  std::vector<PulledPiece> pieces;
  for (uint64_t done = 0; done < len;) {
    const uint64_t plen = piece_bytes ? pb::piece_length(at + done, len - done, piece_bytes) : len;
    SURGE_ASSIGN_OR_RETURN(PayloadChecksums sums,
                           pull_piece(ctx, base, at, done, plen, pieces.size(), crcs, dst, what));
    pieces.push_back({done, plen, std::move(sums)});
    done += plen;
  }
  return pieces;
}

Status store_pulled(ObjectStore& store, uint64_t id, uint64_t at, std::byte* src,
                    const std::vector<PulledPiece>& pieces, const std::string& what) {
  for (const PulledPiece& p : pieces) {
    iovec seg{src + p.done, p.length};
    auto stored = store.write(id, at + p.done, {&seg, 1}, false, &p.sums);
    if (!stored.ok()) return stored.status().WithContext(what);
  }
  return Status::OK();
}

ChainedChunks::ChainedChunks(ChunkStore& chunks, ChainView& view, ChainForwarder& forwarder)
    : chunks_(chunks),
      view_(view),
      forwarder_(forwarder),
      sends_([&view](uint32_t chain_id) -> uint64_t {
        auto p = view.place(chain_id);
        return p.ok() ? p->version : 0;
      }) {}

Result<std::optional<ChunkRecord>> ChainedChunks::record(const ChunkKey& key,
                                                         const pb::ChunkRef& ref, bool create) {
  SURGE_ASSIGN_OR_RETURN(auto rec, chunks_.find(key, ref.chain_id(), create));
  if (rec && rec->chain_id != ref.chain_id() && ref.truncate_seq() != 0) {
    // A slot moves to another chain only by a setstripe, which makes a
    // truncate generation, and its old chunks go by the MDS's pass, maybe
    // late (mds/namespace/namespace_truncate.cpp). A request of a newer
    // generation than the copy here finds an old layout's chunk: gone for
    // it, dropped by an update (which holds the chunk's update order, so
    // nothing else makes or drops a record of the key meanwhile). One of
    // the generation or an older one (that removal, late) finds the new
    // layout's chunk: not its own, as if missing.
    if (!create) return std::optional<ChunkRecord>{};
    if (ref.truncate_seq() > rec->truncate_seq) {
      SURGE_RETURN_IF_ERROR(chunks_.remove(key, *rec, false)
                                .WithContext("dropping the old layout's " + key.describe()));
      return chunks_.find(key, ref.chain_id(), create);
    }
  }
  if (rec && rec->chain_id != ref.chain_id()) {
    return Status::WrongTarget(key.describe() + " is stored here under chain " +
                               std::to_string(rec->chain_id) + ", the request names chain " +
                               std::to_string(ref.chain_id()));
  }
  return rec;
}

ChunkRecord ChainedChunks::begin_life(ChunkRecord rec) const {
  if (rec.version == 0 && rec.committed_version == 0 && !rec.incomplete) {
    rec.version = rec.committed_version = life_base(view_.own_id(), rec.object_id);
  }
  return rec;
}

Status ChainedChunks::commit(const ChunkKey& key, ChunkRecord& rec, uint64_t v, bool sync) {
  if (rec.version == v && rec.committed_version != v) {
    rec.committed_version = v;
    SURGE_RETURN_IF_ERROR(chunks_.index().put(key, rec, sync));
    waits_.changed();
    return Status::OK();
  }
  if (sync) return chunks_.sync(key, rec);
  return Status::OK();
}

Status ChainedChunks::still_current(const ChainPlace& place, const std::string& what) {
  auto now = view_.place(place.chain_id);
  if (now.ok() && now->version == place.version) return Status::OK();
  return Status::StaleChain(what + ": chain " + std::to_string(place.chain_id) + " moved from version " +
                            std::to_string(place.version) + " while the update waited on target " +
                            std::to_string(view_.own_id()) +
                            (now.ok() ? " (now " + std::to_string(now->version) + ")"
                                      : " (" + now.status().message() + ")"));
}

Status ChainedChunks::write(net::RpcContext& ctx, const pb::WriteRequest& req,
                            const ChainPlace& place, net::PoolBuffer buf, pb::WriteReply& resp) {
  const std::string what = "write of " + name_of(req.ref());
  if (!place.head) {
    return Status::StaleChain(what + ": target " + std::to_string(view_.own_id()) +
                              " is not the head of the chain under version " +
                              std::to_string(place.version));
  }
  const uint64_t off = req.offset(), len = req.length();
  const size_t cap = buf.capacity();
  SURGE_RETURN_IF_ERROR(
      check_write_request(ctx, req, chunks_.objects().options().max_object_size, cap, what));
  if (!req.sync() && len <= cap - off % cap) {
    return write_one_unit(ctx, req, place, buf, resp, what);
  }
  const ChunkKey key = key_of(req.ref());
  PausePoint pause("write_before_order");
  auto order = order_.lock(key);
  SURGE_RETURN_IF_ERROR(still_current(place, what));
  SURGE_ASSIGN_OR_RETURN(auto found, record(key, req.ref(), true));
  ChunkRecord rec = begin_life(*found);
  SURGE_RETURN_IF_ERROR(catch_up_generation(place, key, rec, req.ref().truncate_seq(),
                                            req.ref().truncate_size(), what));
  const uint32_t pbytes = req.piece_bytes();
  std::vector<uint32_t> whole_crc{req.crc32c()};
  size_t first_piece = 0;
  uint64_t size = 0;
  // One update per unit: units end at multiples of the buffer size (a
  // multiple of every piece size it can hold), so pieces never straddle.
  for (uint64_t done = 0; done < len;) {
    const uint64_t at = off + done;
    const uint64_t n = std::min<uint64_t>(len - done, cap - at % cap);
    const bool last = done + n == len;
    const size_t npieces = pbytes ? pb::piece_count(at, n, pbytes) : 1;
    std::span<const uint32_t> crcs =
        pbytes ? std::span<const uint32_t>(req.piece_crc32c().data() + first_piece, npieces)
               : std::span<const uint32_t>(whole_crc);
    const uint64_t v = rec.version + 1;
    rec.version = v;
    if (place.successor == 0) rec.committed_version = v;
    SURGE_RETURN_IF_ERROR(chunks_.index().put(key, rec, false));
    SURGE_RETURN_IF_ERROR(pull_checked(ctx, done, at, n, pbytes, crcs, buf.data(),
                                       chunks_.objects(), rec.object_id, what));
    if (place.successor != 0) {
      ChunkUpdate u = write_update(v, at, {buf.data(), n}, pbytes, crcs, req.sync() && last);
      u.truncate_seq = rec.truncate_seq;
      SURGE_RETURN_IF_ERROR(forwarder_.forward(place, key, rec, u));
    }
    if (req.sync() && last) SURGE_RETURN_IF_ERROR(chunks_.sync(key, rec));
    SURGE_RETURN_IF_ERROR(commit(key, rec, v, req.sync() && last));
    first_piece += npieces;
    done += n;
  }
  SURGE_ASSIGN_OR_RETURN(size, chunks_.size(rec));
  resp.set_object_size(size);
  resp.set_chunk_version(rec.version);
  return Status::OK();
}

Status ChainedChunks::write_one_unit(net::RpcContext& ctx, const pb::WriteRequest& req,
                                     const ChainPlace& place, net::PoolBuffer& buf,
                                     pb::WriteReply& resp, const std::string& what) {
  const uint64_t off = req.offset(), len = req.length();
  const uint32_t pbytes = req.piece_bytes();
  const std::vector<uint32_t> whole_crc{req.crc32c()};
  const std::span<const uint32_t> crcs =
      pbytes ? std::span<const uint32_t>(req.piece_crc32c().data(), req.piece_crc32c_size())
             : std::span<const uint32_t>(whole_crc);
  const ChunkKey key = key_of(req.ref());
  PausePoint pause("write_before_order");
  // Pulled and checked before the update order: over TCP a connection's
  // next request is read only once this one's bytes are in, so pulling
  // under the order would hold every request behind it on the connection
  // (other chunks' too) until this chunk's earlier updates are through.
  SURGE_ASSIGN_OR_RETURN(auto pieces,
                         pull_verified(ctx, 0, off, len, pbytes, crcs, buf.data(), what));
  uint64_t v = 0, object_id = 0;
  ChainForwarder::SentForward sent;
  {
    auto order = order_.lock(key);
    SURGE_RETURN_IF_ERROR(still_current(place, what));
    SURGE_ASSIGN_OR_RETURN(auto found, record(key, req.ref(), true));
    ChunkRecord rec = begin_life(*found);
    SURGE_RETURN_IF_ERROR(catch_up_generation(place, key, rec, req.ref().truncate_seq(),
                                              req.ref().truncate_size(), what));
    v = rec.version + 1;
    rec.version = v;
    if (place.successor == 0) rec.committed_version = v;
    object_id = rec.object_id;
    SURGE_RETURN_IF_ERROR(chunks_.index().put(key, rec, false));
    SURGE_RETURN_IF_ERROR(
        store_pulled(chunks_.objects(), object_id, off, buf.data(), pieces, what));
    if (place.successor == 0) {
      SURGE_ASSIGN_OR_RETURN(uint64_t size, chunks_.size(rec));
      resp.set_object_size(size);
      resp.set_chunk_version(v);
      return Status::OK();
    }
    // On the lane connection before the order goes: the chunk's updates
    // leave in version order. buf stays ours until the reply.
    ChunkUpdate u = write_update(v, off, {buf.data(), len}, pbytes, crcs, false);
    u.truncate_seq = rec.truncate_seq;
    SURGE_ASSIGN_OR_RETURN(sent, forwarder_.send_forward(place, key, u));
  }
  Status st = forwarder_.finish_forward(sent);
  if (st.code() == Code::kChunkVersionGap) st = recover_gap(place, key, v, what);
  SURGE_RETURN_IF_ERROR(st);
  return commit_through(key, req.ref(), v, object_id, resp);
}

Status ChainedChunks::commit_through(const ChunkKey& key, const pb::ChunkRef& ref, uint64_t v,
                                     uint64_t object_id, pb::WriteReply& resp) {
  auto order = order_.lock(key);
  SURGE_ASSIGN_OR_RETURN(auto found, record(key, ref, false));
  uint64_t size = 0;
  if (found && found->object_id == object_id) {
    ChunkRecord rec = *found;
    if (rec.committed_version < v && v <= rec.version) {
      rec.committed_version = v;
      SURGE_RETURN_IF_ERROR(chunks_.index().put(key, rec, false));
      waits_.changed();
    }
    SURGE_ASSIGN_OR_RETURN(size, chunks_.size(rec));
  }
  resp.set_object_size(size);
  resp.set_chunk_version(v);
  return Status::OK();
}

Status ChainedChunks::recover_gap(const ChainPlace& place, const ChunkKey& key, uint64_t v,
                                  const std::string& what) {
  SLOG_INFO("{}: successor target {} missed versions before {}; bringing it whole", what,
            place.successor, v);
  auto order = order_.lock(key);
  SURGE_RETURN_IF_ERROR(still_current(place, what));
  SURGE_ASSIGN_OR_RETURN(auto found, chunks_.find(key, place.chain_id, false));
  // Removed meanwhile (the remove went down the chain after us), or a later
  // update's recovery already brought the successor past v.
  if (!found || found->chain_id != place.chain_id || found->committed_version >= v) {
    return Status::OK();
  }
  return forward_noop(place, key, *found, what);
}

Status ChainedChunks::forward_noop(const ChainPlace& place, const ChunkKey& key, ChunkRecord rec,
                                   const std::string& what) {
  SURGE_ASSIGN_OR_RETURN(uint64_t size, chunks_.size(rec));
  return cut(place, key, rec, size, 0, what);  // to its own size: no byte changes
}

Status ChainedChunks::catch_up_generation(const ChainPlace& place, const ChunkKey& key,
                                          ChunkRecord& rec, uint64_t seq, uint64_t size,
                                          const std::string& what) {
  if (seq <= rec.truncate_seq) return Status::OK();
  SURGE_ASSIGN_OR_RETURN(uint64_t held, chunks_.size(rec));
  if (held > size) return cut(place, key, rec, size, seq, what);
  // Nothing past the truncate's size: the caller's update records the
  // generation (and carries it down the chain).
  rec.truncate_seq = seq;
  return Status::OK();
}

Status ChainedChunks::cut(const ChainPlace& place, const ChunkKey& key, ChunkRecord& rec,
                          uint64_t size, uint64_t seq, const std::string& what) {
  const uint64_t v = rec.version + 1;
  rec.version = v;
  if (place.successor == 0) rec.committed_version = v;
  SURGE_RETURN_IF_ERROR(chunks_.index().put(key, rec, false));
  SURGE_RETURN_IF_ERROR_CTX(chunks_.objects().truncate(rec.object_id, size), what);
  if (seq > rec.truncate_seq) {
    // Recorded once the bytes are cut: a reader that finds the generation
    // finds them cut, one that does not cuts its answer itself.
    rec.truncate_seq = seq;
    SURGE_RETURN_IF_ERROR(chunks_.index().put(key, rec, false));
  }
  if (place.successor != 0) {
    ChunkUpdate u;
    u.kind = pb::UPDATE_TRUNCATE;
    u.version = v;
    u.size = size;
    u.truncate_seq = rec.truncate_seq;
    SURGE_RETURN_IF_ERROR(forwarder_.forward(place, key, rec, u));
  }
  return commit(key, rec, v, false);
}

Status ChainedChunks::read(net::RpcContext& ctx, const pb::ReadRequest& req,
                           const ChainPlace& place, net::PoolBuffer buf, pb::ReadReply& resp) {
  const std::string what = "read of " + name_of(req.ref());
  if (place.state != proto::mds::MEMBER_SERVING) {
    return Status::NotServing(what + ": target " + std::to_string(view_.own_id()) +
                              " is syncing in the chain (version " +
                              std::to_string(place.version) + "); read another member");
  }
  const uint64_t off = req.offset(), len = req.length();
  SURGE_RETURN_IF_ERROR(check_region(ctx, net::BulkAccess::kServerPush, len, what));
  resp.set_length(0);
  resp.set_crc32c(0);
  const ChunkKey key = key_of(req.ref());
  SURGE_ASSIGN_OR_RETURN(auto rec, record(key, req.ref(), false));
  if (!rec) return Status::OK();  // never written: a hole
  auto dirty = [&](const ChunkRecord& r) {
    return Status::ChunkDirty(what + ": target " + std::to_string(view_.own_id()) +
                              " holds version " + std::to_string(r.version) + ", committed " +
                              std::to_string(r.committed_version) +
                              "; read it at the chain's last serving member");
  };
  if ((rec->dirty() || rec->incomplete) && !place.last_serving) return dirty(*rec);
  if (rec->incomplete) {
    // Part of a whole-chunk send not ended (under way, or cut short): no
    // reader may see it. Unavailable: the client waits and tries again, so
    // a send under way ends the wait and one cut short fails the read
    // within its io timeout, naming the chunk, rather than serve its part.
    return Status::Unavailable(what + ": target " + std::to_string(view_.own_id()) +
                               " holds the chunk incomplete (a whole-chunk send not ended) at "
                               "version " +
                               std::to_string(rec->version));
  }
  resp.set_chunk_version(place.last_serving ? rec->version : rec->committed_version);
  uint64_t want = len;
  if (req.ref().truncate_seq() > rec->truncate_seq) {
    // The reader knows of a truncate this copy has not applied: nothing
    // past its size is the file's any more.
    const uint64_t t = req.ref().truncate_size();
    want = off >= t ? 0 : std::min(len, t - off);
  }
  if (want == 0 || off >= chunks_.objects().options().max_object_size) return Status::OK();
  const size_t piece = std::min<size_t>(buf.capacity(), kReadPieceBytes);
  uint32_t crc = 0;
  uint64_t done = 0;
  // Pieces are pushed as read; the version is checked again after the
  // last, so a member that is not the last serving one never answers with
  // bytes an update changed under it.
  std::vector<std::byte> last_piece;
  while (done < want) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(piece, want - done));
    auto got = chunks_.objects().read(rec->object_id, off + done, {buf.data(), n}, &crc);
    if (!got.ok()) return got.status().WithContext(what);
    if (*got == 0) break;
    SURGE_RETURN_IF_ERROR_CTX(ctx.bulk().push(0, done, {buf.data(), *got}),
                              "pushing " + what + " to " + ctx.peer());
    done += *got;
    if (*got < n) break;
  }
  if (!place.last_serving) {
    SURGE_ASSIGN_OR_RETURN(auto again, record(key, req.ref(), false));
    if (!again || again->version != rec->version || again->dirty()) {
      return dirty(again ? *again : *rec);
    }
  }
  resp.set_length(done);
  resp.set_crc32c(crc);
  return Status::OK();
}

Status ChainedChunks::truncate(const pb::TruncateRequest& req, const ChainPlace& place,
                               pb::TruncateReply& resp) {
  const std::string what = "truncate of " + name_of(req.ref());
  if (!place.head) {
    return Status::StaleChain(what + ": target " + std::to_string(view_.own_id()) +
                              " is not the head of the chain under version " +
                              std::to_string(place.version));
  }
  if (req.size() > chunks_.objects().options().max_object_size) {
    return Status::InvalidArgument(what + ": size " + std::to_string(req.size()) +
                                   " past the maximum chunk size");
  }
  const ChunkKey key = key_of(req.ref());
  auto order = order_.lock(key);
  SURGE_RETURN_IF_ERROR(still_current(place, what));
  const uint64_t seq = req.ref().truncate_seq();
  // A truncate of a generation (the MDS applying its intent) only shrinks,
  // and only a copy that has not applied it: a chunk never written needs
  // nothing, one a later writer already cut holds that writer's bytes.
  SURGE_ASSIGN_OR_RETURN(auto found, record(key, req.ref(), seq == 0));
  if (!found) {
    resp.set_chunk_version(0);
    return Status::OK();
  }
  ChunkRecord rec = begin_life(*found);
  if (seq != 0) {
    const uint64_t version = rec.version;
    SURGE_RETURN_IF_ERROR(catch_up_generation(place, key, rec, seq, req.size(), what));
    if (rec.version == version && rec.truncate_seq != found->truncate_seq) {
      // Nothing to cut. Recorded here only: a member after us learns the
      // generation with the chunk's next update, and until then holds
      // nothing past the size either.
      SURGE_RETURN_IF_ERROR(chunks_.index().put(key, rec, false));
    }
    resp.set_chunk_version(rec.version);
    return Status::OK();
  }
  SURGE_RETURN_IF_ERROR(cut(place, key, rec, req.size(), 0, what));
  resp.set_chunk_version(rec.version);
  return Status::OK();
}

Status ChainedChunks::remove(const pb::RemoveRequest& req, const ChainPlace& place,
                             pb::RemoveReply& resp) {
  const std::string what = "remove of " + name_of(req.ref());
  if (!place.head) {
    return Status::StaleChain(what + ": target " + std::to_string(view_.own_id()) +
                              " is not the head of the chain under version " +
                              std::to_string(place.version));
  }
  const ChunkKey key = key_of(req.ref());
  auto order = order_.lock(key);
  SURGE_RETURN_IF_ERROR(still_current(place, what));
  SURGE_ASSIGN_OR_RETURN(auto rec, record(key, req.ref(), false));
  const uint64_t seq = req.ref().truncate_seq();
  if (rec && seq != 0 && rec->truncate_seq >= seq) {
    // Written under a newer layout with the same chunk names (a setstripe's
    // removal of the old one coming late): it stays, on every member.
    resp.set_existed(true);
    return Status::OK();
  }
  bool existed = false;
  if (rec) {
    auto s = chunks_.objects().stat(rec->object_id);
    existed = s.ok();
    SURGE_RETURN_IF_ERROR(chunks_.remove(key, *rec, false));
  }
  // Forwarded even when we hold nothing: a member after us may (a remove
  // retried after a failure part-way down the chain).
  if (place.successor != 0) {
    ChunkUpdate u;
    u.kind = pb::UPDATE_REMOVE;
    u.version = rec ? rec->version + 1 : 1;
    u.truncate_seq = seq;  // a member holding the new layout's chunk keeps it
    SURGE_RETURN_IF_ERROR(forwarder_.forward(place, key, ChunkRecord{}, u));
  }
  resp.set_existed(existed);
  return Status::OK();
}

Status ChainedChunks::stat(const pb::StatRequest& req, const ChainPlace&, pb::StatReply& resp) {
  const ChunkKey key = key_of(req.ref());
  SURGE_ASSIGN_OR_RETURN(auto rec, record(key, req.ref(), false));
  if (!rec) {
    return Status::NotFound(name_of(req.ref()) + " does not exist on target " +
                            std::to_string(view_.own_id()));
  }
  SURGE_ASSIGN_OR_RETURN(uint64_t size, chunks_.size(*rec));
  if (req.ref().truncate_seq() > rec->truncate_seq) {
    size = std::min(size, req.ref().truncate_size());
  }
  resp.set_size(size);
  resp.set_chunk_version(rec->version);
  resp.set_dirty(rec->dirty());
  resp.set_truncate_seq(rec->truncate_seq);
  return Status::OK();
}

Status ChainedChunks::sync(const pb::ChunkRef& ref, const ChainPlace& place) {
  const std::string what = "sync of " + name_of(ref);
  if (!place.head) {
    return Status::StaleChain(what + ": target " + std::to_string(view_.own_id()) +
                              " is not the head of the chain under version " +
                              std::to_string(place.version));
  }
  const ChunkKey key = key_of(ref);
  auto order = order_.lock(key);
  SURGE_RETURN_IF_ERROR(still_current(place, what));
  SURGE_ASSIGN_OR_RETURN(auto rec, record(key, ref, false));
  if (!rec) return Status::OK();
  SURGE_RETURN_IF_ERROR(chunks_.sync(key, *rec));
  if (place.successor != 0) {
    ChunkUpdate u;
    u.sync = true;
    SURGE_RETURN_IF_ERROR(forwarder_.forward(place, key, *rec, u));
  }
  return Status::OK();
}

Status ChainedChunks::fallocate(const pb::FallocateRequest& req, const ChainPlace& place,
                                pb::FallocateReply& resp) {
  const std::string what = "fallocate of " + name_of(req.ref());
  if (!place.head) {
    return Status::StaleChain(what + ": target " + std::to_string(view_.own_id()) +
                              " is not the head of the chain under version " +
                              std::to_string(place.version));
  }
  SURGE_ASSIGN_OR_RETURN(ObjectStore::SpaceOp op, space_op(req.mode(), what));
  const ChunkKey key = key_of(req.ref());
  auto order = order_.lock(key);
  SURGE_RETURN_IF_ERROR(still_current(place, what));
  SURGE_ASSIGN_OR_RETURN(auto found, record(key, req.ref(), true));
  ChunkRecord rec = begin_life(*found);
  SURGE_RETURN_IF_ERROR(catch_up_generation(place, key, rec, req.ref().truncate_seq(),
                                            req.ref().truncate_size(), what));
  const uint64_t v = rec.version + 1;
  rec.version = v;
  if (place.successor == 0) rec.committed_version = v;
  SURGE_RETURN_IF_ERROR(chunks_.index().put(key, rec, false));
  SURGE_RETURN_IF_ERROR_CTX(
      chunks_.objects().fallocate(rec.object_id, req.offset(), req.length(), op, req.keep_size()),
      what);
  if (place.successor != 0) {
    ChunkUpdate u;
    u.kind = pb::UPDATE_FALLOCATE;
    u.version = v;
    u.offset = req.offset();
    u.length = req.length();
    u.fallocate_mode = req.mode();
    u.keep_size = req.keep_size();
    u.truncate_seq = rec.truncate_seq;
    SURGE_RETURN_IF_ERROR(forwarder_.forward(place, key, rec, u));
  }
  SURGE_RETURN_IF_ERROR(commit(key, rec, v, false));
  SURGE_ASSIGN_OR_RETURN(uint64_t size, chunks_.size(rec));
  resp.set_object_size(size);
  return Status::OK();
}

Result<bool> ChainedChunks::roll_forward(const ChainPlace& place, const ChunkKey& key) {
  const std::string what = "roll-forward of " + key.describe() + " of chain " +
                           std::to_string(place.chain_id);
  if (!place.head) {
    return Status::StaleChain(what + ": target " + std::to_string(view_.own_id()) +
                              " is not the head under version " + std::to_string(place.version));
  }
  auto order = order_.lock(key);
  SURGE_RETURN_IF_ERROR(still_current(place, what));
  SURGE_ASSIGN_OR_RETURN(auto found, chunks_.find(key, place.chain_id, false));
  if (!found || found->chain_id != place.chain_id || !found->dirty() || found->incomplete) {
    return false;
  }
  SURGE_RETURN_IF_ERROR(forward_noop(place, key, *found, what));
  return true;
}

Status ChainedChunks::forward(net::RpcContext& ctx, const pb::ChainForwardRequest& req,
                              const ChainPlace& place, net::PoolBuffer buf,
                              pb::ChainForwardReply& resp) {
  const std::string what = "forwarded update " + std::to_string(req.update_version()) + " of " +
                           name_of(req.ref()) + " from " + ctx.peer();
  const ChunkKey key = key_of(req.ref());
  std::optional<UpdateOrder::Guard> order(std::in_place, order_, key);
  SURGE_RETURN_IF_ERROR(still_current(place, what));
  if (req.kind() == pb::UPDATE_REMOVE) {
    SURGE_ASSIGN_OR_RETURN(auto rec, record(key, req.ref(), false));
    const uint64_t seq = req.ref().truncate_seq();
    if (rec && (seq == 0 || rec->truncate_seq < seq)) {
      SURGE_RETURN_IF_ERROR(chunks_.remove(key, *rec, req.sync()));
    }
    if (place.successor != 0) {
      ChunkUpdate u;
      u.kind = pb::UPDATE_REMOVE;
      u.version = req.update_version();
      u.truncate_seq = seq;
      SURGE_RETURN_IF_ERROR(forwarder_.forward(place, key, ChunkRecord{}, u));
    }
    return Status::OK();
  }
  if (req.update_version() == 0) {  // a sync of the chunk
    SURGE_ASSIGN_OR_RETURN(auto rec, record(key, req.ref(), false));
    if (!rec) return Status::OK();
    SURGE_RETURN_IF_ERROR(chunks_.sync(key, *rec));
    if (place.successor != 0) {
      ChunkUpdate u;
      u.sync = true;
      SURGE_RETURN_IF_ERROR(forwarder_.forward(place, key, *rec, u));
    }
    return Status::OK();
  }
  const bool write = req.kind() == pb::UPDATE_WRITE;
  if (!write && req.kind() != pb::UPDATE_TRUNCATE && req.kind() != pb::UPDATE_FALLOCATE) {
    return Status::NotSupported(what + ": unknown update kind " +
                                std::to_string(static_cast<int>(req.kind())));
  }
  if (write) {
    const uint64_t max_size = chunks_.objects().options().max_object_size;
    if (req.offset() > max_size || req.length() > max_size - req.offset() ||
        req.length() > buf.capacity()) {
      return Status::InvalidArgument(what + ": range [" + std::to_string(req.offset()) + ", +" +
                                     std::to_string(req.length()) +
                                     ") past the maximum chunk size or over one buffer");
    }
    if (req.length() > 0) {
      SURGE_RETURN_IF_ERROR(check_region(ctx, net::BulkAccess::kServerPull, req.length(), what));
    }
    SURGE_RETURN_IF_ERROR(check_pieces(req.offset(), req.length(), req.piece_bytes(),
                                       req.piece_crc32c_size(), buf.capacity(), what));
  }
  const uint64_t v = req.update_version();
  ChunkRecord rec;
  const auto turn_deadline = VersionWaits::Clock::now() + kTurnWait;
  for (;;) {
    SURGE_ASSIGN_OR_RETURN(auto found, record(key, req.ref(), true));
    rec = *found;
    if (!out_of_turn(rec, v, place) || VersionWaits::Clock::now() >= turn_deadline) break;
    // Wait for the chunk to change without its order: what we wait for
    // needs it. Past the deadline the checks below answer a gap or
    // Unavailable.
    const uint64_t seen = waits_.generation();
    order.reset();
    (void)waits_.wait_past(seen, turn_deadline);
    order.emplace(order_, key);
    SURGE_RETURN_IF_ERROR(still_current(place, what));
  }
  // An incomplete copy holds part of a whole-chunk send that was cut short,
  // under the version it had before: an update applied onto it would leave
  // it short under a version that looks right. It comes over whole first.
  if (rec.incomplete) {
    return Status::ChunkVersionGap(what + ": target " + std::to_string(view_.own_id()) +
                                   " holds it incomplete (a whole-chunk send cut short) at version " +
                                   std::to_string(rec.version));
  }
  // Only updates of the life we hold, or a life's first update onto a chunk
  // we do not hold (chunk_lives.h); else the chunk comes over whole.
  const bool fresh_life = rec.version == 0 && !rec.incomplete && first_of_life(v);
  if (fresh_life) rec.version = v - 1;
  if (v > rec.version + 1 || (life_of(v) != life_of(rec.version) && !fresh_life)) {
    return Status::ChunkVersionGap(what + ": target " + std::to_string(view_.own_id()) +
                                   " holds version " + std::to_string(rec.version));
  }
  if (place.successor != 0 && v < rec.version && v > rec.committed_version) {
    // Applied here, but the member after us may not hold it yet (it came
    // after a whole-chunk send that is still going on down the chain):
    // answering OK would let the head acknowledge it too early.
    return Status::Unavailable(what + ": target " + std::to_string(view_.own_id()) +
                               " holds version " + std::to_string(rec.version) + ", committed " +
                               std::to_string(rec.committed_version) +
                               ": not yet known stored further down the chain; retry");
  }
  if (v < rec.version || (v == rec.version && !rec.dirty())) {
    return Status::OK();  // applied and committed before: a resend
  }
  std::vector<uint32_t> whole{req.crc32c()};
  std::span<const uint32_t> crcs =
      req.piece_bytes() ? std::span<const uint32_t>(req.piece_crc32c().data(),
                                                    req.piece_crc32c_size())
                        : std::span<const uint32_t>(whole);
  const bool fresh = v == rec.version + 1;
  if (fresh) {
    rec.version = v;
    if (place.successor == 0) rec.committed_version = v;
    SURGE_RETURN_IF_ERROR(chunks_.index().put(key, rec, false));
    if (write && req.length() > 0) {
      SURGE_RETURN_IF_ERROR(pull_checked(ctx, 0, req.offset(), req.length(), req.piece_bytes(),
                                         crcs, buf.data(), chunks_.objects(), rec.object_id, what));
    } else if (req.kind() == pb::UPDATE_TRUNCATE) {
      SURGE_RETURN_IF_ERROR_CTX(chunks_.objects().truncate(rec.object_id, req.size()), what);
    } else if (req.kind() == pb::UPDATE_FALLOCATE) {
      SURGE_ASSIGN_OR_RETURN(ObjectStore::SpaceOp op, space_op(req.fallocate_mode(), what));
      SURGE_RETURN_IF_ERROR_CTX(chunks_.objects().fallocate(rec.object_id, req.offset(),
                                                            req.length(), op, req.keep_size()),
                                what);
    }
    if (req.ref().truncate_seq() > rec.truncate_seq) {
      // After the bytes (a cut's TRUNCATE): as at the head, a reader that
      // finds the generation finds them cut.
      rec.truncate_seq = req.ref().truncate_seq();
      SURGE_RETURN_IF_ERROR(chunks_.index().put(key, rec, false));
    }
    waits_.changed();
  } else if (write && req.length() > 0 && place.successor != 0) {
    // Applied but not committed: the bytes go on again, not stored again.
    for (uint64_t done = 0; done < req.length();) {
      const uint64_t n = std::min<uint64_t>(req.length() - done, 1 << 20);
      SURGE_RETURN_IF_ERROR_CTX(ctx.bulk().pull(0, done, {buf.data() + done, n}),
                                "pulling " + what);
      done += n;
    }
  }
  if (place.successor != 0) {
    ChunkUpdate u;
    u.kind = req.kind();
    u.version = v;
    u.offset = req.offset();
    u.size = req.size();
    u.length = req.length();
    u.fallocate_mode = req.fallocate_mode();
    u.keep_size = req.keep_size();
    u.sync = req.sync();
    if (write && req.length() > 0) {
      u = write_update(v, req.offset(), {buf.data(), req.length()}, req.piece_bytes(), crcs,
                       req.sync());
    }
    u.truncate_seq = rec.truncate_seq;
    SURGE_RETURN_IF_ERROR(forwarder_.forward(place, key, rec, u));
  }
  if (req.sync()) SURGE_RETURN_IF_ERROR(chunks_.sync(key, rec));
  SURGE_RETURN_IF_ERROR(commit(key, rec, v, req.sync()));
  SURGE_ASSIGN_OR_RETURN(uint64_t size, chunks_.size(rec));
  resp.set_chunk_size(size);
  return Status::OK();
}

Status ChainedChunks::list(const pb::ListChunksRequest& req, const ChainPlace&,
                           pb::ListChunksReply& resp) {
  if (req.max_entries() == 0 || req.max_entries() > 4096) {
    return Status::InvalidArgument("list of the chunks of chain " +
                                   std::to_string(req.ref().chain_id()) + ": max_entries " +
                                   std::to_string(req.max_entries()) + " not in 1..4096");
  }
  std::optional<ChunkKey> after;
  if (!req.from_start()) after = key_of(req.ref());
  SURGE_ASSIGN_OR_RETURN(auto page, chunks_.index().list(req.ref().chain_id(), after,
                                                         req.max_entries()));
  std::vector<std::byte> buf;
  for (const auto& [key, rec] : page) {
    auto* c = resp.add_chunks();
    c->set_ino(key.ino);
    c->set_slot(key.slot);
    c->set_position(key.position);
    c->set_version(rec.version);
    c->set_committed_version(rec.committed_version);
    c->set_incomplete(rec.incomplete);
    SURGE_ASSIGN_OR_RETURN(uint64_t size, chunks_.size(rec));
    c->set_size(size);
    if (req.with_crc()) {
      buf.resize(kReadPieceBytes);
      uint32_t crc = 0;
      for (uint64_t at = 0; at < size;) {
        auto got = chunks_.objects().read(rec.object_id, at, buf, &crc);
        if (!got.ok()) return got.status().WithContext("checksumming " + key.describe());
        if (*got == 0) break;
        at += *got;
      }
      c->set_crc32c(crc);
    }
  }
  resp.set_eof(page.size() < req.max_entries());
  return Status::OK();
}

Status ChainedChunks::resync(net::RpcContext& ctx, const pb::ResyncChunkRequest& req,
                             const ChainPlace& place, net::PoolBuffer buf,
                             pb::ResyncChunkReply&) {
  const std::string what = "resync of " + name_of(req.ref()) + " from " + ctx.peer();
  const ChunkKey key = key_of(req.ref());
  PausePoint pause("resync_before_order");
  auto order = order_.lock(key);
  SURGE_RETURN_IF_ERROR(still_current(place, what));
  SURGE_RETURN_IF_ERROR(sends_.admit(key, place.chain_id, place.version, req.send_id(),
                                     req.begin() || req.remove(), what));
  if (req.remove()) {
    SURGE_ASSIGN_OR_RETURN(auto rec, record(key, req.ref(), false));
    if (rec) SURGE_RETURN_IF_ERROR(chunks_.remove(key, *rec, false));
    return Status::OK();
  }
  const uint64_t max_size = chunks_.objects().options().max_object_size;
  if (req.offset() > max_size || req.length() > buf.capacity() ||
      req.length() > max_size - req.offset() || req.chunk_size() > max_size) {
    return Status::InvalidArgument(what + ": piece [" + std::to_string(req.offset()) + ", +" +
                                   std::to_string(req.length()) + ") of a " +
                                   std::to_string(req.chunk_size()) +
                                   "-byte chunk out of range or over one buffer");
  }
  if (req.length() > 0) {
    SURGE_RETURN_IF_ERROR(check_region(ctx, net::BulkAccess::kServerPull, req.length(), what));
    if (req.piece_bytes() == 0) return Status::InvalidArgument(what + ": no piece CRCs");
    SURGE_RETURN_IF_ERROR(check_pieces(req.offset(), req.length(), req.piece_bytes(),
                                       req.piece_crc32c_size(), buf.capacity(), what));
  }
  SURGE_ASSIGN_OR_RETURN(auto found, record(key, req.ref(), true));
  ChunkRecord rec = *found;
  if (req.begin()) {
    rec.incomplete = true;
    SURGE_RETURN_IF_ERROR(chunks_.index().put(key, rec, false));
    SURGE_RETURN_IF_ERROR_CTX(chunks_.objects().truncate(rec.object_id, 0), what);
  }
  if (req.length() > 0) {
    SURGE_RETURN_IF_ERROR(pull_checked(
        ctx, 0, req.offset(), req.length(), req.piece_bytes(),
        std::span<const uint32_t>(req.piece_crc32c().data(), req.piece_crc32c_size()),
        buf.data(), chunks_.objects(), rec.object_id, what));
  }
  if (req.last()) {
    SURGE_RETURN_IF_ERROR_CTX(chunks_.objects().truncate(rec.object_id, req.chunk_size()), what);
    rec.version = req.version();
    // Clean only at the tail; before it, the update that follows (forward
    // again) commits it once it went on.
    rec.committed_version = place.successor == 0
                                ? req.version()
                                : std::min(rec.committed_version, req.version());
    rec.incomplete = false;
    rec.truncate_seq = req.ref().truncate_seq();
    SURGE_RETURN_IF_ERROR(chunks_.sync(key, rec));
    SURGE_RETURN_IF_ERROR(chunks_.index().put(key, rec, true));
    waits_.changed();
  }
  return Status::OK();
}

}  // namespace surge::ods
