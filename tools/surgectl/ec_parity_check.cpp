// check_ec_chain: see ec_parity_check.h.
#include "tools/surgectl/ec_parity_check.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "common/crc32c.h"
#include "common/ec/rs_codec.h"
#include "common/status.h"
#include "net/proto/ods_methods.h"
#include "net/rpc_channel.h"
#include "tools/surgectl/chain_listing.h"

namespace surge::tools {

namespace pb = proto::mds;
namespace ods = proto::ods;

namespace {

constexpr uint64_t kWindow = 1 << 20;  // per OdsRead of a position

using Group = std::pair<uint64_t, uint32_t>;  // ino, slot

using Position = MemberChannel;

// The size of every chunk of `position` the member holds, by group.
Status list_sizes(const Position& p, uint32_t position, const pb::Chain& chain,
                  std::map<Group, uint64_t>* sizes) {
  return list_chain_chunks(p, chain, false, [&](const ods::ChunkState& c) {
    if (c.position() != position) return;  // not this member's to hold
    uint64_t& s = (*sizes)[{c.ino(), c.slot()}];
    s = std::max<uint64_t>(s, c.size());
  });
}

struct Window {
  std::vector<uint8_t> bytes;  // zero-padded past the chunk's end
  uint64_t version = 0;
  std::vector<uint64_t> applied;  // parity: one per data position
  bool dirty = false;             // parity answered ChunkDirty
};

Result<Window> read_window(const Position& p, const pb::Chain& chain, const Group& g,
                           uint32_t position, uint64_t off, uint64_t len, uint32_t k) {
  ods::ReadRequest req;
  *req.mutable_ref() = member_ref(p, chain);
  req.mutable_ref()->set_ino(g.first);
  req.mutable_ref()->set_slot(g.second);
  req.mutable_ref()->set_position(position);
  req.set_offset(off);
  req.set_length(len);
  Window w;
  w.bytes.assign(len, 0);
  net::BulkRegion region{w.bytes.data(), len, net::BulkAccess::kServerPush};
  ods::ReadReply resp;
  Status st =
      p.channel->call<ods::OdsRead>(req, &resp, std::span<const net::BulkRegion>(&region, 1));
  if (st.code() == Code::kChunkDirty) {
    w.dirty = true;
    return w;
  }
  const std::string what = "reading ino " + std::to_string(g.first) + " slot " +
                           std::to_string(g.second) + " position " + std::to_string(position) +
                           " of EC chain " + std::to_string(chain.chain_id()) + " at " +
                           std::to_string(off) + " on " + p.who();
  if (!st.ok()) return st.WithContext(what);
  if (resp.length() > len || crc32c(w.bytes.data(), resp.length()) != resp.crc32c()) {
    return Status::Corruption(what + ": the bytes received do not match the reply's CRC");
  }
  std::fill(w.bytes.begin() + static_cast<std::ptrdiff_t>(resp.length()), w.bytes.end(), 0);
  w.version = resp.chunk_version();
  w.applied.assign(resp.applied_versions().begin(), resp.applied_versions().end());
  if (w.applied.empty()) w.applied.assign(k, 0);  // never written
  return w;
}

// What differs in one window of group g, every position read together.
Result<std::vector<EcParityMismatch>> compare_window(const std::vector<Position>& ps,
                                                     const pb::Chain& chain,
                                                     const ec::RsCodec& codec, const Group& g,
                                                     uint64_t off, uint64_t len) {
  const uint32_t k = codec.k(), m = codec.m();
  std::vector<Window> w;
  for (uint32_t i = 0; i < k + m; ++i) {
    SURGE_ASSIGN_OR_RETURN(Window got, read_window(ps[i], chain, g, i, off, len, k));
    w.push_back(std::move(got));
  }
  std::vector<const uint8_t*> data;
  for (uint32_t i = 0; i < k; ++i) data.push_back(w[i].bytes.data());
  std::vector<std::vector<uint8_t>> want(m, std::vector<uint8_t>(len));
  std::vector<uint8_t*> parity;
  for (auto& p : want) parity.push_back(p.data());
  SURGE_RETURN_IF_ERROR(codec.Encode(data, parity, len));
  std::vector<EcParityMismatch> out;
  for (uint32_t j = 0; j < m; ++j) {
    EcParityMismatch x;
    x.ino = g.first;
    x.slot = g.second;
    x.parity = j;
    x.chunk_offset = off;
    const Window& pw = w[k + j];
    if (pw.dirty) {
      x.what = "dirty";
      out.push_back(x);
      continue;
    }
    if (pw.applied.size() != k) {
      return Status::ProtocolError(
          "parity " + std::to_string(j) + " of EC chain " + std::to_string(chain.chain_id()) +
          " on " + ps[k + j].who() + " names " + std::to_string(pw.applied.size()) +
          " applied versions for " + std::to_string(k) + " data positions");
    }
    bool versions = true;
    for (uint32_t d = 0; d < k && versions; ++d) {
      if (pw.applied[d] == w[d].version) continue;
      x.what = "versions";
      x.data_position = d;
      x.applied = pw.applied[d];
      x.data_version = w[d].version;
      versions = false;
    }
    if (!versions) {
      out.push_back(x);
      continue;
    }
    auto diff = std::mismatch(pw.bytes.begin(), pw.bytes.end(), want[j].begin());
    if (diff.first != pw.bytes.end()) {
      x.what = "bytes";
      x.first_differing_byte = off + static_cast<uint64_t>(diff.first - pw.bytes.begin());
      out.push_back(x);
    }
  }
  return out;
}

}  // namespace

EcChainCheckResult check_ec_chain(const pb::Chain& chain, const pb::ClusterMap& map,
                                  const std::string& cluster_key,
                                  std::chrono::milliseconds call_timeout) {
  EcChainCheckResult r;
  r.chain_id = chain.chain_id();
  r.chain_version = chain.version();
  r.k = chain.ec_data();
  r.m = chain.ec_parity();
  const std::string what = "EC chain " + std::to_string(chain.chain_id()) + " (" +
                           std::to_string(r.k) + "+" + std::to_string(r.m) + ")";
  auto codec = ec::RsCodec::Create(r.k, r.m);
  if (!codec.ok()) {
    r.error = what + ": " + codec.status().ToString();
    return r;
  }
  if (static_cast<uint32_t>(chain.members_size()) != r.k + r.m) {
    r.error = what + " has " + std::to_string(chain.members_size()) + " members, not " +
              std::to_string(r.k + r.m);
    return r;
  }
  net::ChannelOptions o;
  o.cluster_key = cluster_key;
  o.connect_timeout = std::chrono::milliseconds(5000);
  o.call_timeout = call_timeout;
  std::vector<Position> ps;
  for (uint32_t i = 0; i < r.k + r.m; ++i) {
    const auto& cm = chain.members(static_cast<int>(i));
    Position p;
    p.target_id = cm.target_id();
    for (const auto& t : map.targets()) {
      if (t.target_id() == cm.target_id()) p.address = t.address();
    }
    if (cm.state() != pb::MEMBER_SERVING) {
      r.error = what + ": position " + std::to_string(i) + " (target " +
                std::to_string(p.target_id) + ") does not serve: parity not checked";
      return r;
    }
    auto ch = net::RpcChannel::Connect(p.address, o);
    if (!ch.ok()) {
      r.error =
          "cannot connect to " + p.who() + " to check " + what + ": " + ch.status().ToString();
      return r;
    }
    p.channel = std::move(*ch);
    ps.push_back(std::move(p));
  }
  std::map<Group, uint64_t> sizes;
  for (uint32_t i = 0; i < r.k + r.m; ++i) {
    if (Status st = list_sizes(ps[i], i, chain, &sizes); !st.ok()) {
      r.error = st.ToString();
      return r;
    }
  }
  for (const auto& [g, size] : sizes) {
    for (uint64_t off = 0; off < size; off += kWindow) {
      const uint64_t len = std::min(kWindow, size - off);
      auto diff = compare_window(ps, chain, *codec, g, off, len);
      // A write between two reads can look like a difference: read again.
      if (diff.ok() && !diff->empty()) diff = compare_window(ps, chain, *codec, g, off, len);
      if (!diff.ok()) {
        r.error = diff.status().ToString();
        return r;
      }
      r.mismatches.insert(r.mismatches.end(), diff->begin(), diff->end());
      r.bytes_checked += len * (r.k + r.m);
    }
    ++r.groups_checked;
  }
  r.checked = true;
  return r;
}

std::string ec_chain_text(const EcChainCheckResult& r) {
  std::string head = "chain " + std::to_string(r.chain_id) + " (version " +
                     std::to_string(r.chain_version) + ", ec " + std::to_string(r.k) + "+" +
                     std::to_string(r.m) + ")";
  if (!r.checked) return head + ": PARITY NOT CHECKED: " + r.error + "\n";
  std::string out = head + ": " + std::to_string(r.groups_checked) + " chunk sets, " +
                    std::to_string(r.bytes_checked) + " bytes read, " +
                    std::to_string(r.mismatches.size()) + " parity windows inconsistent\n";
  for (const auto& x : r.mismatches) {
    out += "  inconsistent: ino " + std::to_string(x.ino) + " slot " + std::to_string(x.slot) +
           " parity " + std::to_string(x.parity) + " window at chunk offset " +
           std::to_string(x.chunk_offset) + ": ";
    if (x.what == "bytes") {
      out += "differs from the code of the data at byte " + std::to_string(x.first_differing_byte);
    } else if (x.what == "versions") {
      out += "applied version " + std::to_string(x.applied) + " of data position " +
             std::to_string(x.data_position) + ", which holds version " +
             std::to_string(x.data_version);
    } else {
      out += "a delta's apply never ended (ChunkDirty)";
    }
    out += "\n";
  }
  return out;
}

}  // namespace surge::tools
