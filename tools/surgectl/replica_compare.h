// Comparing the replicas of chained chunks from surgectl scrub: for one
// replicas chain, lists the chunks every SERVING member holds
// (OdsListChunks with CRCs: each member reads its whole copy and returns
// the CRC32C of its bytes) and compares, chunk by chunk, that every member
// holds it with the same version, size and content CRC; then (compare
// bytes) reads every member's copy of each chunk that agrees on all that
// (OdsRead naming the member, 1 MiB at a time) and compares it byte for
// byte. A copy whose
// blocks fail their own stored CRCs cannot be listed: that is reported as
// corruption of that member's copy. Read-only. Meant
// for a quiet cluster, but a chunk written, truncated or removed while
// the scrub looks at it (the MDS's leader applies removals in the
// background, on a quiet cluster too) can differ for a moment, one member
// ahead of another: a chunk that differs is listed again on every member
// and compared again if its state moved; it is reported only when two
// listings in a row agree (at most three more tries). EC chains hold different
// positions on each member and are not compared here.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "net/proto/mds.pb.h"

namespace surge::tools {

// One member's copy of a chunk, as it listed it.
struct ChunkCopy {
  uint32_t target_id = 0;
  std::string address;
  bool present = false;  // the member lists the chunk at all
  uint64_t version = 0;
  uint64_t committed_version = 0;
  uint64_t size = 0;
  uint32_t crc32c = 0;
  bool incomplete = false;  // a resync of it began and never ended
};

struct ReplicaMismatch {
  uint64_t ino = 0;
  uint32_t slot = 0;
  uint32_t position = 0;
  // "missing", "incomplete", "version", "size", "crc" (first found), or
  // "bytes": they agree on all that but a byte read back differs.
  std::string what;
  uint64_t first_differing_byte = 0;  // "bytes"
  std::vector<ChunkCopy> copies;  // one per compared member, chain order
};

struct ChainCompareResult {
  uint32_t chain_id = 0;
  uint64_t chain_version = 0;
  std::vector<uint32_t> members;  // the SERVING members compared, chain order
  bool compared = false;          // every compared member listed every chunk
  std::string error;              // why not, when !compared
  // A member could not read its copy of a chunk: a block of it fails its
  // stored CRC (the listing stops there; error names the chunk). Counted
  // as corruption, like a difference.
  bool corrupt = false;
  uint64_t chunks_compared = 0;
  uint64_t bytes_compared = 0;    // sum of the sizes of every copy listed
  uint64_t bytes_read = 0;        // of the copies read back to compare bytes
  std::vector<ReplicaMismatch> mismatches;
};

// Whether scrub compares this chain: a replicas chain that wants 2 or more
// copies.
bool is_replicated(const proto::mds::Chain& chain);

// Compares the SERVING members of chain (addresses from map). A chain
// with fewer than 2 SERVING members is not compared (error says why).
ChainCompareResult compare_chain(const proto::mds::Chain& chain,
                                 const proto::mds::ClusterMap& map, const std::string& cluster_key,
                                 std::chrono::milliseconds call_timeout, bool compare_bytes);

// "ino 12 slot 0 position 0"
std::string chunk_name(const ReplicaMismatch& m);
// surgectl scrub's lines for one chain (each ends in a newline); its JSON
// object is json_output.h's chain_compare_json.
std::string chain_text(const ChainCompareResult& r);

}  // namespace surge::tools
