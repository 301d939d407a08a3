// ObjectFile: the open descriptors of one object (its data file and its CRC
// sidecar) and the lock that keeps data and CRCs in step.
//
// Invariant: while `mu` is held exclusively nobody else reads or writes the
// object, so a block's data and its sidecar CRC change together as seen by
// readers of this process (writes, truncates: exclusive; reads: shared).
// Descriptors close when the last holder lets go, so an entry evicted from
// the cache (or removed) stays valid for operations already running on it.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <shared_mutex>
#include <string>

namespace surge::ods {

struct ObjectFile {
  ObjectFile(uint64_t id_, std::string data_path_) : id(id_), data_path(std::move(data_path_)) {}
  ~ObjectFile() {
    if (data_fd >= 0) ::close(data_fd);
    if (direct_fd >= 0) ::close(direct_fd);
    if (crc_fd >= 0) ::close(crc_fd);
  }
  ObjectFile(const ObjectFile&) = delete;
  ObjectFile& operator=(const ObjectFile&) = delete;

  const uint64_t id;
  const std::string data_path;  // for messages
  int data_fd = -1;    // buffered
  int direct_fd = -1;  // O_DIRECT, only when the store uses it
  int crc_fd = -1;     // sidecar: 4 bytes per block, see block_checksum.h
  uint64_t size = 0;   // data file size; guarded by mu
  // The truncate generation applied (object_generation.cpp), read from
  // its file on first use; guarded by mu (loading it: exclusively).
  bool generation_loaded = false;
  uint64_t generation_seq = 0;
  uint64_t generation_size = 0;
  std::shared_mutex mu;
};

}  // namespace surge::ods
