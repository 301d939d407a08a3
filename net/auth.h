// Cluster-key authentication, transport-agnostic: nonces and HMAC-SHA256
// proofs for the four-frame handshake every connection runs before any
// request is served (net/proto/README.md, "Handshake"):
//   client -> server  Hello     { client nonce Nc }
//   server -> client  Challenge { server nonce Ns, credits }
//   client -> server  Proof     { HMAC(key, "surge-client-v1" || Ns || Nc) }
//   server -> client  Welcome   { HMAC(key, "surge-server-v1" || Nc || Ns) }
// Both sides prove the key (mutual); fresh nonces on both sides make a
// recorded proof useless. A mismatch is answered with a GoAway(AuthFailed).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace surge::net {

inline constexpr size_t kNonceSize = 32;
inline constexpr size_t kProofSize = 32;
inline constexpr size_t kChallengeBodySize = kNonceSize + 4;  // nonce, u32 credits
// Largest body a frame may have before its connection has authenticated
// (the handshake frames, or a GoAway's reason): neither side sizes a buffer
// from an unauthenticated peer's header beyond this.
inline constexpr size_t kMaxHandshakeBody = 4096;

using Nonce = std::array<std::byte, kNonceSize>;
using Proof = std::array<std::byte, kProofSize>;

// Cryptographically random (OpenSSL RAND_bytes; aborts if the RNG fails,
// which only a broken system does).
Nonce make_nonce();
Proof client_proof(std::string_view key, const Nonce& server_nonce, const Nonce& client_nonce);
Proof server_proof(std::string_view key, const Nonce& client_nonce, const Nonce& server_nonce);
// Constant time.
bool proofs_equal(const Proof& a, const Proof& b);

}  // namespace surge::net
