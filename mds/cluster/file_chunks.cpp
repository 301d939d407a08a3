// FileChunks: see file_chunks.h.
#include "mds/cluster/file_chunks.h"

#include <chrono>
#include <thread>

#include "common/chunk_map.h"

namespace surge::mds {

namespace pb = proto::mds;

namespace {

std::string chunk_text(const ChunkPiece& p) {
  return "chunk " + std::to_string(p.chunk.ino) + "/" + std::to_string(p.chunk.slot) + "/" +
         std::to_string(p.chunk.position) + " of chain " + std::to_string(p.chain_id);
}

// A chunk update the chain moved under (StaleChain, WrongTarget) or whose
// head could not be reached: worth another try on the chain as the map
// then holds it.
bool chain_retryable(const Status& s) {
  switch (s.code()) {
    case Code::kStaleChain:
    case Code::kWrongTarget:
    case Code::kDisconnected:
    case Code::kConnectionRefused:
    case Code::kTimedOut:
    case Code::kUnavailable:
      return true;
    default:
      return false;
  }
}

bool head_unreachable(const Status& s) {
  return s.code() == Code::kDisconnected || s.code() == Code::kConnectionRefused ||
         s.code() == Code::kTimedOut;
}

// How long a chunk's truncate or removal keeps trying while its chain
// changes: a data server's failure is detected within about one probe
// (failure_probe_ms), so this covers a few chain changes in a row.
constexpr auto kChainRetryFor = std::chrono::seconds(10);
constexpr auto kChainRetryPause = std::chrono::milliseconds(50);

// Runs op on where piece p lives: its chain's head (an EC chain: the member
// of its position), or its format 1 target.
// A chained piece is retried as a client retries its IO (docs/redundancy.md,
// "What the client does"): when the head answers StaleChain (its successor
// failed and the MDS moved the chain) or WrongTarget, again at the chain's
// head as the map holds it now; when the head cannot be reached, after
// reporting it (the MDS's own probe takes a dead head out of its chains).
template <typename LegacyOp, typename ChunkOp>
Status on_piece(const ChunkPiece& p, ClusterMap& map, ObjectTargets& objects, const LegacyOp& legacy,
                const ChunkOp& chunk) {
  if (p.chain_id == 0) {
    auto addr = map.live_address(p.target_id);
    if (!addr) {
      return Status::Unavailable("data server " + std::to_string(p.target_id) + " is down");
    }
    return legacy(p.target_id, *addr).WithContext("object " + std::to_string(p.chunk.ino) +
                                                  " on target " + std::to_string(p.target_id) +
                                                  " at " + *addr);
  }
  const auto give_up = std::chrono::steady_clock::now() + kChainRetryFor;
  for (int attempt = 1;; ++attempt) {
    SURGE_ASSIGN_OR_RETURN(ChainHead head, map.chunk_holder(p.chain_id, p.chunk.position));
    ChunkAddress a;
    a.target_id = head.target_id;
    a.address = head.address;
    a.chain_id = p.chain_id;
    a.chain_version = head.chain_version;
    a.ino = p.chunk.ino;
    a.slot = p.chunk.slot;
    a.position = p.chunk.position;
    Status s = chunk(a);
    if (s.ok()) return s;
    // A member being rebuilt that cannot take it yet (its chunk cannot be
    // rebuilt now) will not within these retries: the intent or orphan
    // pass comes back to it, and the other files' chunks are not held up.
    const bool wait_for_rebuild = head.syncing && s.code() == Code::kUnavailable;
    if (!chain_retryable(s) || wait_for_rebuild || std::chrono::steady_clock::now() >= give_up) {
      return s.WithContext(chunk_text(p) + " at its head, target " +
                           std::to_string(head.target_id) + " at " + head.address + " (attempt " +
                           std::to_string(attempt) + ")");
    }
    if (head_unreachable(s)) {
      pb::ReportTargetFailureRequest r;
      r.set_target_id(head.target_id);
      r.set_chain_id(p.chain_id);
      r.set_chain_version(head.chain_version);
      r.set_code(static_cast<uint32_t>(s.code()));
      r.set_message(s.ToString());
      r.set_reporter("the MDS");
      (void)map.report_target_failure(r, [&objects](const std::string& addr) {
        return objects.probe(addr);
      });
    }
    std::this_thread::sleep_for(kChainRetryPause);
  }
}

}  // namespace

FileLayout to_file_layout(const pb::Layout& l) {
  FileLayout f;
  f.format = l.format() == 0 ? FileLayout::kFormatTargets : l.format();
  f.stripe_size = l.stripe_size();
  f.stripe_count = l.stripe_count();
  f.targets.assign(l.targets().begin(), l.targets().end());
  f.chains.assign(l.chains().begin(), l.chains().end());
  if (f.chained()) {
    switch (l.scheme()) {
      case pb::SCHEME_REPLICAS:
        f.scheme = Redundancy::kReplicas;
        break;
      case pb::SCHEME_EC:
        f.scheme = Redundancy::kErasure;
        break;
      default:
        f.scheme = Redundancy::kNone;
    }
  }
  f.replicas = l.replicas();
  f.ec_data = l.ec_data();
  f.ec_parity = l.ec_parity();
  return f;
}

Status truncate_file_data(const pb::Layout& layout, uint64_t ino, uint64_t file_size,
                          ClusterMap& map, ObjectTargets& objects, uint64_t truncate_seq) {
  const FileLayout l = to_file_layout(layout);
  SURGE_RETURN_IF_ERROR(validate(l, ino));
  for (const ChunkPiece& p : all_chunks(l, ino)) {
    const uint64_t size = chunk_size_for_file_size(l, p.chunk.slot, p.chunk.position, file_size);
    SURGE_RETURN_IF_ERROR(on_piece(
        p, map, objects,
        [&](uint32_t target, const std::string& addr) {
          return objects.truncate(target, addr, ino, size, truncate_seq);
        },
        [&](const ChunkAddress& a) { return objects.truncate_chunk(a, size, truncate_seq); }));
  }
  return Status::OK();
}

Status remove_file_data(const pb::Layout& layout, uint64_t ino, ClusterMap& map,
                        ObjectTargets& objects, uint64_t truncate_seq) {
  const FileLayout l = to_file_layout(layout);
  SURGE_RETURN_IF_ERROR(validate(l, ino));
  for (const ChunkPiece& p : all_chunks(l, ino)) {
    SURGE_RETURN_IF_ERROR(on_piece(
        p, map, objects,
        [&](uint32_t target, const std::string& addr) {
          return objects.remove(target, addr, ino, truncate_seq);
        },
        [&](const ChunkAddress& a) { return objects.remove_chunk(a, truncate_seq); }));
  }
  return Status::OK();
}

}  // namespace surge::mds
