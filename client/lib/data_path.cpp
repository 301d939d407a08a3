#include "client/lib/data_path.h"

namespace surge::client {

Status DataPath::write(Ino ino, const StripeLayout& layout, const void* buf, size_t len,
                       uint64_t offset) {
  return io_.write(ino, layout, buf, len, offset);
}

std::unique_ptr<WriteBatch> DataPath::start_write(Ino ino, const StripeLayout& layout,
                                                  const void* buf, size_t len, uint64_t offset) {
  return io_.start_write(ino, layout, buf, len, offset);
}

Status DataPath::read(Ino ino, const StripeLayout& layout, void* buf, size_t len, uint64_t offset) {
  return io_.read(ino, layout, buf, len, offset);
}

std::unique_ptr<ReadBatch> DataPath::start_read(Ino ino, const StripeLayout& layout, void* buf,
                                                size_t len, uint64_t offset) {
  return io_.start_read(ino, layout, buf, len, offset);
}

Status DataPath::sync(Ino ino, const StripeLayout& layout) {
  return io_.sync(ino, layout);
}

}  // namespace surge::client
