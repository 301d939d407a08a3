#include "client/lib/data_path.h"

#include <algorithm>
#include <set>
#include <thread>

#include "common/log.h"

namespace surge::client {

namespace {

void avoid(IoPiece& p, uint32_t target) {
  if (std::find(p.hint.avoid.begin(), p.hint.avoid.end(), target) == p.hint.avoid.end()) {
    p.hint.avoid.push_back(target);
  }
}

}  // namespace

bool DataPath::report(const IoRequest& r, const PieceFailure& f) {
  if (!report_) return false;
  proto::mds::ReportTargetFailureRequest req;
  req.set_target_id(f.target_id);
  req.set_chain_id(f.piece.chunk.chain_id);
  req.set_chain_version(f.chain_version);
  req.set_code(static_cast<uint32_t>(f.status.code()));
  req.set_message(StripeIo::describe(r, f).ToString());
  req.set_reporter(reporter_);
  auto reply = report_(req);
  if (!reply.ok()) {
    SLOG_WARN("client: reporting data server target {} failed: {}", f.target_id,
              reply.status().ToString());
    return false;
  }
  map_->note_version(reply->map_version());
  return reply->state() == proto::mds::TARGET_UP || reply->state() == proto::mds::TARGET_DRAINING;
}

Status DataPath::recover(const IoRequest& r, std::vector<PieceFailure> failed,
                         Clock::time_point deadline) {
  auto pause = std::chrono::milliseconds(0);  // the first retry goes at once
  const auto began = Clock::now();
  const size_t pieces = failed.size();
  Status first;
  int rounds = 0;
  while (!failed.empty()) {
    std::vector<IoPiece> again;
    std::set<uint32_t> reported;  // one report per target per round
    bool refetch = false, wait = false;
    Status last;
    for (PieceFailure& f : failed) {
      const Status err = StripeIo::describe(r, f);
      const Code c = f.status.code();
      const bool chained = f.piece.chunk.chain_id != 0;
      if (f.no_route) return err;  // no member left to try (or no map to tell)
      if (is_refusal(c)) {
        refetch = true;
      } else if (c == Code::kChunkDirty && r.op == IoOp::kRead) {
        f.piece.hint.last_serving = true;
      } else if ((c == Code::kNotServing || c == Code::kCorruption) && chained &&
                 r.op == IoOp::kRead) {
        avoid(f.piece, f.target_id);
        refetch = true;
      } else if (f.unreachable) {
        if (reported.insert(f.target_id).second && report(r, f)) wait = true;
        if (!chained) return err;  // format 1: nobody else holds these bytes
        if (r.op == IoOp::kRead) avoid(f.piece, f.target_id);
        refetch = true;
      } else if (c == Code::kUnavailable) {
        refetch = wait = true;
      } else {
        return err;  // not something another attempt mends
      }
      f.piece.previous = err;
      last = err;
      again.push_back(std::move(f.piece));
    }
    if (first.ok()) first = last;
    SLOG_INFO("client: {} piece(s) failed ({}); trying again", again.size(), last.ToString());
    if (refetch) map_->mark_stale();
    if (wait) pause = std::max(pause, std::chrono::milliseconds(50));
    if (Clock::now() + pause >= deadline) {
      const std::string why = last.code() == Code::kIOError ? last.message() : last.ToString();
      return Status::IOError(why + "; no attempt succeeded within the io timeout (" +
                             std::to_string(io_timeout_.count()) + " ms)");
    }
    std::this_thread::sleep_for(pause);
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    failed = io_.run(r, std::move(again),
                     std::clamp(left, std::chrono::milliseconds(1), io_.options().attempt_timeout));
    ++rounds;
    pause = std::min(std::max(pause * 2, std::chrono::milliseconds(20)),
                     std::chrono::milliseconds(500));
  }
  if (rounds > 0) {
    // A failover done: worth a line at the level tools log at.
    SLOG_WARN(
        "client: {} piece(s) of inode {} served again after {} ms, {} retry round(s); "
        "first failure: {}",
        pieces, r.ino,
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - began).count(), rounds,
        first.ToString());
  }
  return Status::OK();
}

Status DataPath::run(const IoRequest& r, uint64_t offset, uint64_t len) {
  SURGE_RETURN_IF_ERROR(StripeIo::check(r));
  const auto deadline = Clock::now() + io_timeout_;
  return recover(r, io_.run(r, StripeIo::plan(r, offset, len)), deadline);
}

Status DataPath::write(uint64_t ino, const FileLayout& layout, const void* buf, size_t len,
                       uint64_t offset) {
  if (len == 0) return Status::OK();
  IoRequest r = make_request(IoOp::kWrite, ino, layout, buf);
  return run(r, offset, len);
}

std::unique_ptr<WriteBatch> DataPath::start_write(uint64_t ino, const FileLayout& layout,
                                                  const void* buf, size_t len, uint64_t offset) {
  IoRequest r = make_request(IoOp::kWrite, ino, layout, buf);
  auto b = io_.start(r, offset, len);
  // buf stays valid until the batch's wait() returns, which is when this
  // runs. The io timeout counts from there: the batch may have waited in
  // the write-behind queue before anyone looked at it.
  b->set_on_failed([this, r](std::vector<PieceFailure> failed) {
    return recover(r, std::move(failed), Clock::now() + io_timeout_);
  });
  return b;
}

Status DataPath::read(uint64_t ino, const FileLayout& layout, void* buf, size_t len,
                      uint64_t offset) {
  if (len == 0) return Status::OK();
  IoRequest r = make_request(IoOp::kRead, ino, layout, buf);
  return run(r, offset, len);
}

std::unique_ptr<ReadBatch> DataPath::start_read(uint64_t ino, const FileLayout& layout, void* buf,
                                                size_t len, uint64_t offset) {
  IoRequest r = make_request(IoOp::kRead, ino, layout, buf);
  auto b = io_.start(r, offset, len);
  b->set_on_failed([this, r](std::vector<PieceFailure> failed) {
    return recover(r, std::move(failed), Clock::now() + io_timeout_);
  });
  return b;
}

Status DataPath::fallocate(uint64_t ino, const FileLayout& layout, uint64_t offset, uint64_t length,
                           proto::ods::FallocateMode mode, bool keep_size) {
  // Reserve, punch and zero are idempotent: redoing a chunk's range is safe.
  IoRequest r = make_request(IoOp::kFallocate, ino, layout, nullptr);
  r.mode = mode;
  r.keep_size = keep_size;
  return run(r, offset, length);
}

Status DataPath::sync(uint64_t ino, const FileLayout& layout) {
  IoRequest r = make_request(IoOp::kSync, ino, layout, nullptr);
  return run(r, 0, 0);
}

}  // namespace surge::client
