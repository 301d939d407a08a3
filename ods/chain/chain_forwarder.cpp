// ChainForwarder: forwards, whole-chunk sends and unreachable successors.
#include "ods/chain/chain_forwarder.h"

#include <cstring>

#include "common/crc32c.h"
#include "common/log.h"
#include "net/proto/ods_methods.h"
#include "net/proto/ods_write_pieces.h"
#include "ods/chain/resync_sends.h"

namespace surge::ods {
namespace {

namespace pb = proto::ods;

constexpr size_t kWholePiece = 1 << 20;

void set_ref(pb::ChunkRef* ref, uint32_t to, uint32_t chain, uint64_t version,
             const ChunkKey& key) {
  ref->set_target_id(to);
  ref->set_chain_id(chain);
  ref->set_chain_version(version);
  ref->set_ino(key.ino);
  ref->set_slot(key.slot);
  ref->set_position(key.position);
}

std::string where(uint32_t to, uint32_t chain, const ChunkKey& key) {
  return key.describe() + " of chain " + std::to_string(chain) + " to target " + std::to_string(to);
}

}  // namespace

bool peer_unreachable(const Status& st) {
  switch (st.code()) {
    case Code::kDisconnected:
    case Code::kConnectionRefused:
    case Code::kTimedOut:
    case Code::kCancelled:
      return true;
    default:
      return false;
  }
}

std::vector<uint32_t> piece_crcs_of(std::span<const std::byte> data, uint64_t offset,
                                    uint32_t piece_bytes) {
  std::vector<uint32_t> out;
  for (uint64_t done = 0; done < data.size();) {
    const uint64_t n = pb::piece_length(offset + done, data.size() - done, piece_bytes);
    out.push_back(surge::crc32c(data.data() + done, n));
    done += n;
  }
  return out;
}

ChainForwarder::ChainForwarder(ChunkStore& chunks, ChainView& view, net::BufferPool& pool,
                               ChainForwarderOptions options)
    : chunks_(chunks), view_(view), pool_(pool), options_(std::move(options)) {
  net::ChannelOptions o;
  o.cluster_key = options_.cluster_key;
  o.connect_timeout = std::chrono::milliseconds(2000);
  o.call_timeout = options_.call_timeout;
  o.pool = &pool_;
  for (size_t lane = 0; lane <= options_.lanes.lanes; ++lane) {
    channels_.push_back(std::make_unique<net::ChannelPool>(o));
  }
}

Result<std::shared_ptr<net::RpcChannel>> ChainForwarder::channel(const std::string& address) {
  return resync_channels().get(address);
}

Status ChainForwarder::unreachable(uint32_t to, uint32_t chain_id, uint64_t chain_version,
                                   const Status& seen) {
  SLOG_WARN("chain {}: target {} unreachable: {}; reporting it", chain_id, to, seen.ToString());
  Status rep = view_.report_failure(to, chain_id, chain_version, seen);
  auto now = view_.place(chain_id);
  if (now.ok() && now->version != chain_version) {
    return Status::StaleChain("chain " + std::to_string(chain_id) + " moved from version " +
                              std::to_string(chain_version) + " to " +
                              std::to_string(now->version) + " after its target " +
                              std::to_string(to) + " failed (" + seen.ToString() +
                              "); retry on the new chain");
  }
  if (!now.ok() && now.status().code() == Code::kWrongTarget) {
    return Status::StaleChain("chain " + std::to_string(chain_id) + " no longer lists target " +
                              std::to_string(view_.own_id()) + " after its target " +
                              std::to_string(to) + " failed: " + seen.ToString());
  }
  return Status::Unavailable("chain " + std::to_string(chain_id) + " (version " +
                             std::to_string(chain_version) + "): target " + std::to_string(to) +
                             " cannot be reached: " + seen.ToString() +
                             (rep.ok() ? "; the MDS keeps it, retry later"
                                       : "; and the MDS cannot be told: " + rep.ToString()));
}

Result<ChainForwarder::SentForward> ChainForwarder::send_forward(const ChainPlace& place,
                                                                 const ChunkKey& key,
                                                                 const ChunkUpdate& u) {
  return send_to(place, place.successor, place.successor_address, place.position + 1, key, u);
}

Result<ChainForwarder::SentForward> ChainForwarder::send_to(const ChainPlace& place, uint32_t to,
                                                            const std::string& address,
                                                            uint32_t hop, const ChunkKey& key,
                                                            const ChunkUpdate& u) {
  if (address.empty()) {
    return unreachable(
        to, place.chain_id, place.version,
        Status::Unavailable("no address for target " + std::to_string(to) + " in the map"));
  }
  const size_t lane_channel = options_.lanes.channel_of_lane(options_.lanes.of_hop(hop));
  auto ch = channels_[lane_channel]->get(address);
  if (!ch.ok()) {
    return unreachable(to, place.chain_id, place.version,
                       ch.status().WithContext("connecting to " + address));
  }
  pb::ChainForwardRequest req;
  set_ref(req.mutable_ref(), to, place.chain_id, place.version, key);
  req.mutable_ref()->set_truncate_seq(u.truncate_seq);
  req.set_hop(hop);
  req.set_update_version(u.version);
  req.set_kind(u.kind);
  req.set_sync(u.sync);
  net::BulkRegion region;
  std::span<const net::BulkRegion> bulk;
  if ((u.kind == pb::UPDATE_WRITE || u.kind == pb::UPDATE_EC_DELTA) && !u.data.empty()) {
    req.set_offset(u.offset);
    req.set_length(u.data.size());
    req.set_piece_bytes(u.piece_bytes);
    for (uint32_t c : u.piece_crcs) req.add_piece_crc32c(c);
    region = {const_cast<std::byte*>(u.data.data()), u.data.size(), net::BulkAccess::kServerPull};
    bulk = {&region, 1};
  }
  if (u.kind == pb::UPDATE_EC_DELTA) {
    req.set_source_position(u.source_position);
    req.set_ec_stand_in(u.ec_stand_in);
  }
  if (u.kind == pb::UPDATE_TRUNCATE) req.set_size(u.size);
  if (u.kind == pb::UPDATE_FALLOCATE) {
    req.set_offset(u.offset);
    req.set_length(u.length);
    req.set_fallocate_mode(u.fallocate_mode);
    req.set_keep_size(u.keep_size);
  }
  SentForward sent;
  sent.call = net::call_async<pb::OdsChainForward>(**ch, req, bulk, options_.forward_timeout);
  sent.channel = std::move(*ch);
  sent.lane_channel = lane_channel;
  sent.chain_id = place.chain_id;
  sent.chain_version = place.version;
  sent.to = to;
  sent.address = address;
  sent.key = key;
  return sent;
}

Status ChainForwarder::finish_forward(SentForward& sent) {
  pb::ChainForwardReply resp;
  Status st = net::finish_call<pb::OdsChainForward>(sent.call, &resp);
  if (peer_unreachable(st)) {
    if (!sent.channel->connected()) channels_[sent.lane_channel]->drop(sent.address);
    return unreachable(sent.to, sent.chain_id, sent.chain_version,
                       st.WithContext("forwarding " + where(sent.to, sent.chain_id, sent.key)));
  }
  if (st.code() == Code::kStaleChain) {
    (void)view_.refresh();
    return Status::StaleChain("forwarding " + where(sent.to, sent.chain_id, sent.key) + ": " +
                              st.message());
  }
  return st;
}

Status ChainForwarder::call_forward(const ChainPlace& place, const ChunkKey& key,
                                    const ChunkUpdate& u) {
  SURGE_ASSIGN_OR_RETURN(SentForward sent, send_forward(place, key, u));
  return finish_forward(sent);
}

Status ChainForwarder::forward(const ChainPlace& place, const ChunkKey& key,
                               const ChunkRecord& rec, const ChunkUpdate& u) {
  Status st = call_forward(place, key, u);
  if (st.code() != Code::kChunkVersionGap) return st;
  // The successor missed updates: it gets the chunk whole (which holds u
  // already), then u again so it travels on from there.
  SLOG_INFO("{}: successor target {} missed versions ({}); sending it whole", key.describe(),
            place.successor, st.message());
  SURGE_RETURN_IF_ERROR(send_whole(place.chain_id, place.version, place.successor,
                                   place.successor_address, key, rec));
  return call_forward(place, key, u);
}

Status ChainForwarder::send_whole(uint32_t chain_id, uint64_t chain_version, uint32_t to,
                                  const std::string& address, const ChunkKey& key,
                                  const std::optional<ChunkRecord>& rec) {
  auto ch = resync_channels().get(address);
  if (!ch.ok()) {
    return unreachable(to, chain_id, chain_version, ch.status().WithContext("connecting to " + address));
  }
  // One id for every piece of this send (resync_sends.h).
  const uint64_t send_id = next_resync_send_id();
  auto send = [&](pb::ResyncChunkRequest& req, std::span<const net::BulkRegion> bulk) -> Status {
    set_ref(req.mutable_ref(), to, chain_id, chain_version, key);
    if (rec) req.mutable_ref()->set_truncate_seq(rec->truncate_seq);
    req.set_send_id(send_id);
    pb::ResyncChunkReply resp;
    Status st = (*ch)->call<pb::OdsResyncChunk>(req, &resp, bulk);
    if (peer_unreachable(st)) {
      if (!(*ch)->connected()) resync_channels().drop(address);
      return unreachable(to, chain_id, chain_version,
                         st.WithContext("resyncing " + where(to, chain_id, key)));
    }
    return st.WithContext("resyncing " + where(to, chain_id, key));
  };
  if (!rec) {
    pb::ResyncChunkRequest req;
    req.set_remove(true);
    return send(req, {});
  }
  SURGE_ASSIGN_OR_RETURN(uint64_t size, chunks_.size(*rec));
  SURGE_ASSIGN_OR_RETURN(net::PoolBuffer buf,
                         pool_.acquire(std::min<uint64_t>(kWholePiece, pool_.max_buffer_size()),
                                       options_.buffer_wait));
  const uint64_t piece = std::min<uint64_t>(buf.capacity(), kWholePiece);
  uint64_t at = 0;
  do {
    const uint64_t n = std::min<uint64_t>(piece, size - at);
    pb::ResyncChunkRequest req;
    req.set_version(rec->version);
    req.set_chunk_size(size);
    req.set_offset(at);
    req.set_begin(at == 0);
    req.set_last(at + n == size);
    net::BulkRegion region;
    std::span<const net::BulkRegion> bulk;
    if (n > 0) {
      auto got = chunks_.objects().read(rec->object_id, at, std::span<std::byte>(buf.data(), n));
      if (!got.ok()) return got.status().WithContext("reading " + key.describe() + " to resync it");
      // A hole past the stored end reads short: the rest is zeros.
      if (*got < n) std::memset(buf.data() + *got, 0, n - *got);
      const uint32_t pbytes = static_cast<uint32_t>(std::min<uint64_t>(piece, pb::kMaxPieceBytes));
      req.set_length(n);
      req.set_piece_bytes(pbytes);
      for (uint32_t c : piece_crcs_of({buf.data(), n}, at, pbytes)) req.add_piece_crc32c(c);
      region = {buf.data(), n, net::BulkAccess::kServerPull};
      bulk = {&region, 1};
    }
    SURGE_RETURN_IF_ERROR(send(req, bulk));
    at += n;
  } while (at < size);
  return Status::OK();
}

}  // namespace surge::ods
