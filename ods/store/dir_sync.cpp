// See dir_sync.h.
#include "ods/store/dir_sync.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace surge::ods {

Status fsync_dir(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "open directory " + path);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return Status::FromErrno(err, "fsync directory " + path);
  return Status::OK();
}

}  // namespace surge::ods
