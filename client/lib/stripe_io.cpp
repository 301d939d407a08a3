#include "client/lib/stripe_io.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "client/lib/ec_group_write.h"
#include "common/crc32c.h"
#include "common/stripe_map.h"
#include "net/proto/ods_methods.h"
#include "net/proto/ods_write_pieces.h"

namespace surge::client {

namespace {

namespace ods = proto::ods;

std::string chunk_text(const IoRequest& r, const ChunkPiece& c) {
  if (c.chain_id == 0) return "object " + std::to_string(r.ino);
  return "chunk " + std::to_string(c.chunk.ino) + "/" + std::to_string(c.chunk.slot) + "/" +
         std::to_string(c.chunk.position) + " of chain " + std::to_string(c.chain_id);
}

const char* verb(IoOp op) {
  switch (op) {
    case IoOp::kWrite:
      return "writing";
    case IoOp::kRead:
      return "reading";
    case IoOp::kSync:
      return "syncing";
    case IoOp::kFallocate:
      return "fallocate of";
  }
  return "?";
}

}  // namespace

void set_chunk_ref(ods::ChunkRef* ref, const IoRequest& r, const ChunkPiece& c, uint32_t target,
                   uint64_t chain_version) {
  ref->set_target_id(target);  // refused if the address now serves another target
  if (c.chain_id != 0) {       // else format 1: the legacy object named by object_id
    ref->set_chain_id(c.chain_id);
    ref->set_chain_version(chain_version);
    ref->set_ino(c.chunk.ino);
    ref->set_slot(c.chunk.slot);
    ref->set_position(c.chunk.position);
  }
  if (r.layout.truncate_seq != 0) {
    // The file's last truncate as we know it, in this chunk's terms: the
    // data server cuts a chunk that has not applied it before our update,
    // and reads it as cut.
    ref->set_truncate_seq(r.layout.truncate_seq);
    ref->set_truncate_size(
        chunk_size_for_file_size(r.layout, c.chunk.slot, c.chunk.position, r.layout.truncate_size));
  }
}

namespace {

net::PendingCall send(net::RpcChannel& ch, const IoRequest& r, const IoPiece& p, uint32_t target,
                      uint64_t chain_version, bool ec_stand_in, std::chrono::milliseconds timeout) {
  const ChunkPiece& c = p.chunk;
  const uint64_t object_id = c.chain_id == 0 ? r.ino : 0;
  switch (r.op) {
    case IoOp::kWrite: {
      ods::WriteRequest req;
      req.set_object_id(object_id);
      set_chunk_ref(req.mutable_ref(), r, c, target, chain_version);
      req.set_offset(c.chunk_offset);
      req.set_length(c.length);
      req.set_ec_stand_in(ec_stand_in);
      const std::byte* src = r.buf + p.buf_offset;
      ods::set_piece_crcs(req, src, c.length);
      net::BulkRegion region{const_cast<std::byte*>(src), c.length, net::BulkAccess::kServerPull};
      return net::call_async<ods::OdsWrite>(ch, req, std::span<const net::BulkRegion>(&region, 1),
                                            timeout);
    }
    case IoOp::kRead: {
      ods::ReadRequest req;
      req.set_object_id(object_id);
      set_chunk_ref(req.mutable_ref(), r, c, target, chain_version);
      req.set_offset(c.chunk_offset);
      req.set_length(c.length);
      net::BulkRegion region{r.buf + p.buf_offset, c.length, net::BulkAccess::kServerPush};
      return net::call_async<ods::OdsRead>(ch, req, std::span<const net::BulkRegion>(&region, 1),
                                           timeout);
    }
    case IoOp::kSync: {
      ods::SyncRequest req;
      if (c.chain_id == 0) {
        req.add_object_ids(object_id);
      } else {
        set_chunk_ref(req.add_refs(), r, c, target, chain_version);
      }
      return net::call_async<ods::OdsSync>(ch, req, {}, timeout);
    }
    case IoOp::kFallocate: {
      ods::FallocateRequest req;
      req.set_object_id(object_id);
      set_chunk_ref(req.mutable_ref(), r, c, target, chain_version);
      req.set_offset(c.chunk_offset);
      req.set_length(c.length);
      req.set_mode(r.mode);
      req.set_keep_size(r.keep_size);
      return net::call_async<ods::OdsFallocate>(ch, req, {}, timeout);
    }
  }
  return {};
}

IoPiece piece_of(const ChunkPiece& c) {
  IoPiece p;
  p.chunk = c;
  return p;
}

}  // namespace

IoRequest make_request(IoOp op, uint64_t ino, const FileLayout& layout, const void* buf) {
  IoRequest r;
  r.op = op;
  r.ino = ino;
  r.layout = layout;
  r.buf = static_cast<std::byte*>(const_cast<void*>(buf));
  return r;
}

bool is_refusal(Code c) {
  return c == Code::kWrongTarget || c == Code::kStaleChain;
}

bool is_unreachable(Code c) {
  return c == Code::kDisconnected || c == Code::kConnectionRefused || c == Code::kTimedOut ||
         c == Code::kCancelled || c == Code::kAuthFailed;
}

Status StripeIo::check(const IoRequest& r) {
  Status st = validate(r.layout, r.ino);
  if (!st.ok()) return Status::Corruption(st.message());
  if (r.layout.erasure() && r.op == IoOp::kFallocate) {
    // A punch or zero of data needs its parity deltas, a reservation means
    // little on one position: EOPNOTSUPP, and posix_fallocate writes zeros.
    return Status::NotSupported("fallocate of inode " + std::to_string(r.ino) +
                                ": its layout is erasure-coded (" + surge::describe(r.layout) +
                                "), which takes no fallocate");
  }
  return Status::OK();
}

std::vector<IoPiece> StripeIo::plan(const IoRequest& r, uint64_t offset, uint64_t len) {
  std::vector<IoPiece> out;
  if (r.op == IoOp::kSync) {
    for (const ChunkPiece& c : all_chunks(r.layout, r.ino)) out.push_back(piece_of(c));
    return out;
  }
  if (r.op == IoOp::kFallocate) {
    // One range per chunk: a slot's stripe units lie end to end in it.
    const StripeGeometry g{r.layout.stripe_size, r.layout.stripe_count};
    for (ChunkPiece c : all_chunks(r.layout, r.ino)) {
      const auto [from, to] = object_range_of(g, c.chunk.slot, offset, len);
      if (from == to) continue;
      c.chunk_offset = from;
      c.length = to - from;
      out.push_back(piece_of(c));
    }
    return out;
  }
  for (const ChunkPiece& c : map_range(r.layout, r.ino, offset, len)) {
    for (uint64_t done = 0; done < c.length; done += kMaxPiece) {
      IoPiece p = piece_of(c);
      p.chunk.length = std::min<uint64_t>(kMaxPiece, c.length - done);
      p.chunk.chunk_offset += done;
      p.chunk.file_offset += done;
      p.buf_offset = p.chunk.file_offset - offset;
      out.push_back(std::move(p));
    }
  }
  return out;
}

void StripeIo::issue(IoBatch& b, IoPiece piece) {
  PieceFailure a;
  a.piece = std::move(piece);
  const ChunkPiece& c = a.piece.chunk;
  auto fail = [&](Status st, bool unreachable, bool no_route) {
    a.status = std::move(st);
    a.unreachable = unreachable;
    a.no_route = no_route;
    b.failed_.push_back(std::move(a));
  };
  if (c.chain_id == 0) {
    a.target_id = c.target_id;
  } else {
    auto chain = map_->chain(c.chain_id);
    if (!chain.ok()) return fail(chain.status(), false, true);
    a.chain_version = chain->version();
    if (chain->scheme() == proto::mds::SCHEME_EC) {
      auto member = b.req_.op == IoOp::kRead ? ec_member(*chain, c.chunk.position, a.piece.hint)
                                             : ec_writer(*chain, c.chunk.position, a.piece.hint);
      if (!member.ok() && b.req_.op == IoOp::kWrite) {
        auto stand_in = ec_stand_in(*chain, c.chunk.position, a.piece.hint);
        if (stand_in.ok()) {
          member = stand_in;
          a.ec_stand_in = true;
        }
      }
      if (member.ok()) {
        a.target_id = *member;
      } else if (b.req_.op == IoOp::kRead) {
        // After the batch's other pieces are sent: their reads and the
        // rebuild's K overlap.
        b.rebuilds_.push_back(IoBatch::Rebuild{std::move(a), *chain});
        return;
      } else if (b.req_.op == IoOp::kSync) {
        return;  // nothing of it is held where it does not serve
      } else {
        return fail(member.status(), false, false);  // retried until it serves or the io timeout
      }
    } else {
      auto member = b.req_.op == IoOp::kRead
                        ? chain_reader(*chain,
                                       read_spread_key(c.chunk.ino, c.chunk.slot,
                                                       c.chunk_offset / b.req_.layout.stripe_size),
                                       a.piece.hint)
                        : chain_head(*chain);
      if (!member.ok()) return fail(member.status(), false, true);
      a.target_id = *member;
    }
  }
  auto ch = connect(a);
  if (!ch.ok()) return fail(ch.status(), a.unreachable, a.no_route);
  net::PendingCall call =
      send(**ch, b.req_, a.piece, a.target_id, a.chain_version, a.ec_stand_in, b.timeout_);
  b.inflight_bytes_ += c.length;
  b.calls_.push_back(IoBatch::Call{std::move(call), std::move(a)});
}

Result<std::shared_ptr<net::RpcChannel>> StripeIo::connect(PieceFailure& a) {
  auto addr = map_->address_of(a.target_id);
  if (!addr.ok()) {
    a.no_route = true;
    return addr.status();
  }
  a.addr = *addr;
  auto ch = channels_->get(a.addr);
  if (!ch.ok()) {
    // Maybe it moved: look again once with a fresh map.
    map_->mark_stale();
    auto again = map_->address_of(a.target_id);
    if (again.ok() && *again != a.addr) {
      a.addr = *again;
      ch = channels_->get(a.addr);
    }
  }
  if (!ch.ok()) {
    // Whatever the code (a reset during the handshake reads Unavailable),
    // no connection means the target was not reached.
    channels_->drop(a.addr);
    a.unreachable = true;
  }
  return ch;
}

Result<const ec::RsCodec*> StripeIo::codec(uint32_t k, uint32_t m) {
  std::lock_guard lk(codecs_mu_);
  auto& c = codecs_[{k, m}];
  if (!c) {
    SURGE_ASSIGN_OR_RETURN(ec::RsCodec made, ec::RsCodec::Create(k, m));
    c = std::make_unique<ec::RsCodec>(std::move(made));
  }
  return c.get();
}

IoBatch::IoBatch() = default;
IoBatch::~IoBatch() {
  (void)wait();
}

void IoBatch::record(PieceFailure a, Status st) {
  a.unreachable = a.unreachable || is_unreachable(st.code());
  if (a.unreachable && !a.addr.empty()) {
    // The connection is dead or wedged: the next attempt connects again.
    io_->channels_->drop(a.addr);
    io_->map_->mark_stale();
  }
  a.status = std::move(st);
  failed_.push_back(std::move(a));
}

void IoBatch::finish_groups() {
  for (auto& g : groups_) g->send_parity(*this);
  for (auto& g : groups_) g->finish_parity(*this);
  EcGroupWrite::commit_all(*this, groups_);
  groups_.clear();
}

void IoBatch::finish_front() {
  Call c = std::move(calls_.front());
  calls_.pop_front();
  const ChunkPiece& p = c.attempt.piece.chunk;
  inflight_bytes_ -= p.length;
  Status st;
  switch (req_.op) {
    case IoOp::kWrite:
      st = net::finish_call<proto::ods::OdsWrite>(c.call, nullptr);
      break;
    case IoOp::kSync:
      st = net::finish_call<proto::ods::OdsSync>(c.call, nullptr);
      break;
    case IoOp::kFallocate:
      st = net::finish_call<proto::ods::OdsFallocate>(c.call, nullptr);
      break;
    case IoOp::kRead: {
      proto::ods::ReadReply reply;
      st = net::finish_call<proto::ods::OdsRead>(c.call, &reply);
      std::byte* dst = req_.buf + c.attempt.piece.buf_offset;
      if (st.code() == Code::kNotFound) {
        // No object (chunk) yet on this target: the whole piece is a hole.
        std::memset(dst, 0, p.length);
        return;
      }
      if (!st.ok()) break;
      if (reply.length() > p.length) {
        st = Status::ProtocolError("returned " + std::to_string(reply.length()) + " bytes for a " +
                                   std::to_string(p.length) + "-byte read");
      } else if (crc32c(dst, reply.length()) != reply.crc32c()) {
        st = Status::Corruption("checksum mismatch");
      } else if (reply.length() < p.length) {
        // Short: past the end of this chunk, inside the file: zeros.
        std::memset(dst + reply.length(), 0, p.length - reply.length());
      }
      break;
    }
  }
  if (st.ok()) return;
  record(std::move(c.attempt), std::move(st));
}

void IoBatch::finish_rebuilds() {
  for (Rebuild& rb : rebuilds_) {
    Status st = io_->read_rebuilt(req_, rb.attempt, rb.chain, timeout_);
    if (st.ok()) continue;
    rb.attempt.unreachable = is_unreachable(st.code());
    rb.attempt.status = std::move(st);
    failed_.push_back(std::move(rb.attempt));
  }
  rebuilds_.clear();
}

Status IoBatch::wait() {
  if (done_) return result_;
  done_ = true;
  finish_groups();
  finish_rebuilds();
  while (!calls_.empty()) finish_front();
  if (failed_.empty()) return result_ = Status::OK();
  if (on_failed_) return result_ = on_failed_(failed_);
  return result_ = StripeIo::describe(req_, failed_.front());
}

std::unique_ptr<IoBatch> StripeIo::start(const IoRequest& r, uint64_t offset, uint64_t len) {
  auto b = std::make_unique<IoBatch>();
  b->io_ = this;
  b->req_ = r;
  b->timeout_ = options_.attempt_timeout;
  Status bad = check(r);
  if (!bad.ok()) {
    b->done_ = true;
    b->result_ = std::move(bad);
    return b;
  }
  if (len == 0) return b;
  issue_all(*b, plan(r, offset, len), 0);
  return b;
}

void StripeIo::issue_all(IoBatch& b, std::vector<IoPiece> pieces, size_t max_inflight) {
  auto room_for = [&](uint64_t bytes) {
    if (max_inflight == 0) return;
    if (!b.groups_.empty() && b.inflight_bytes_ + bytes > max_inflight) b.finish_groups();
    while (!b.calls_.empty() && b.inflight_bytes_ + bytes > max_inflight) b.finish_front();
  };
  // Full-group runs in waves: the n-th run of each chunk set goes in wave
  // n, and a wave starts once the one before has stored its parity (its
  // commits sent). Runs of one chunk set under way at once would get
  // their versions at each data position in whatever order the requests
  // came, which may differ between positions; the parity of each would
  // then wait for the other's, both be declined after the parity
  // position's turn wait, and the group be made up by deltas (writes of
  // 16 MiB and more, two windows per chunk, ran at a tenth of the rate).
  std::map<std::pair<uint32_t, uint32_t>, size_t> runs_of;
  std::vector<std::vector<std::unique_ptr<EcGroupWrite>>> waves;
  for (auto& g : EcGroupWrite::take(b.req_, pieces)) {
    const size_t w = runs_of[g->chunks()]++;
    if (waves.size() <= w) waves.resize(w + 1);
    waves[w].push_back(std::move(g));
  }
  for (size_t w = 0; w < waves.size(); ++w) {
    if (w > 0) b.finish_groups();
    for (auto& g : waves[w]) {
      room_for(g->bytes());
      g->begin(b);
      b.groups_.push_back(std::move(g));
    }
  }
  for (IoPiece& p : pieces) {
    room_for(p.chunk.length);
    issue(b, std::move(p));
  }
}

std::vector<PieceFailure> StripeIo::run(const IoRequest& r, std::vector<IoPiece> pieces) {
  return run(r, std::move(pieces), options_.attempt_timeout);
}

std::vector<PieceFailure> StripeIo::run(const IoRequest& r, std::vector<IoPiece> pieces,
                                        std::chrono::milliseconds timeout) {
  IoBatch b;
  b.io_ = this;
  b.req_ = r;
  b.timeout_ = timeout;
  issue_all(b, std::move(pieces), options_.max_inflight_bytes);
  b.finish_groups();
  b.finish_rebuilds();
  while (!b.calls_.empty()) b.finish_front();
  b.done_ = true;
  return std::move(b.failed_);
}

Status StripeIo::describe(const IoRequest& r, const PieceFailure& f) {
  const ChunkPiece& c = f.piece.chunk;
  std::string what = std::string(verb(r.op)) + " " + chunk_text(r, c);
  if (r.op != IoOp::kSync) what += " offset " + std::to_string(c.chunk_offset);
  if (f.target_id != 0) {
    what += (r.op == IoOp::kRead ? " from" : " on");
    what += " data server target " + std::to_string(f.target_id);
    if (!f.addr.empty()) what += " at " + f.addr;
  }
  if (c.chain_id != 0 && f.chain_version != 0) {
    what += " (chain version " + std::to_string(f.chain_version) + ")";
  }
  Status st = f.status;
  if (f.unreachable) st = Status::IOError(st.ToString());
  if (!f.piece.previous.ok() && f.no_route) {
    // No member left: say what happened to the last one tried.
    st = Status::IOError(st.message() + "; before that: " + f.piece.previous.ToString());
  }
  return st.WithContext(what);
}

Status StripeIo::first_failure(const IoRequest& r, const std::vector<PieceFailure>& failed) {
  return failed.empty() ? Status::OK() : describe(r, failed.front());
}

Status StripeIo::write(uint64_t ino, const FileLayout& layout, const void* buf, size_t len,
                       uint64_t offset) {
  IoRequest r = make_request(IoOp::kWrite, ino, layout, buf);
  SURGE_RETURN_IF_ERROR(check(r));
  return first_failure(r, run(r, plan(r, offset, len)));
}

Status StripeIo::read(uint64_t ino, const FileLayout& layout, void* buf, size_t len,
                      uint64_t offset) {
  IoRequest r = make_request(IoOp::kRead, ino, layout, buf);
  SURGE_RETURN_IF_ERROR(check(r));
  return first_failure(r, run(r, plan(r, offset, len)));
}

Status StripeIo::sync(uint64_t ino, const FileLayout& layout) {
  IoRequest r = make_request(IoOp::kSync, ino, layout, nullptr);
  SURGE_RETURN_IF_ERROR(check(r));
  return first_failure(r, run(r, plan(r, 0, 0)));
}

}  // namespace surge::client
