// MetricsEndpoint: GET /metrics over plain sockets (see the header).
#include "common/metrics_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "common/log.h"

namespace surge {

Status MetricsEndpoint::start(const std::string& listen) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos)
    return Status::InvalidArgument("metrics listen '" + listen + "': want HOST:PORT");
  std::string host = listen.substr(0, colon);
  int port = std::atoi(listen.c_str() + colon + 1);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (port < 0 || port > 65535 || ::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    return Status::InvalidArgument("metrics listen '" + listen + "': want IPv4 HOST:PORT");
  }
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return Status::FromErrno(errno, "metrics socket");
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_fd_, 8) != 0) {
    Status st = Status::FromErrno(errno, "metrics listen on " + listen);
    ::close(listen_fd_);
    listen_fd_ = -1;
    return st;
  }
  socklen_t al = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &al);
  url_ = "http://" + host + ":" + std::to_string(ntohs(a.sin_port)) + "/metrics";
  thread_ = std::thread([this] { run(); });
  return Status::OK();
}

void MetricsEndpoint::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

void MetricsEndpoint::run() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;  // wakes up to notice stop()
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    serve(fd);
    ::close(fd);
  }
}

void MetricsEndpoint::serve(int fd) {
  std::string req;
  char buf[1024];
  while (req.find("\r\n\r\n") == std::string::npos && req.size() < 8192) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return;
    req.append(buf, static_cast<size_t>(n));
  }
  std::string status = "404 Not Found", body = "not found\n";
  if (req.rfind("GET /metrics ", 0) == 0 || req.rfind("GET /metrics?", 0) == 0) {
    status = "200 OK";
    body = render_();
  }
  std::string resp =
      "HTTP/1.1 " + status +
      "\r\nContent-Type: text/plain; version=0.0.4\r\nConnection: close\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  for (size_t off = 0; off < resp.size();) {
    ssize_t n = ::send(fd, resp.data() + off, resp.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

}  // namespace surge
