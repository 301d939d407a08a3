// RawOdsConn: just enough of a TCP client of surge-ods to authenticate,
// send a write request and hold back (part of) its payload: the peer that
// stalls, for the tests of what a data server does about one.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <span>
#include <string>
#include <utility>

#include "common/crc32c.h"
#include "common/status.h"
#include "net/auth.h"
#include "net/frame.h"
#include "net/proto/ods_methods.h"

namespace surge::ods::testing {

namespace pb = surge::proto::ods;

class RawOdsConn {
 public:
  RawOdsConn(const std::string& host, uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    int one = 1;  // no Nagle delay: each send leaves at once
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in local{};
    socklen_t len = sizeof local;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&local), &len);
    peer_ = "tcp://" + host + ":" + std::to_string(ntohs(local.sin_port));
  }
  ~RawOdsConn() {
    if (fd_ >= 0) ::close(fd_);
  }

  // How the server names us in its log.
  const std::string& peer() const { return peer_; }

  Status handshake(const std::string& key) {
    if (!connected_) return Status::Unavailable("raw connect failed");
    net::Nonce nc = net::make_nonce();
    net::FrameHeader h;
    h.type = net::FrameType::kHello;
    h.body_length = net::kNonceSize;
    SURGE_RETURN_IF_ERROR(send_frame(h, nc.data(), nc.size()));
    SURGE_ASSIGN_OR_RETURN(auto challenge, read_frame());
    if (challenge.first.type != net::FrameType::kChallenge ||
        challenge.second.size() != net::kChallengeBodySize) {
      return Status::ProtocolError("raw client: no challenge");
    }
    net::Nonce ns;
    std::memcpy(ns.data(), challenge.second.data(), net::kNonceSize);
    net::Proof p = net::client_proof(key, ns, nc);
    h.type = net::FrameType::kProof;
    h.body_length = net::kProofSize;
    SURGE_RETURN_IF_ERROR(send_frame(h, p.data(), p.size()));
    SURGE_ASSIGN_OR_RETURN(auto welcome, read_frame());
    if (welcome.first.type != net::FrameType::kWelcome)
      return Status::ProtocolError("raw client: no welcome");
    return Status::OK();
  }

  // A write request for `data` with only its first `sent` payload bytes.
  Status send_write(uint64_t request_id, uint64_t object, std::span<const std::byte> data,
                    size_t sent) {
    pb::WriteRequest q;
    q.set_object_id(object);
    q.set_offset(0);
    q.set_length(data.size());
    q.set_crc32c(surge::crc32c(data.data(), data.size()));
    return send_write(request_id, q, data, sent);
  }

  // The request q (its length is data's) with only `sent` payload bytes.
  Status send_write(uint64_t request_id, const pb::WriteRequest& q,
                    std::span<const std::byte> data, size_t sent) {
    std::string body = q.SerializeAsString();
    net::BulkDescriptor d;
    d.length = data.size();
    d.access = net::BulkAccess::kServerPull;
    std::byte desc[net::kBulkDescriptorSize];
    net::encode_descriptor(d, desc);
    net::FrameHeader h;
    h.type = net::FrameType::kRequest;
    h.service = pb::OdsWrite::kService;
    h.method = pb::OdsWrite::kMethod;
    h.request_id = request_id;
    h.body_length = static_cast<uint32_t>(body.size());
    h.descriptor_count = 1;
    h.payload_length = data.size();
    // One send, so the server sees the whole request at once.
    std::string frame(net::kFrameHeaderSize, '\0');
    net::encode_header(h, reinterpret_cast<std::byte*>(frame.data()));
    frame += body;
    frame.append(reinterpret_cast<const char*>(desc), sizeof desc);
    frame.append(reinterpret_cast<const char*>(data.data()), sent);
    return send_bytes(frame.data(), frame.size());
  }

  Status send_bytes(const void* p, size_t n) {
    const auto* b = static_cast<const char*>(p);
    while (n > 0) {
      ssize_t k = ::send(fd_, b, n, MSG_NOSIGNAL);
      if (k <= 0) return Status::Disconnected("raw client: send failed");
      b += k;
      n -= static_cast<size_t>(k);
    }
    return Status::OK();
  }

  // The next frame (header and body), within 10 s.
  Result<std::pair<net::FrameHeader, std::string>> read_frame() {
    std::byte hdr[net::kFrameHeaderSize];
    SURGE_RETURN_IF_ERROR(read_exact(hdr, sizeof hdr));
    SURGE_ASSIGN_OR_RETURN(net::FrameHeader h, net::decode_header(hdr));
    std::string body(h.body_length, '\0');
    SURGE_RETURN_IF_ERROR(read_exact(reinterpret_cast<std::byte*>(body.data()), body.size()));
    return std::make_pair(h, std::move(body));
  }

  // OK once the server has closed the connection (whatever it sent
  // first is discarded); TimedOut when it is still open after `wait`.
  Status wait_closed(std::chrono::milliseconds wait) {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      if (::recv(fd_, buf, sizeof buf, 0) <= 0) return Status::OK();
    }
    return Status::TimedOut("raw client " + peer_ + ": still open after " +
                            std::to_string(wait.count()) + " ms");
  }

 private:
  Status send_frame(const net::FrameHeader& h, const void* body, size_t len) {
    std::byte hdr[net::kFrameHeaderSize];
    net::encode_header(h, hdr);
    SURGE_RETURN_IF_ERROR(send_bytes(hdr, sizeof hdr));
    return send_bytes(body, len);
  }

  Status read_exact(std::byte* dst, size_t n) {
    while (n > 0) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 10000) <= 0) return Status::TimedOut("raw client: no reply within 10 s");
      ssize_t k = ::recv(fd_, dst, n, 0);
      if (k <= 0) return Status::Disconnected("raw client: connection closed");
      dst += k;
      n -= static_cast<size_t>(k);
    }
    return Status::OK();
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string peer_;
};

}  // namespace surge::ods::testing
