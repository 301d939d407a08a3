// read_position: see position_reads.h.
#include "ods/ec/position_reads.h"

#include <string>

#include "common/crc32c.h"
#include "net/proto/ods_methods.h"

namespace surge::ods {

proto::ods::ChunkRef ref_in_chain(const ChainPlace& place, const ChunkKey& key) {
  proto::ods::ChunkRef ref;
  ref.set_chain_id(place.chain_id);
  ref.set_chain_version(place.version);
  ref.set_ino(key.ino);
  ref.set_slot(key.slot);
  ref.set_position(key.position);
  return ref;
}

Result<PositionWindow> read_position(ChainForwarder& forwarder, const ChainPlace& place,
                                     uint32_t position, const ChunkKey& key, uint64_t off,
                                     std::span<std::byte> dst, bool clean_only) {
  const ChainPlace::EcMember& m = place.ec_members.at(position);
  const std::string what = "reading " + ChunkKey{key.ino, key.slot, position}.describe() +
                           " of chain " + std::to_string(place.chain_id) + " at " +
                           std::to_string(off) + " from target " + std::to_string(m.target_id) +
                           " at " + m.address;
  SURGE_ASSIGN_OR_RETURN(auto ch, forwarder.channel(m.address));
  proto::ods::ReadRequest req;
  *req.mutable_ref() = ref_in_chain(place, {key.ino, key.slot, position});
  req.mutable_ref()->set_target_id(m.target_id);
  req.set_offset(off);
  req.set_held_copy(true);
  req.set_clean_only(clean_only);
  req.set_length(dst.size());
  net::BulkRegion region{dst.data(), dst.size(), net::BulkAccess::kServerPush};
  proto::ods::ReadReply resp;
  Status st =
      ch->call<proto::ods::OdsRead>(req, &resp, std::span<const net::BulkRegion>(&region, 1));
  if (peer_unreachable(st)) forwarder.drop(m.address);
  SURGE_RETURN_IF_ERROR_CTX(st, what);
  if (resp.length() > dst.size()) {
    return Status::Corruption(what + ": answered " + std::to_string(resp.length()) + " bytes for " +
                              std::to_string(dst.size()));
  }
  if (crc32c(dst.data(), resp.length()) != resp.crc32c()) {
    return Status::Corruption(what + ": the bytes do not match the CRC sent with them");
  }
  PositionWindow w;
  w.length = resp.length();
  w.version = resp.chunk_version();
  w.applied.assign(resp.applied_versions().begin(), resp.applied_versions().end());
  w.truncate_seq = resp.truncate_seq();
  w.applied_truncate.assign(resp.applied_truncate_seqs().begin(),
                            resp.applied_truncate_seqs().end());
  return w;
}

}  // namespace surge::ods
