// HMAC-SHA256 proofs for the cluster-key handshake (see net/auth.h).
#include "net/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <string>

#include "common/log.h"

namespace surge::net {

Nonce make_nonce() {
  Nonce n;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(n.data()), static_cast<int>(n.size())) != 1) {
    SLOG_ERROR("RAND_bytes failed: no secure randomness for handshake nonces");
    std::abort();
  }
  return n;
}

namespace {
Proof hmac(std::string_view key, std::string_view label, const Nonce& a, const Nonce& b) {
  std::string msg(label);
  msg.append(reinterpret_cast<const char*>(a.data()), a.size());
  msg.append(reinterpret_cast<const char*>(b.data()), b.size());
  Proof out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(),
       reinterpret_cast<unsigned char*>(out.data()), &len);
  return out;
}
}  // namespace

Proof client_proof(std::string_view key, const Nonce& server_nonce, const Nonce& client_nonce) {
  return hmac(key, "surge-client-v1", server_nonce, client_nonce);
}

Proof server_proof(std::string_view key, const Nonce& client_nonce, const Nonce& server_nonce) {
  return hmac(key, "surge-server-v1", client_nonce, server_nonce);
}

bool proofs_equal(const Proof& a, const Proof& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace surge::net
