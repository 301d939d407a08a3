// list_chain_chunks: see chain_listing.h.
#include "tools/surgectl/chain_listing.h"

#include "net/proto/ods_methods.h"

namespace surge::tools {

namespace {
constexpr uint32_t kPageEntries = 1024;
}  // namespace

proto::ods::ChunkRef member_ref(const MemberChannel& m, const proto::mds::Chain& chain) {
  proto::ods::ChunkRef r;
  r.set_target_id(m.target_id);
  r.set_chain_id(chain.chain_id());
  r.set_chain_version(chain.version());
  return r;
}

Status list_chain_chunks(const MemberChannel& m, const proto::mds::Chain& chain, bool with_crc,
                         const std::function<void(const proto::ods::ChunkState&)>& fn) {
  namespace ods = proto::ods;
  ods::ListChunksRequest req;
  *req.mutable_ref() = member_ref(m, chain);
  req.set_from_start(true);
  req.set_max_entries(kPageEntries);
  req.set_with_crc(with_crc);
  for (;;) {
    ods::ListChunksReply resp;
    Status st = m.channel->call<ods::OdsListChunks>(req, &resp);
    if (!st.ok()) {
      return st.WithContext("listing the chunks of chain " + std::to_string(chain.chain_id()) +
                            " on " + m.who());
    }
    for (const auto& c : resp.chunks()) fn(c);
    if (resp.eof() || resp.chunks_size() == 0) return Status::OK();
    const auto& last = resp.chunks(resp.chunks_size() - 1);
    req.set_from_start(false);
    req.mutable_ref()->set_ino(last.ino());
    req.mutable_ref()->set_slot(last.slot());
    req.mutable_ref()->set_position(last.position());
  }
}

}  // namespace surge::tools
