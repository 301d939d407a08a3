// ChainUsage: see chain_usage.h.
#include "mds/cluster/chain_usage.h"

#include "mds/namespace/records.pb.h"

namespace surge::mds {

Result<std::map<uint32_t, uint64_t>> chain_bytes(KvStore* kv) {
  std::map<uint32_t, uint64_t> bytes;
  SURGE_RETURN_IF_ERROR_CTX(
      kv->scan(Space::kInodes, "", "",
               [&](std::string_view, std::string_view v) {
                 records::InodeRecord r;
                 // An unreadable record is the checker's to report; it
                 // only makes this estimate a little low.
                 if (!r.ParseFromArray(v.data(), static_cast<int>(v.size()))) return true;
                 const auto& l = r.attr().layout();
                 if (l.format() != 2 || l.chains_size() == 0 || r.attr().size() == 0) return true;
                 const uint64_t per_slot =
                     (r.attr().size() + static_cast<uint64_t>(l.chains_size()) - 1) /
                     static_cast<uint64_t>(l.chains_size());
                 for (uint32_t id : l.chains()) bytes[id] += per_slot;
                 return true;
               }),
      "scanning the file layouts for the bytes each chain holds");
  return bytes;
}

}  // namespace surge::mds
