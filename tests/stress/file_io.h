// FileIo: the few file operations a stress worker does, through libsurge
// (a Client of its own) or through a FUSE mount (POSIX calls on the
// mount's paths), so one worker loop drives both. Paths are file-system
// paths ("/r2/w0-f3"); every error names the call and the path.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "surge/client.h"

namespace surge::stress {

class FileIo {
 public:
  virtual ~FileIo() = default;
  // Opens path for writing (create: O_CREAT | O_EXCL); one file at a time.
  virtual Status open(const std::string& path, bool create) = 0;
  virtual Status pwrite(const char* data, size_t len, uint64_t offset) = 0;
  virtual Status fsync() = 0;
  // Closes the open file (an error still closes it).
  virtual Status close() = 0;
  virtual Status truncate(const std::string& path, uint64_t size) = 0;
  virtual Status unlink(const std::string& path) = 0;
  // Every byte of path, read through a fresh open.
  virtual Result<std::string> read_all(const std::string& path) = 0;
  virtual Result<std::vector<std::string>> list(const std::string& dir) = 0;
  virtual Status mkdir(const std::string& dir) = 0;
  virtual std::string name() const = 0;
};

// Through a libsurge client (owned).
std::unique_ptr<FileIo> libsurge_io(std::unique_ptr<Client> client);
// Through the mount at mountpoint.
std::unique_ptr<FileIo> posix_io(const std::string& mountpoint);

}  // namespace surge::stress
