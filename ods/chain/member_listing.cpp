// list_member_chunks: see member_listing.h.
#include "ods/chain/member_listing.h"

#include "net/proto/ods_methods.h"

namespace surge::ods {

namespace {
constexpr uint32_t kListPage = 1024;
}  // namespace

Status list_member_chunks(ChainForwarder& forwarder, uint32_t to, const std::string& address,
                          uint32_t chain_id, uint64_t chain_version,
                          const std::function<void(const proto::ods::ChunkState&)>& fn) {
  SURGE_ASSIGN_OR_RETURN(auto ch, forwarder.channel(address));
  proto::ods::ListChunksRequest lq;
  lq.mutable_ref()->set_target_id(to);
  lq.mutable_ref()->set_chain_id(chain_id);
  lq.mutable_ref()->set_chain_version(chain_version);
  lq.set_from_start(true);
  lq.set_max_entries(kListPage);
  for (;;) {
    proto::ods::ListChunksReply la;
    Status st = ch->call<proto::ods::OdsListChunks>(lq, &la);
    if (peer_unreachable(st)) {
      forwarder.drop(address);
      return st;
    }
    SURGE_RETURN_IF_ERROR_CTX(st, "listing the chunks of chain " + std::to_string(chain_id) +
                                      " on target " + std::to_string(to) + " at " + address);
    for (const auto& c : la.chunks()) fn(c);
    if (la.eof() || la.chunks_size() == 0) return Status::OK();
    const auto& last = la.chunks(la.chunks_size() - 1);
    lq.set_from_start(false);
    lq.mutable_ref()->set_ino(last.ino());
    lq.mutable_ref()->set_slot(last.slot());
    lq.mutable_ref()->set_position(last.position());
  }
}

}  // namespace surge::ods
