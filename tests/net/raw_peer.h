// RawPeer: a raw TCP connection from a chosen loopback source address
// (127.0.0.2, .3, ... are all loopback), for tests that play a peer which
// never proves the cluster key: it can hold a server's handshake slot, send
// a lone frame header, and see what the server sent before closing it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <utility>

#include "common/status.h"
#include "net/frame.h"

namespace surge::net::testing {

class RawPeer {
 public:
  RawPeer(const std::string& from, uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in src{};
    src.sin_family = AF_INET;
    ::inet_pton(AF_INET, from.c_str(), &src.sin_addr);
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(port);
    dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&src), sizeof src) == 0 &&
          ::connect(fd_, reinterpret_cast<sockaddr*>(&dst), sizeof dst) == 0;
  }
  ~RawPeer() { ::close(fd_); }
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;
  bool ok() const { return ok_; }

  // A frame header alone, declaring `body` bytes that never follow.
  bool send_header(FrameType type, uint32_t body) {
    FrameHeader h;
    h.type = type;
    h.body_length = body;
    std::byte b[kFrameHeaderSize];
    encode_header(h, b);
    return ::send(fd_, b, sizeof b, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof b);
  }

  // The server closed us (EOF or reset) within `ms`; any frame it sent
  // first (a GoAway) is kept in received().
  bool closed_within(int ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return true;
      received_.append(buf, static_cast<size_t>(n));
    }
  }
  // Nothing received and not closed, right now.
  bool still_open() const {
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    return ::poll(&p, 1, 0) == 0;
  }
  // The GoAway the server sent before closing, if any.
  Result<std::pair<FrameHeader, std::string>> goaway() const {
    if (received_.size() < kFrameHeaderSize) return Status::NotFound("no frame received");
    SURGE_ASSIGN_OR_RETURN(FrameHeader h, decode_header({reinterpret_cast<const std::byte*>(
                                                              received_.data()),
                                                          kFrameHeaderSize}));
    return std::make_pair(h, received_.substr(kFrameHeaderSize, h.body_length));
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
  std::string received_;
};

}  // namespace surge::net::testing
