// ReadAhead: an open file read sequentially keeps `read_ahead` bytes in
// flight past its last read, in 1 MiB windows of the client's registered
// pool. Windows belong to the open file (FileImpl), so readers of one file
// through several descriptors each keep their own stream. A jump drops
// them; so does a change of the inode's data generation (a write or
// truncate in this client), before they serve a read, so own writes stay
// exact. A window that failed is read again directly, and a lasting error
// is reported from there. When the pool is busy (write behind), it reads
// ahead less.
#pragma once

#include <cstddef>
#include <cstdint>

#include "client/lib/data_path.h"
#include "client/lib/open_file.h"
#include "common/status.h"
#include "net/buffer_pool.h"
#include "surge/client.h"

namespace surge::client {

class ReadAhead {
 public:
  ReadAhead(net::BufferPool* pool, DataPath* data) : pool_(pool), data_(data) {}

  // Hands sink the n bytes at offset (n already clamped to size, the file
  // size as this client sees it): what the windows hold as pieces of them,
  // the rest read into dst (or, when dst is null, into a buffer of ours).
  // Then, after a sequential read, keeps read_ahead bytes in flight past it.
  Status read(FileImpl& f, const FileLayout& layout, uint64_t size, size_t read_ahead, size_t n,
              uint64_t offset, std::byte* dst, const Client::ReadSink& sink);
  // Drops f's windows (at close: their pool buffers serve others then).
  void drop(FileImpl& f);

 private:
  net::BufferPool* pool_;
  DataPath* data_;
};

}  // namespace surge::client
