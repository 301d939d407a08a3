#include "client/lib/stripe_io.h"

#include <cstring>
#include <deque>

#include "common/crc32c.h"
#include "common/log.h"
#include "common/stripe_map.h"
#include "net/proto/ods_methods.h"
#include "net/proto/ods_write_pieces.h"

namespace surge::client {

namespace {

using proto::ods::OdsRead;
using proto::ods::OdsSync;
using proto::ods::OdsWrite;

struct Piece {
  uint32_t target;
  uint64_t object_offset;
  uint64_t buf_offset;  // from the start of the caller's buffer
  uint64_t length;
};

// Stripe pieces, cut again to at most kMaxPiece bytes each.
std::vector<Piece> plan(const StripeLayout& layout, uint64_t offset, uint64_t len) {
  StripeGeometry g{layout.stripe_size, layout.stripe_count};
  std::vector<Piece> out;
  for (const StripePiece& p : split_range(g, offset, len)) {
    for (uint64_t done = 0; done < p.length; done += StripeIo::kMaxPiece) {
      uint64_t n = std::min<uint64_t>(StripeIo::kMaxPiece, p.length - done);
      out.push_back(Piece{layout.targets[p.slot], p.object_offset + done,
                          p.file_offset - offset + done, n});
    }
  }
  return out;
}

// Sends piece p of a write whose data starts at base: the data server pulls
// it from there and checks it against the piece CRCs.
net::PendingCall send_write(net::RpcChannel& ch, uint64_t object_id, const Piece& p,
                            const std::byte* base, std::chrono::milliseconds timeout) {
  proto::ods::WriteRequest req;
  req.set_object_id(object_id);
  req.mutable_ref()->set_target_id(p.target);  // refused if the address now serves another
  req.set_offset(p.object_offset);
  req.set_length(p.length);
  proto::ods::set_piece_crcs(req, base + p.buf_offset, p.length);
  net::BulkRegion region{const_cast<std::byte*>(base + p.buf_offset), p.length,
                         net::BulkAccess::kServerPull};
  return net::call_async<OdsWrite>(ch, req, std::span<const net::BulkRegion>(&region, 1), timeout);
}

Status check_layout(uint64_t object_id, const StripeLayout& layout) {
  if (layout.stripe_size == 0 || layout.stripe_count == 0 ||
      layout.targets.size() < layout.stripe_count) {
    return Status::Corruption("file " + std::to_string(object_id) + " has a bad layout (stripe " +
                              std::to_string(layout.stripe_size) + " x " +
                              std::to_string(layout.stripe_count) + ", " +
                              std::to_string(layout.targets.size()) + " targets)");
  }
  return Status::OK();
}

bool is_connection_failure(Code c) {
  return c == Code::kDisconnected || c == Code::kUnavailable || c == Code::kConnectionRefused ||
         c == Code::kTimedOut || c == Code::kCancelled || c == Code::kAuthFailed;
}

}  // namespace

bool is_refusal(Code c) { return c == Code::kWrongTarget || c == Code::kStaleChain; }

Result<std::shared_ptr<net::RpcChannel>> StripeIo::channel_for(uint32_t target_id,
                                                               std::string* addr) {
  SURGE_ASSIGN_OR_RETURN(*addr, map_->address_of(target_id));
  auto ch = channels_->get(*addr);
  if (!ch.ok()) {
    // Maybe it moved: look again once with a fresh map.
    map_->mark_stale();
    auto again = map_->address_of(target_id);
    if (again.ok() && *again != *addr) {
      *addr = *again;
      ch = channels_->get(*addr);
    }
  }
  if (!ch.ok()) return target_error(target_id, *addr, ch.status(), "connecting to");
  return ch;
}

Status StripeIo::target_error(uint32_t target_id, const std::string& addr, const Status& st,
                              const char* what) {
  if (is_refusal(st.code())) map_->mark_stale();  // the map we used is old: fetch it again
  if (is_connection_failure(st.code())) {
    map_->mark_stale();
    channels_->drop(addr);
    return Status::IOError(std::string(what) + " data server target " +
                           std::to_string(target_id) + " at " + addr + ": " + st.ToString());
  }
  return st.WithContext(std::string(what) + " data server target " + std::to_string(target_id) +
                        " at " + addr);
}

Status StripeIo::write(uint64_t object_id, const StripeLayout& layout, const void* buf,
                       size_t len, uint64_t offset) {
  if (len == 0) return Status::OK();
  SURGE_RETURN_IF_ERROR(check_layout(object_id, layout));
  const auto* base = static_cast<const std::byte*>(buf);

  struct Outstanding {
    net::PendingCall call;
    const Piece* piece;
    std::string addr;
  };
  std::vector<Piece> pieces = plan(layout, offset, len);
  std::deque<Outstanding> inflight;
  uint64_t inflight_bytes = 0;
  Status first_error;

  auto finish_one = [&]() {
    Outstanding o = std::move(inflight.front());
    inflight.pop_front();
    inflight_bytes -= o.piece->length;
    proto::ods::WriteReply reply;
    Status st = net::finish_call<OdsWrite>(o.call, &reply);
    if (!st.ok() && first_error.ok()) {
      first_error = target_error(o.piece->target, o.addr, st, "writing to")
                        .WithContext("object " + std::to_string(object_id) + " offset " +
                                     std::to_string(o.piece->object_offset));
    }
  };

  for (const Piece& p : pieces) {
    if (!first_error.ok()) break;
    while (!inflight.empty() && inflight_bytes + p.length > options_.max_inflight_bytes) {
      finish_one();
    }
    if (!first_error.ok()) break;
    std::string addr;
    auto ch = channel_for(p.target, &addr);
    if (!ch.ok()) {
      first_error = ch.status();
      break;
    }
    net::PendingCall call = send_write(**ch, object_id, p, base, options_.io_timeout);
    inflight.push_back(Outstanding{std::move(call), &p, std::move(addr)});
    inflight_bytes += p.length;
  }
  while (!inflight.empty()) finish_one();
  return first_error;
}

std::unique_ptr<WriteBatch> StripeIo::start_write(uint64_t object_id, const StripeLayout& layout,
                                                  const void* buf, size_t len, uint64_t offset) {
  auto b = std::make_unique<WriteBatch>();
  b->io_ = this;
  b->object_id_ = object_id;
  b->status_ = check_layout(object_id, layout);
  if (!b->status_.ok() || len == 0) return b;
  const auto* base = static_cast<const std::byte*>(buf);
  for (const Piece& p : plan(layout, offset, len)) {
    std::string addr;
    auto ch = channel_for(p.target, &addr);
    if (!ch.ok()) {
      b->status_ = ch.status();
      break;  // what was issued is still waited for
    }
    b->calls_.push_back(WriteBatch::Call{send_write(**ch, object_id, p, base, options_.io_timeout),
                                         p.target, p.object_offset, std::move(addr)});
  }
  return b;
}

Status WriteBatch::wait() {
  if (done_) return status_;
  done_ = true;
  finish_calls();
  if (is_refusal(status_.code()) && on_refused_) status_ = on_refused_(status_);
  return status_;
}

void WriteBatch::finish_calls() {
  for (auto& c : calls_) {
    proto::ods::WriteReply reply;
    Status st = net::finish_call<OdsWrite>(c.call, &reply);
    if (!st.ok() && status_.ok()) {
      status_ = io_->target_error(c.target, c.addr, st, "writing to")
                    .WithContext("object " + std::to_string(object_id_) + " offset " +
                                 std::to_string(c.object_offset));
    }
  }
  calls_.clear();
}

void ReadBatch::finish_front() {
  Call c = std::move(calls_.front());
  calls_.pop_front();
  inflight_bytes_ -= c.length;
  proto::ods::ReadReply reply;
  Status st = net::finish_call<OdsRead>(c.call, &reply);
  if (!status_.ok()) return;  // the first error is what the caller sees
  if (st.code() == Code::kNotFound) {
    // No object yet on this target: the whole piece is a hole.
    std::memset(c.dst, 0, c.length);
    return;
  }
  if (!st.ok()) {
    status_ = io_->target_error(c.target, c.addr, st, "reading from")
                  .WithContext("object " + std::to_string(object_id_) + " offset " +
                               std::to_string(c.object_offset));
    return;
  }
  if (reply.length() > c.length) {
    status_ = Status::ProtocolError("data server target " + std::to_string(c.target) + " at " +
                                    c.addr + " returned " + std::to_string(reply.length()) +
                                    " bytes for a " + std::to_string(c.length) +
                                    "-byte read of object " + std::to_string(object_id_));
    return;
  }
  if (crc32c(c.dst, reply.length()) != reply.crc32c()) {
    status_ = Status::Corruption("checksum mismatch reading object " +
                                 std::to_string(object_id_) + " offset " +
                                 std::to_string(c.object_offset) + " from target " +
                                 std::to_string(c.target) + " at " + c.addr);
    return;
  }
  // Short: past the end of this object, inside the file: zeros.
  if (reply.length() < c.length) {
    std::memset(c.dst + reply.length(), 0, c.length - reply.length());
  }
}

Status ReadBatch::wait() {
  if (done_) return status_;
  done_ = true;
  while (!calls_.empty()) finish_front();
  if (is_refusal(status_.code()) && on_refused_) status_ = on_refused_(status_);
  return status_;
}

void StripeIo::issue_read(ReadBatch& b, uint64_t object_id, std::byte* dst, uint32_t target,
                          uint64_t object_offset, size_t length) {
  std::string addr;
  auto ch = channel_for(target, &addr);
  if (!ch.ok()) {
    if (b.status_.ok()) b.status_ = ch.status();
    return;
  }
  proto::ods::ReadRequest req;
  req.set_object_id(object_id);
  req.mutable_ref()->set_target_id(target);  // refused if the address now serves another
  req.set_offset(object_offset);
  req.set_length(length);
  net::BulkRegion region{dst, length, net::BulkAccess::kServerPush};
  net::PendingCall call = net::call_async<OdsRead>(
      **ch, req, std::span<const net::BulkRegion>(&region, 1), options_.io_timeout);
  b.calls_.push_back(
      ReadBatch::Call{std::move(call), target, object_offset, dst, length, std::move(addr)});
  b.inflight_bytes_ += length;
}

std::unique_ptr<ReadBatch> StripeIo::start_read(uint64_t object_id, const StripeLayout& layout,
                                                void* buf, size_t len, uint64_t offset) {
  auto b = std::make_unique<ReadBatch>();
  b->io_ = this;
  b->object_id_ = object_id;
  b->status_ = check_layout(object_id, layout);
  if (!b->status_.ok() || len == 0) return b;
  auto* base = static_cast<std::byte*>(buf);
  for (const Piece& p : plan(layout, offset, len)) {
    issue_read(*b, object_id, base + p.buf_offset, p.target, p.object_offset, p.length);
    if (!b->status_.ok()) break;  // what was issued is still waited for
  }
  return b;
}

Status StripeIo::read(uint64_t object_id, const StripeLayout& layout, void* buf, size_t len,
                      uint64_t offset) {
  if (len == 0) return Status::OK();
  SURGE_RETURN_IF_ERROR(check_layout(object_id, layout));
  auto* base = static_cast<std::byte*>(buf);
  ReadBatch b;
  b.io_ = this;
  b.object_id_ = object_id;
  for (const Piece& p : plan(layout, offset, len)) {
    while (!b.calls_.empty() && b.inflight_bytes_ + p.length > options_.max_inflight_bytes) {
      b.finish_front();
    }
    if (!b.status_.ok()) break;
    issue_read(b, object_id, base + p.buf_offset, p.target, p.object_offset, p.length);
    if (!b.status_.ok()) break;
  }
  return b.wait();
}

Status StripeIo::sync(uint64_t object_id, const StripeLayout& layout) {
  SURGE_RETURN_IF_ERROR(check_layout(object_id, layout));
  struct Outstanding {
    net::PendingCall call;
    uint32_t target;
    std::string addr;
  };
  std::vector<Outstanding> calls;
  Status first_error;
  for (uint32_t i = 0; i < layout.stripe_count; ++i) {
    uint32_t t = layout.targets[i];
    std::string addr;
    auto ch = channel_for(t, &addr);
    if (!ch.ok()) {
      if (first_error.ok()) first_error = ch.status();
      continue;
    }
    proto::ods::SyncRequest req;
    req.add_object_ids(object_id);
    calls.push_back(
        Outstanding{net::call_async<OdsSync>(**ch, req, {}, options_.io_timeout), t, addr});
  }
  for (auto& o : calls) {
    Status st = net::finish_call<OdsSync>(o.call, nullptr);
    if (!st.ok() && first_error.ok()) {
      first_error = target_error(o.target, o.addr, st, "syncing on")
                        .WithContext("object " + std::to_string(object_id));
    }
  }
  return first_error;
}

}  // namespace surge::client
