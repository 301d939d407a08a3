// Degraded reads of EC files (docs/redundancy.md, "EC writes: the
// design", degraded reads): a piece whose position's member does not
// serve is rebuilt from the same chunk range of K other positions of its
// group, read together, at a consistent cut of versions.
//
// A cut is consistent when every parity position read names, as applied,
// exactly the version each data position read answered with, and the
// parity positions read agree on the versions of the data positions not
// read (the missing one among them). Anything else (a write landing in
// between, a delta on its way) answers ChunkDirty, and DataPath tries
// again: the bytes rebuilt are never a mix of two versions.
//
// Truncates: the survivors are read as stored (no truncate generation in
// their refs, so a data chunk that has not applied the file's last
// truncate is not read as cut), since parity is the code of the bytes as
// stored; the bytes rebuilt are then seen as the lost chunk would serve
// them: cut at its size for that truncate when the parity says it had not
// applied it (ReadReply.applied_truncate_seqs).
#include <algorithm>
#include <cstring>
#include <memory>

#include "client/lib/stripe_io.h"
#include "common/chunk_map.h"
#include "common/crc32c.h"
#include "common/ec/rs_codec.h"
#include "net/proto/ods_methods.h"

namespace surge::client {

namespace {

namespace pb = proto::mds;

std::string positions_text(const std::vector<uint32_t>& ps) {
  std::string s;
  for (uint32_t p : ps) {
    if (!s.empty()) s += ',';
    s += std::to_string(p);
  }
  return s;
}

}  // namespace

Status StripeIo::read_rebuilt(const IoRequest& r, PieceFailure& a, const pb::Chain& chain,
                              std::chrono::milliseconds timeout) {
  const ChunkPiece& c = a.piece.chunk;
  const uint32_t k = r.layout.ec_data, m = r.layout.ec_parity, q = c.chunk.position;
  const uint64_t len = c.length;
  const std::string what =
      "rebuilding position " + std::to_string(q) + " of chunk " + std::to_string(c.chunk.ino) +
      "/" + std::to_string(c.chunk.slot) + " [" + std::to_string(c.chunk_offset) + ", +" +
      std::to_string(len) + ") of EC " + std::to_string(k) + "+" + std::to_string(m) + " chain " +
      std::to_string(chain.chain_id()) + " (version " + std::to_string(chain.version()) + ")";
  // Data positions first: their bytes are the file's own, and with all of
  // them but q the rebuild needs the fewest parity positions.
  std::vector<uint32_t> use;
  for (uint32_t i = 0; i < k + m && use.size() < k; ++i) {
    if (i != q && ec_member(chain, i, a.piece.hint).ok()) use.push_back(i);
  }
  if (use.size() < k) {
    return Status::Unavailable(what + ": only positions {" + positions_text(use) +
                               "} of the others serve, " + std::to_string(k) + " needed");
  }
  struct Survivor {
    uint32_t position = 0;
    uint32_t target = 0;
    std::string addr;
    std::unique_ptr<std::byte[]> bytes;  // len bytes, not zeroed: the read fills them
    net::PendingCall call;
    proto::ods::ReadReply reply;
  };
  std::vector<Survivor> got(use.size());
  auto failed = [&](Survivor& s, Status st) {
    a.target_id = s.target;
    a.addr = s.addr;
    return st.WithContext(what + ": reading position " + std::to_string(s.position) +
                          " from target " + std::to_string(s.target) + " at " + s.addr);
  };
  size_t sent = 0;
  Status first;
  for (; sent < use.size(); ++sent) {
    Survivor& s = got[sent];
    s.position = use[sent];
    s.target = chain.members(static_cast<int>(s.position)).target_id();
    auto addr = map_->address_of(s.target);
    if (!addr.ok()) {
      first = failed(s, addr.status());
      break;
    }
    s.addr = *addr;
    auto ch = channels_->get(s.addr);
    if (!ch.ok()) {
      channels_->drop(s.addr);
      first = failed(s, ch.status());
      break;
    }
    ChunkPiece at = c;
    at.chunk.position = s.position;
    proto::ods::ReadRequest req;
    set_chunk_ref(req.mutable_ref(), r, at, s.target, chain.version());
    req.mutable_ref()->clear_truncate_seq();  // as stored: what the parity encodes
    req.mutable_ref()->clear_truncate_size();
    req.set_offset(c.chunk_offset);
    req.set_length(len);
    s.bytes.reset(new std::byte[len]);
    net::BulkRegion region{s.bytes.get(), len, net::BulkAccess::kServerPush};
    s.call = net::call_async<proto::ods::OdsRead>(
        **ch, req, std::span<const net::BulkRegion>(&region, 1), timeout);
  }
  // Every read sent is waited for: the data servers push into our buffers.
  for (size_t i = 0; i < sent; ++i) {
    Survivor& s = got[i];
    Status st = net::finish_call<proto::ods::OdsRead>(s.call, &s.reply);
    if (st.ok() && s.reply.length() > len) {
      st = Status::ProtocolError("returned " + std::to_string(s.reply.length()) + " bytes for a " +
                                 std::to_string(len) + "-byte read");
    } else if (st.ok() && crc32c(s.bytes.get(), s.reply.length()) != s.reply.crc32c()) {
      st = Status::Corruption("checksum mismatch");
    }
    if (!st.ok()) {
      if (is_unreachable(st.code())) channels_->drop(s.addr);
      if (first.ok()) first = failed(s, st);
      continue;
    }
    // Past a chunk's end, inside the group: zeros, as the code counts them.
    std::memset(s.bytes.get() + s.reply.length(), 0, len - s.reply.length());
  }
  if (!first.ok()) return first;

  // The cut: data versions read, and what each parity position applied.
  std::vector<uint64_t> version(k, 0);
  std::vector<bool> known(k, false);
  for (const Survivor& s : got) {
    if (s.position < k) {
      version[s.position] = s.reply.chunk_version();
      known[s.position] = true;
    }
  }
  std::vector<uint64_t> missing(k, 0);  // the data not read, as the first parity names it
  uint64_t q_truncate = 0;              // the generation q had applied, as parity knows it
  bool first_parity = true;
  for (const Survivor& s : got) {
    if (s.position < k) continue;
    std::vector<uint64_t> applied(s.reply.applied_versions().begin(),
                                  s.reply.applied_versions().end());
    if (applied.empty()) applied.assign(k, 0);  // a parity chunk never written
    if (applied.size() != k) {
      return Status::ProtocolError(what + ": parity position " + std::to_string(s.position) +
                                   " names " + std::to_string(applied.size()) +
                                   " applied versions for " + std::to_string(k) +
                                   " data positions");
    }
    for (uint32_t d = 0; d < k; ++d) {
      const uint64_t want = known[d] ? version[d] : (first_parity ? applied[d] : missing[d]);
      if (applied[d] != want) {
        return Status::ChunkDirty(what + ": parity position " + std::to_string(s.position) +
                                  " applied version " + std::to_string(applied[d]) +
                                  " of data position " + std::to_string(d) + ", the read found " +
                                  std::to_string(want) + "; a write is landing, retry");
      }
      if (!known[d]) missing[d] = applied[d];
    }
    if (static_cast<int>(q) < s.reply.applied_truncate_seqs_size()) {
      q_truncate = std::max(q_truncate, s.reply.applied_truncate_seqs(static_cast<int>(q)));
    }
    first_parity = false;
  }

  auto codec = ec::RsCodec::Create(k, m);
  if (!codec.ok()) return codec.status().WithContext(what);
  std::vector<uint8_t*> chunks(k + m, nullptr);
  ec::ChunkSet present, want;
  for (Survivor& s : got) {
    chunks[s.position] = reinterpret_cast<uint8_t*>(s.bytes.get());
    present.set(s.position);
  }
  chunks[q] = reinterpret_cast<uint8_t*>(r.buf + a.piece.buf_offset);
  want.set(q);
  SURGE_RETURN_IF_ERROR(codec->Reconstruct(chunks, present, want, len).WithContext(what));
  if (r.layout.truncate_seq > q_truncate) {
    // q had not applied the file's last truncate: seen as cut, as q would
    // serve it (and as it will be once it returns and the MDS cuts it).
    const uint64_t cut =
        chunk_size_for_file_size(r.layout, c.chunk.slot, q, r.layout.truncate_size);
    if (c.chunk_offset + len > cut) {
      const uint64_t from = cut > c.chunk_offset ? cut - c.chunk_offset : 0;
      std::memset(chunks[q] + from, 0, len - from);
    }
  }
  return Status::OK();
}

}  // namespace surge::client
