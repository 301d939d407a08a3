// EcGroupWrite: full-group EC writes encoded by the client. See
// ec_group_write.h.
#include "client/lib/ec_group_write.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "common/ec/row_encode.h"
#include "net/proto/ods_methods.h"
#include "net/proto/ods_write_pieces.h"

namespace surge::client {
namespace {

namespace ods = proto::ods;

// A piece's chunk range as a group row: chain, slot, offset, length.
using RowKey = std::tuple<uint32_t, uint32_t, uint64_t, uint64_t>;

}  // namespace

std::vector<std::unique_ptr<EcGroupWrite>> EcGroupWrite::take(const IoRequest& r,
                                                              std::vector<IoPiece>& pieces) {
  std::vector<std::unique_ptr<EcGroupWrite>> runs;
  const uint32_t k = r.layout.ec_data;
  if (r.op != IoOp::kWrite || !r.layout.erasure() || k < 1) return runs;
  // Rows by their pieces' indexes, position i at [i], in chunk order.
  std::map<RowKey, std::vector<size_t>> rows;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const ChunkPiece& c = pieces[i].chunk;
    if (c.chunk.position >= k || c.length == 0 ||
        c.chunk_offset % StripeIo::kMaxPiece + c.length > StripeIo::kMaxPiece) {
      continue;
    }
    auto& row = rows[{c.chain_id, c.chunk.slot, c.chunk_offset, c.length}];
    if (row.empty()) row.assign(k, SIZE_MAX);
    row[c.chunk.position] = i;
  }
  std::vector<bool> taken(pieces.size(), false);
  EcGroupWrite* run = nullptr;
  RowKey last{};
  for (const auto& [key, row] : rows) {
    if (std::find(row.begin(), row.end(), SIZE_MAX) != row.end()) continue;
    const auto [chain, slot, off, len] = key;
    const auto [last_chain, last_slot, last_off, last_len] = last;
    // Joins the run when it goes on where the run ends, inside its window.
    const bool joins =
        run != nullptr && chain == last_chain && slot == last_slot && off == last_off + last_len &&
        run->chunk_offset_ / StripeIo::kMaxPiece == (off + len - 1) / StripeIo::kMaxPiece;
    if (!joins) {
      runs.push_back(std::make_unique<EcGroupWrite>());
      run = runs.back().get();
      run->chunk_offset_ = off;
      run->data_units_ = k;
    }
    Row rw;
    rw.chunk_offset = off;
    rw.length = len;
    rw.data.resize(k);
    for (uint32_t p = 0; p < k; ++p) {
      rw.data[p].attempt.piece = pieces[row[p]];
      taken[row[p]] = true;
    }
    run->rows_.push_back(std::move(rw));
    run->length_ += len;
    last = key;
  }
  if (!runs.empty()) {
    std::vector<IoPiece> rest;
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (!taken[i]) rest.push_back(std::move(pieces[i]));
    }
    pieces = std::move(rest);
  }
  return runs;
}

std::pair<uint32_t, uint32_t> EcGroupWrite::chunks() const {
  const ChunkPiece& c = rows_.front().data.front().attempt.piece.chunk;
  return {c.chain_id, c.chunk.slot};
}

void EcGroupWrite::begin(IoBatch& b) {
  StripeIo& io = *b.io_;
  const IoRequest& r = b.req_;
  const uint32_t k = r.layout.ec_data, m = r.layout.ec_parity;
  auto give_up = [&] {
    given_up_ = true;
    for (Row& row : rows_) {
      for (Member& d : row.data) io.issue(b, std::move(d.attempt.piece));
    }
    rows_.clear();
  };
  auto chain = io.map_->chain(rows_[0].data[0].attempt.piece.chunk.chain_id);
  if (!chain.ok() || chain->scheme() != proto::mds::SCHEME_EC) return give_up();
  chain_ = std::move(*chain);
  std::vector<uint32_t> targets(k);
  for (uint32_t p = 0; p < k; ++p) {
    auto member = ec_writer(chain_, p, rows_[0].data[p].attempt.piece.hint);
    if (!member.ok()) return give_up();  // a plain write fails and is retried
    targets[p] = *member;
  }
  for (Row& row : rows_) {
    for (uint32_t p = 0; p < k; ++p) {
      Member& d = row.data[p];
      d.attempt.target_id = targets[p];
      d.attempt.chain_version = chain_.version();
      auto ch = io.connect(d.attempt);
      if (!ch.ok()) {
        // Recorded as failed; the others still go (committed with their
        // deltas: this row gets no parity).
        b.record(std::move(d.attempt), ch.status());
        continue;
      }
      d.channel = std::move(*ch);
      ods::WriteRequest req;
      req.set_ec_hold(true);
      send_write(b, d, std::move(req), r.buf + d.attempt.piece.buf_offset);
    }
  }
  // The parity, from the caller's buffer in place, while the data moves.
  // Without it no parity is sent: the data positions send deltas.
  auto codec = io.codec(k, m);
  if (!codec.ok()) return;
  std::vector<ec::RowSources> sources(rows_.size());
  for (size_t i = 0; i < rows_.size(); ++i) {
    sources[i].offset = rows_[i].chunk_offset - chunk_offset_;
    sources[i].length = rows_[i].length;
    for (const Member& d : rows_[i].data)
      sources[i].data.push_back(r.buf + d.attempt.piece.buf_offset);
  }
  parity_from_ = &io.parity_;
  std::vector<std::byte*> out;
  for (uint32_t j = 0; j < m; ++j) {
    parity_bufs_.push_back(io.parity_.take());
    out.push_back(parity_bufs_.back().get());
  }
  // A run lies inside one kMaxPiece window, the size of the buffers.
  if (length_ > io.parity_.bytes() || !ec::encode_rows(**codec, sources, length_, out).ok()) {
    for (auto& p : parity_bufs_) io.parity_.give(std::move(p));
    parity_bufs_.clear();
  }
}

EcGroupWrite::~EcGroupWrite() {
  // Every parity write was waited for (finish_parity) before a batch lets
  // its runs go, so no request reads these any more.
  if (parity_from_ == nullptr) return;
  for (auto& p : parity_bufs_) parity_from_->give(std::move(p));
}

bool EcGroupWrite::finish_call(IoBatch& b, Member& m, bool record, ods::WriteReply* reply) {
  if (!m.sent) return false;
  m.sent = false;
  Status st = net::finish_call<ods::OdsWrite>(m.call, reply);
  b.inflight_bytes_ -= m.attempt.piece.chunk.length;
  if (st.ok()) return true;
  if (record) {
    b.record(std::move(m.attempt), std::move(st));
  } else if (is_unreachable(st.code())) {
    b.io_->channels_->drop(m.attempt.addr);
  }
  return false;
}

void EcGroupWrite::send_parity(IoBatch& b) {
  if (given_up_) return;
  bool all = true;
  for (Row& row : rows_) {
    row.answered = true;
    for (Member& d : row.data) {
      ods::WriteReply reply;
      if (!finish_call(b, d, true, &reply)) {
        row.answered = false;  // not sent, or failed (recorded): no parity for it
        continue;
      }
      d.version = reply.chunk_version();
      d.held = reply.ec_held();
    }
    all = all && row.answered;
  }
  if (parity_bufs_.empty()) return;
  // One parity write for the whole run when every position's updates of
  // it follow each other (nobody else's in between); else one per row.
  bool consecutive = all;
  for (uint32_t p = 0; consecutive && p < data_units_; ++p) {
    std::vector<uint64_t> v;
    for (const Row& row : rows_) v.push_back(row.data[p].version);
    std::sort(v.begin(), v.end());
    consecutive = v.back() - v.front() + 1 == v.size();
  }
  const uint32_t m = b.req_.layout.ec_parity;
  for (uint32_t j = 0; j < m; ++j) {
    if (consecutive) {
      send_parity_write(b, j, 0, rows_.size(), true);
      continue;
    }
    for (size_t i = 0; i < rows_.size(); ++i) {
      if (rows_[i].answered) send_parity_write(b, j, i, i + 1, false);
    }
  }
}

void EcGroupWrite::send_parity_write(IoBatch& b, uint32_t j, size_t from, size_t to,
                                     bool whole_run) {
  StripeIo& io = *b.io_;
  const uint32_t k = data_units_;
  auto member = ec_member(chain_, k + j, {});
  if (!member.ok()) return;  // not serving: no delta goes there either
  Member p;
  p.attempt.piece.chunk = rows_[from].data[0].attempt.piece.chunk;
  p.attempt.piece.chunk.chunk.position = k + j;
  p.attempt.piece.chunk.chunk_offset = rows_[from].chunk_offset;
  p.attempt.piece.chunk.length = 0;
  for (size_t i = from; i < to; ++i) p.attempt.piece.chunk.length += rows_[i].length;
  p.attempt.target_id = *member;
  p.attempt.chain_version = chain_.version();
  p.row_from = from;
  p.row_to = to;
  auto ch = io.connect(p.attempt);
  if (!ch.ok()) return;
  p.channel = std::move(*ch);
  ods::WriteRequest req;
  for (uint32_t d = 0; d < k; ++d) {
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = from; i < to; ++i) {
      lo = std::min(lo, rows_[i].data[d].version);
      hi = std::max(hi, rows_[i].data[d].version);
    }
    req.add_ec_group_versions(hi);
    if (whole_run) req.add_ec_group_base_versions(lo - 1);
  }
  send_write(b, p, std::move(req),
             parity_bufs_[j].get() + (p.attempt.piece.chunk.chunk_offset - chunk_offset_));
  parity_.push_back(std::move(p));
}

void EcGroupWrite::send_write(IoBatch& b, Member& m, ods::WriteRequest req, const std::byte* src) {
  const ChunkPiece& c = m.attempt.piece.chunk;
  set_chunk_ref(req.mutable_ref(), b.req_, c, m.attempt.target_id, m.attempt.chain_version);
  req.set_offset(c.chunk_offset);
  req.set_length(c.length);
  ods::set_piece_crcs(req, src, c.length);
  net::BulkRegion region{const_cast<std::byte*>(src), c.length, net::BulkAccess::kServerPull};
  m.call = net::call_async<ods::OdsWrite>(*m.channel, req,
                                          std::span<const net::BulkRegion>(&region, 1), b.timeout_);
  m.sent = true;
  b.inflight_bytes_ += c.length;
}

void EcGroupWrite::finish_parity(IoBatch& b) {
  for (Member& p : parity_) {
    ods::WriteReply reply;
    p.applied = finish_call(b, p, false, &reply) && reply.ec_applied();
  }
}

void EcGroupWrite::commit_all(IoBatch& b, std::vector<std::unique_ptr<EcGroupWrite>>& groups) {
  // One commit per data chunk: (target, chain, slot, position) -> its
  // held updates' members.
  struct Commit {
    std::vector<Member*> members;
    ods::EcCommitRequest req;
    net::PendingCall call;
    bool all_applied = true;  // every parity position stored every update's parity
  };
  const uint32_t m = b.req_.layout.ec_parity;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>, Commit> commits;
  for (auto& g : groups) {
    if (g->given_up_) continue;
    for (size_t i = 0; i < g->rows_.size(); ++i) {
      for (Member& d : g->rows_[i].data) {
        if (!d.held) continue;  // failed, or committed with its delta at once
        const ChunkPiece& c = d.attempt.piece.chunk;
        Commit& cm = commits[{d.attempt.target_id, c.chain_id, c.chunk.slot, c.chunk.position}];
        if (cm.members.empty()) {
          set_chunk_ref(cm.req.mutable_ref(), b.req_, c, d.attempt.target_id,
                        d.attempt.chain_version);
        }
        cm.members.push_back(&d);
        ods::EcHeldUpdate* u = cm.req.add_updates();
        u->set_version(d.version);
        for (const Member& p : g->parity_) {
          if (p.applied && p.row_from <= i && i < p.row_to) {
            u->add_parity_applied(p.attempt.piece.chunk.chunk.position);
          }
        }
        cm.all_applied = cm.all_applied && static_cast<uint32_t>(u->parity_applied_size()) == m;
      }
    }
  }
  for (auto& [key, cm] : commits) {
    cm.call = net::call_async<ods::OdsEcCommit>(*cm.members[0]->channel, cm.req, {}, b.timeout_);
  }
  for (auto& [key, cm] : commits) {
    // Every parity position holds the parity already: the group is whole,
    // the commit only ends the data position's hold and sends nothing, so
    // the write need not wait for it (lost, the data server's sweeper ends
    // the hold).
    if (cm.all_applied) continue;
    Status st = net::finish_call<ods::OdsEcCommit>(cm.call, nullptr);
    if (st.ok()) continue;
    for (Member* d : cm.members) b.record(std::move(d->attempt), st);
  }
}

}  // namespace surge::client
