// The cluster key: a shared secret every daemon and client reads from a
// file. A connection proves knowledge of it (HMAC-SHA256 challenge-response
// in both directions) before any request is served.
#pragma once

#include <string>

#include "common/status.h"

namespace surge::net {

// Reads the key file (surrounding whitespace trimmed); an empty or
// unreadable file is an error naming the path.
Result<std::string> load_cluster_key(const std::string& path);

// Writes a new random key (32 bytes, hex) to path with mode 0600.
Status generate_cluster_key(const std::string& path);

}  // namespace surge::net
