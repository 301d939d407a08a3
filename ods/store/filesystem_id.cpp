// filesystem_id_of: see filesystem_id.h.
#include "ods/store/filesystem_id.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace surge::ods {

Result<std::string> filesystem_id_of(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    return Status::IOError("stat " + dir + " (its file system id): " + std::strerror(errno));
  }
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) != 0) {
    return Status::IOError("statvfs " + dir + " (its file system id): " + std::strerror(errno));
  }
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) {
    return Status::IOError(std::string("gethostname (the file system id of ") + dir +
                           "): " + std::strerror(errno));
  }
  char buf[320];
  std::snprintf(buf, sizeof buf, "%s dev %u:%u fsid %016llx", host, ::major(st.st_dev),
                ::minor(st.st_dev), static_cast<unsigned long long>(vfs.f_fsid));
  return std::string(buf);
}

}  // namespace surge::ods
