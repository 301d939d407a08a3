// notify_systemd: the datagram systemd's Type=notify waits for arrives, on a
// path socket and on an abstract one, and nothing is sent without
// $NOTIFY_SOCKET.
#include "common/systemd_notify.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

namespace surge {
namespace {

// A datagram socket bound where $NOTIFY_SOCKET will say ("@..." abstract).
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& name) : name_(name) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, name.data(), name.size());
    if (name[0] == '@') addr.sun_path[0] = '\0';
    if (name[0] == '/') ::unlink(name.c_str());
    bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&addr),
                    static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size())) == 0;
    ::setenv("NOTIFY_SOCKET", name.c_str(), 1);
  }
  ~NotifySocket() {
    ::unsetenv("NOTIFY_SOCKET");
    ::close(fd_);
    if (name_[0] == '/') ::unlink(name_.c_str());
  }
  bool bound() const { return bound_; }
  std::string receive() {
    char buf[256];
    ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    return n < 0 ? std::string("<nothing: ") + std::strerror(errno) + ">" : std::string(buf, n);
  }

 private:
  std::string name_;
  int fd_ = -1;
  bool bound_ = false;
};

TEST(SystemdNotify, PathSocketGetsTheState) {
  NotifySocket s("/tmp/surge-notify-test-" + std::to_string(::getpid()));
  ASSERT_TRUE(s.bound());
  ASSERT_TRUE(notify_systemd("READY=1").ok());
  EXPECT_EQ(s.receive(), "READY=1");
}

TEST(SystemdNotify, AbstractSocketGetsTheState) {
  NotifySocket s("@surge-notify-test-" + std::to_string(::getpid()));
  ASSERT_TRUE(s.bound());
  ASSERT_TRUE(notify_systemd("STOPPING=1").ok());
  EXPECT_EQ(s.receive(), "STOPPING=1");
}

TEST(SystemdNotify, WithoutNotifySocketIsANoOp) {
  ::unsetenv("NOTIFY_SOCKET");
  EXPECT_TRUE(notify_systemd("READY=1").ok());
}

TEST(SystemdNotify, NoListenerIsAnErrorNamingTheSocket) {
  const std::string path = "/tmp/surge-notify-absent-" + std::to_string(::getpid());
  ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
  Status st = notify_systemd("READY=1");
  ::unsetenv("NOTIFY_SOCKET");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace surge
