// Loopback helpers shared by the daemon tests: a free TCP port on
// 127.0.0.1 for a daemon to listen on (free_port, below) and a plain
// HTTP GET (a Prometheus scrape of a /metrics endpoint). Header-only: every
// test part links it without a library.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

namespace surge::test {

// True when nothing on this machine holds `port` on 127.0.0.1 (no listener,
// no socket in TIME_WAIT): the check binds without SO_REUSEADDR.
inline bool port_is_free(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// A port for a daemon to listen on. Not the kernel's bind-to-0 choice: that
// comes from the ephemeral range, where an outgoing connection can take it
// before the daemon binds, and two picks in one test could repeat (a
// cluster then ran one data server fewer than it started: the second on a
// port the first held exited, and the wait for its port saw the first).
// Ports come from below the ephemeral range (32768 on Linux), each process
// walking its own sequence from a random start: one process never gets a
// port twice, and tests running side by side seldom meet.
inline uint16_t free_port() {
  constexpr uint32_t kLow = 20000, kSpan = 12000;
  static std::atomic<uint32_t> next{std::random_device{}() % kSpan};
  for (uint32_t tries = 0; tries < kSpan; ++tries) {
    const auto port = static_cast<uint16_t>(kLow + next.fetch_add(1) % kSpan);
    if (port_is_free(port)) return port;
  }
  std::fprintf(stderr, "free_port: no free port in %u-%u on 127.0.0.1\n", kLow, kLow + kSpan);
  std::abort();
}

// The whole response (status line, headers, body); "" when nothing listens.
inline std::string http_get(uint16_t port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return "";
  }
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n", out;
  (void)!::write(fd, req.data(), req.size());
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

}  // namespace surge::test
