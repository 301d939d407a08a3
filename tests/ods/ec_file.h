// An EC file's chunks on a ChainCluster, position by position: what the
// EC data-server tests (ods_ec_test, ods_ec_group_test) write through and
// check parity with.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/ec/rs_codec.h"
#include "tests/ods/chain_cluster.h"

namespace surge::ods::testing {

struct EcFile {
  uint64_t ino = 0;
  mpb::Chain chain;
  uint32_t k = 0, m = 0;
};

inline EcFile make_ec_file(ChainCluster& cl, uint32_t k, uint32_t m, const std::string& name) {
  const uint64_t dir = cl.mkdir_ec("ec-" + name, k, m);
  auto [ino, chain_id] = cl.create(name, dir);
  EcFile f{ino, cl.chain(chain_id), k, m};
  EXPECT_EQ(f.chain.scheme(), mpb::SCHEME_EC) << f.chain.DebugString();
  EXPECT_EQ(f.chain.members_size(), static_cast<int>(k + m)) << f.chain.DebugString();
  return f;
}

// Writes d at off of data position p, retrying what a client retries
// (the chain moved, a member was reported) on the chain as it is now.
inline Status write_retrying(ChainCluster& cl, EcFile& f, uint32_t p, uint64_t off,
                             std::span<const std::byte> d) {
  Status st;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto w = cl.write(ChainCluster::ec_ref(f.chain, f.ino, p), off, d);
    if (w.ok()) return Status::OK();
    st = w.status();
    if (st.code() != Code::kStaleChain && st.code() != Code::kUnavailable) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    f.chain = cl.chain(f.chain.chain_id());
  }
  return st;
}

// Position p's chunk, [0, len), zero-padded past its end; its version, and
// the applied versions for a parity position.
struct ChunkRead {
  std::vector<uint8_t> bytes;
  uint64_t version = 0;
  std::vector<uint64_t> applied;
};

inline ChunkRead read_position(ChainCluster& cl, const EcFile& f, uint32_t p, uint64_t len) {
  const pb::ChunkRef ref = ChainCluster::ec_ref(f.chain, f.ino, p);
  ChunkRead out;
  out.bytes.assign(len, 0);
  // In windows the data server takes (its limit per read is 8 MiB); the
  // version and applied versions are the last window's.
  constexpr uint64_t kWindow = 4 << 20;
  for (uint64_t off = 0; off < len; off += kWindow) {
    const uint64_t n = std::min(kWindow, len - off);
    pb::ReadRequest q;
    q.set_offset(off);
    q.set_length(n);
    *q.mutable_ref() = ref;
    net::BulkRegion r{out.bytes.data() + off, n, net::BulkAccess::kServerPush};
    pb::ReadReply a;
    Status st = cl.client(ref.target_id()).channel().call<pb::OdsRead>(q, &a, {&r, 1});
    if (!st.ok()) {
      throw std::runtime_error("read of position " + std::to_string(p) + ": " + st.ToString());
    }
    std::fill(out.bytes.begin() + static_cast<std::ptrdiff_t>(off + a.length()),
              out.bytes.begin() + static_cast<std::ptrdiff_t>(off + n), 0);
    out.version = a.chunk_version();
    out.applied.assign(a.applied_versions().begin(), a.applied_versions().end());
  }
  return out;
}

// Every parity position present holds the code of the data positions'
// bytes, and names their versions as applied. `skip`: positions not read.
inline void expect_parity_consistent(ChainCluster& cl, const EcFile& f, uint64_t len,
                                     std::vector<uint32_t> skip = {}) {
  auto codec = ec::RsCodec::Create(f.k, f.m);
  ASSERT_TRUE(codec.ok());
  std::vector<ChunkRead> chunks;
  for (uint32_t p = 0; p < f.k + f.m; ++p) {
    chunks.push_back(std::find(skip.begin(), skip.end(), p) == skip.end()
                         ? read_position(cl, f, p, len)
                         : ChunkRead{});
  }
  std::vector<const uint8_t*> data;
  for (uint32_t p = 0; p < f.k; ++p) data.push_back(chunks[p].bytes.data());
  std::vector<std::vector<uint8_t>> want(f.m, std::vector<uint8_t>(len));
  std::vector<uint8_t*> parity;
  for (auto& w : want) parity.push_back(w.data());
  ASSERT_TRUE(codec->Encode(data, parity, len).ok());
  for (uint32_t j = 0; j < f.m; ++j) {
    const uint32_t p = f.k + j;
    if (std::find(skip.begin(), skip.end(), p) != skip.end()) continue;
    const ChunkRead& c = chunks[p];
    size_t bad = 0;
    while (bad < len && c.bytes[bad] == want[j][bad]) ++bad;
    EXPECT_EQ(bad, len) << "parity " << j << " differs from the code of the data at byte " << bad;
    ASSERT_EQ(c.applied.size(), f.k) << "parity " << j;
    for (uint32_t d = 0; d < f.k; ++d) {
      EXPECT_EQ(c.applied[d], chunks[d].version) << "parity " << j << ", data position " << d;
    }
  }
}

inline std::vector<std::byte> random_bytes(size_t n, std::mt19937_64& rng) {
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng());
  return out;
}

}  // namespace surge::ods::testing
