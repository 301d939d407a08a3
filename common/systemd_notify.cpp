#include "common/systemd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

namespace surge {

Status notify_systemd(std::string_view state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || path[0] == '\0') return Status::OK();
  const size_t len = std::strlen(path);
  // "/run/systemd/notify" or "@name" (abstract: a leading NUL byte instead).
  if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sockaddr_un::sun_path))
    return Status::InvalidArgument(std::string("NOTIFY_SOCKET '") + path + "' is not a unix socket path");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path, len);
  if (path[0] == '@') addr.sun_path[0] = '\0';
  const socklen_t addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);

  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno(errno, "socket for NOTIFY_SOCKET");
  const ssize_t n = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                             reinterpret_cast<const sockaddr*>(&addr), addr_len);
  const int err = errno;
  ::close(fd);
  if (n < 0) return Status::FromErrno(err, std::string("notify systemd at ") + path);
  if (static_cast<size_t>(n) != state.size())
    return Status::IOError(std::string("notify systemd at ") + path + ": short datagram");
  return Status::OK();
}

}  // namespace surge
