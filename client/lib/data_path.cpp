#include "client/lib/data_path.h"

#include <thread>

#include "common/log.h"

namespace surge::client {

Status DataPath::retry_refused(const std::function<Status()>& attempt, Status first) {
  const auto deadline = std::chrono::steady_clock::now() + io_timeout_;
  Status st = std::move(first);
  auto pause = std::chrono::milliseconds(0);  // the map was marked stale: at once first
  while (is_refusal(st.code()) && std::chrono::steady_clock::now() + pause < deadline) {
    SLOG_DEBUG("client: {}; again under a fresh cluster map", st.ToString());
    std::this_thread::sleep_for(pause);
    st = attempt();
    pause = std::min(std::max(pause * 2, std::chrono::milliseconds(20)),
                     std::chrono::milliseconds(500));
  }
  return st;
}

Status DataPath::write(Ino ino, const StripeLayout& layout, const void* buf, size_t len,
                       uint64_t offset) {
  auto attempt = [&] { return io_.write(ino, layout, buf, len, offset); };
  return retry_refused(attempt, attempt());
}

std::unique_ptr<WriteBatch> DataPath::start_write(Ino ino, const StripeLayout& layout,
                                                  const void* buf, size_t len, uint64_t offset) {
  auto b = io_.start_write(ino, layout, buf, len, offset);
  // buf stays valid until the batch's wait() returns, which is when this runs.
  b->set_on_refused([this, ino, layout, buf, len, offset](const Status& refusal) {
    return retry_refused([&] { return io_.write(ino, layout, buf, len, offset); }, refusal);
  });
  return b;
}

Status DataPath::read(Ino ino, const StripeLayout& layout, void* buf, size_t len, uint64_t offset) {
  auto attempt = [&] { return io_.read(ino, layout, buf, len, offset); };
  return retry_refused(attempt, attempt());
}

std::unique_ptr<ReadBatch> DataPath::start_read(Ino ino, const StripeLayout& layout, void* buf,
                                                size_t len, uint64_t offset) {
  auto b = io_.start_read(ino, layout, buf, len, offset);
  b->set_on_refused([this, ino, layout, buf, len, offset](const Status& refusal) {
    return retry_refused([&] { return io_.read(ino, layout, buf, len, offset); }, refusal);
  });
  return b;
}

Status DataPath::fallocate(Ino ino, const StripeLayout& layout, uint64_t offset, uint64_t length,
                           proto::ods::FallocateMode mode, bool keep_size) {
  // Reserve, punch and zero are idempotent: redoing the whole range is safe.
  auto attempt = [&] { return io_.fallocate(ino, layout, offset, length, mode, keep_size); };
  return retry_refused(attempt, attempt());
}

Status DataPath::sync(Ino ino, const StripeLayout& layout) {
  return io_.sync(ino, layout);
}

}  // namespace surge::client
