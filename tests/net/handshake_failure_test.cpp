// What a client is told when the server it connects to is gone or drops it
// during the handshake (a data server that died or restarted): the code and
// a message naming what happened and the server's address, never a
// cluster-key failure. TCP only: the servers here are raw listening sockets.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <thread>

#include "net/frame.h"
#include "net/rpc_channel.h"
#include "tests/net/net_test_util.h"

namespace surge::net::testing {
namespace {

// A listening socket on loopback that accepts one connection and then does
// what the test says with it.
class RawListener {
 public:
  RawListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 4) != 0) {
      throw std::runtime_error("raw listener: bind/listen failed");
    }
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~RawListener() {
    if (server_.joinable()) server_.join();
    ::close(fd_);
  }
  std::string address() const { return "tcp://127.0.0.1:" + std::to_string(port_); }

  // Accepts one connection, reads the client's hello, then closes: with a
  // reset (SO_LINGER 0, as a killed process's half-open socket answers) or
  // an orderly close.
  void serve_once(bool reset) {
    server_ = std::thread([this, reset] {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      std::byte hello[kFrameHeaderSize + 32];
      size_t got = 0;
      while (got < sizeof hello) {
        ssize_t n = ::recv(c, hello + got, sizeof hello - got, 0);
        if (n <= 0) break;
        got += static_cast<size_t>(n);
      }
      if (reset) {
        linger l{1, 0};
        ::setsockopt(c, SOL_SOCKET, SO_LINGER, &l, sizeof l);
      }
      ::close(c);
    });
  }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread server_;
};

Status connect_status(const std::string& address) {
  ChannelOptions o;
  o.cluster_key = kTestKey;
  o.connect_timeout = std::chrono::milliseconds(10000);
  auto ch = RpcChannel::Connect(address, o);
  return ch.ok() ? Status::OK() : ch.status();
}

TEST(HandshakeFailure, ResetByTheServerIsUnavailableNamingTheServer) {
  RawListener server;
  server.serve_once(/*reset=*/true);
  Status st = connect_status(server.address());
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("connection reset by the server at " + server.address()),
            std::string::npos)
      << st.ToString();
}

TEST(HandshakeFailure, ClosedByTheServerIsUnavailableNamingTheServer) {
  RawListener server;
  server.serve_once(/*reset=*/false);
  Status st = connect_status(server.address());
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("the server at " + server.address() + " closed the connection"),
            std::string::npos)
      << st.ToString();
}

TEST(HandshakeFailure, NobodyListeningIsConnectionRefusedNamingTheAddress) {
  std::string address;
  {
    RawListener gone;  // a port that was just free, and is again
    address = gone.address();
  }
  Status st = connect_status(address);
  EXPECT_EQ(st.code(), Code::kConnectionRefused) << st.ToString();
  EXPECT_NE(st.message().find("connection refused by " + address), std::string::npos)
      << st.ToString();
}

}  // namespace
}  // namespace surge::net::testing
