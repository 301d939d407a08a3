// compare_chain: see replica_compare.h.
#include "tools/surgectl/replica_compare.h"

#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include "common/status.h"
#include "net/proto/ods_methods.h"
#include "net/rpc_channel.h"
#include "tools/surgectl/chain_listing.h"
#include "tools/surgectl/cluster_admin.h"

namespace surge::tools {

namespace pb = proto::mds;
namespace ods = proto::ods;

namespace {

constexpr uint64_t kReadBytes = 1 << 20;  // per OdsRead of a copy

using Key = std::tuple<uint64_t, uint32_t, uint32_t>;  // ino, slot, position

using Member = MemberChannel;

ChunkCopy copy_of(const Member& m, const ods::ChunkState* s) {
  ChunkCopy c;
  c.target_id = m.target_id;
  c.address = m.address;
  if (s == nullptr) return c;
  c.present = true;
  c.version = s->version();
  c.committed_version = s->committed_version();
  c.size = s->size();
  c.crc32c = s->crc32c();
  c.incomplete = s->incomplete();
  return c;
}

// Every chunk of the chain on one member, in key order.
Result<std::map<Key, ods::ChunkState>> list_all(const Member& m, const pb::Chain& chain) {
  std::map<Key, ods::ChunkState> out;
  SURGE_RETURN_IF_ERROR(list_chain_chunks(m, chain, true, [&](const ods::ChunkState& c) {
    out[{c.ino(), c.slot(), c.position()}] = c;
  }));
  return out;
}

// The key just before k, so a listing "after" it starts at k.
std::optional<Key> before(const Key& k) {
  auto [ino, slot, pos] = k;
  constexpr uint32_t kMax = std::numeric_limits<uint32_t>::max();
  if (pos > 0) return Key{ino, slot, pos - 1};
  if (slot > 0) return Key{ino, slot - 1, kMax};
  if (ino > 0) return Key{ino - 1, kMax, kMax};
  return std::nullopt;
}

// One chunk on one member, listed again (nullopt: the member does not hold it).
Result<std::optional<ods::ChunkState>> list_one(const Member& m, const pb::Chain& chain,
                                                const Key& k) {
  ods::ListChunksRequest req;
  *req.mutable_ref() = member_ref(m, chain);
  auto b = before(k);
  req.set_from_start(!b.has_value());
  if (b) {
    req.mutable_ref()->set_ino(std::get<0>(*b));
    req.mutable_ref()->set_slot(std::get<1>(*b));
    req.mutable_ref()->set_position(std::get<2>(*b));
  }
  req.set_max_entries(1);
  req.set_with_crc(true);
  ods::ListChunksReply resp;
  Status st = m.channel->call<ods::OdsListChunks>(req, &resp);
  if (!st.ok()) {
    return st.WithContext("listing a chunk of chain " + std::to_string(chain.chain_id()) + " on " +
                          m.who());
  }
  if (resp.chunks_size() == 0) return std::optional<ods::ChunkState>();
  const auto& c = resp.chunks(0);
  if (Key{c.ino(), c.slot(), c.position()} != k) return std::optional<ods::ChunkState>();
  return std::optional<ods::ChunkState>(c);
}

// Reads [off, off + len) of a chunk from one member (OdsRead naming it).
Result<std::string> read_copy(const Member& m, const pb::Chain& chain, const Key& k, uint64_t off,
                              uint64_t len) {
  ods::ReadRequest req;
  *req.mutable_ref() = member_ref(m, chain);
  req.mutable_ref()->set_ino(std::get<0>(k));
  req.mutable_ref()->set_slot(std::get<1>(k));
  req.mutable_ref()->set_position(std::get<2>(k));
  req.set_offset(off);
  req.set_length(len);
  std::string buf(len, '\0');
  net::BulkRegion region{buf.data(), len, net::BulkAccess::kServerPush};
  ods::ReadReply resp;
  Status st = m.channel->call<ods::OdsRead>(req, &resp, std::span<const net::BulkRegion>(&region, 1));
  if (!st.ok()) {
    return st.WithContext("reading ino " + std::to_string(std::get<0>(k)) + " slot " +
                          std::to_string(std::get<1>(k)) + " position " +
                          std::to_string(std::get<2>(k)) + " of chain " +
                          std::to_string(chain.chain_id()) + " at " + std::to_string(off) +
                          " on " + m.who());
  }
  buf.resize(std::min<uint64_t>(resp.length(), len));
  return buf;
}

// Reads every member's copy of a chunk of `size` bytes and compares them
// byte for byte; the offset of the first byte that differs, or nullopt.
Result<std::optional<uint64_t>> first_difference(const std::vector<Member>& members,
                                                 const pb::Chain& chain, const Key& k,
                                                 uint64_t size) {
  for (uint64_t off = 0; off < size; off += kReadBytes) {
    const uint64_t len = std::min(kReadBytes, size - off);
    SURGE_ASSIGN_OR_RETURN(std::string first, read_copy(members[0], chain, k, off, len));
    for (size_t i = 1; i < members.size(); ++i) {
      SURGE_ASSIGN_OR_RETURN(std::string other, read_copy(members[i], chain, k, off, len));
      const size_t n = std::min(first.size(), other.size());
      for (size_t b = 0; b < n; ++b) {
        if (first[b] != other[b]) return std::optional<uint64_t>(off + b);
      }
      if (first.size() != other.size()) return std::optional<uint64_t>(off + n);
    }
  }
  return std::optional<uint64_t>();
}

// "" when every copy agrees, else what differs first. A chunk no member
// holds any more agrees: it was removed (a removal or truncate intent the
// MDS's leader applies in the background) between the listings.
std::string difference(const std::vector<ChunkCopy>& copies) {
  size_t present = 0;
  for (const auto& c : copies) present += c.present ? 1 : 0;
  if (present == 0) return "";
  if (present != copies.size()) return "missing";
  for (const auto& c : copies) {
    if (c.incomplete) return "incomplete";
  }
  const ChunkCopy& a = copies.front();
  for (const auto& c : copies) {
    if (c.version != a.version) return "version";
  }
  for (const auto& c : copies) {
    if (c.size != a.size) return "size";
  }
  for (const auto& c : copies) {
    if (c.crc32c != a.crc32c) return "crc";
  }
  return "";
}

// How many times a chunk found to differ is listed and compared again
// before the difference is reported as it then stands.
constexpr int kMaxAttempts = 3;
// How long a chunk found to differ (or refused to a read) is left before
// it is listed again: an update in flight (a removal or truncate the MDS
// applies at the head, which forwards it) ends well within it, while a
// real difference stays.
constexpr std::chrono::milliseconds kSettlePause{200};

// The chunk listed again on every member, one after another.
Result<std::vector<ChunkCopy>> list_again(const std::vector<Member>& members,
                                          const pb::Chain& chain, const Key& k) {
  std::vector<ChunkCopy> copies;
  for (const auto& m : members) {
    SURGE_ASSIGN_OR_RETURN(auto one, list_one(m, chain, k));
    copies.push_back(copy_of(m, one ? &*one : nullptr));
  }
  return copies;
}

bool same_states(const std::vector<ChunkCopy>& a, const std::vector<ChunkCopy>& b) {
  auto state = [](const ChunkCopy& c) {
    return std::tie(c.present, c.version, c.committed_version, c.size, c.crc32c, c.incomplete);
  };
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (state(a[i]) != state(b[i])) return false;
  }
  return true;
}

}  // namespace

bool is_replicated(const pb::Chain& chain) {
  return chain.scheme() == pb::SCHEME_REPLICAS && chain.replicas() >= 2;
}

std::string chain_text(const ChainCompareResult& r) {
  std::string ids;
  for (uint32_t id : r.members) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
  std::string s = "chain " + std::to_string(r.chain_id) + " version " +
                  std::to_string(r.chain_version) + " (serving targets " + ids + "): ";
  if (r.corrupt) return s + "CORRUPT COPY: " + r.error + "\n";
  if (!r.compared) return s + "NOT COMPARED: " + r.error + "\n";
  s += std::to_string(r.chunks_compared) + " chunks, " + std::to_string(r.bytes_compared) +
       " bytes compared (" + std::to_string(r.bytes_read) + " read), " +
       std::to_string(r.mismatches.size()) + " differ\n";
  for (const auto& m : r.mismatches) {
    s += "  replicas differ (" + m.what + "): chunk " + chunk_name(m) + " of chain " +
         std::to_string(r.chain_id);
    if (m.what == "bytes") s += " first at byte " + std::to_string(m.first_differing_byte);
    s += ":";
    for (const auto& c : m.copies) {
      char buf[256];
      if (!c.present) {
        std::snprintf(buf, sizeof buf, " target %u %s: missing;", c.target_id, c.address.c_str());
      } else {
        std::snprintf(buf, sizeof buf,
                      " target %u %s: version %llu (committed %llu) size %llu crc32c %08x%s;",
                      c.target_id, c.address.c_str(), static_cast<unsigned long long>(c.version),
                      static_cast<unsigned long long>(c.committed_version),
                      static_cast<unsigned long long>(c.size), c.crc32c,
                      c.incomplete ? " incomplete" : "");
      }
      s += buf;
    }
    s.pop_back();
    s += "\n";
  }
  return s;
}

std::string chunk_name(const ReplicaMismatch& m) {
  return "ino " + std::to_string(m.ino) + " slot " + std::to_string(m.slot) + " position " +
         std::to_string(m.position);
}

ChainCompareResult compare_chain(const pb::Chain& chain, const pb::ClusterMap& map,
                                 const std::string& cluster_key,
                                 std::chrono::milliseconds call_timeout, bool compare_bytes) {
  ChainCompareResult r;
  r.chain_id = chain.chain_id();
  r.chain_version = chain.version();
  const std::string what = "chain " + std::to_string(chain.chain_id());
  std::vector<Member> members;
  for (const auto& cm : chain.members()) {
    if (cm.state() != pb::MEMBER_SERVING) continue;
    Member m;
    m.target_id = cm.target_id();
    for (const auto& t : map.targets()) {
      if (t.target_id() == cm.target_id()) m.address = t.address();
    }
    r.members.push_back(m.target_id);
    members.push_back(std::move(m));
  }
  if (members.size() < 2) {
    r.error = what + " has " + std::to_string(members.size()) +
              " serving members: no replicas to compare";
    return r;
  }
  net::ChannelOptions o;
  o.cluster_key = cluster_key;
  o.connect_timeout = std::chrono::milliseconds(5000);
  o.call_timeout = call_timeout;
  std::vector<std::map<Key, ods::ChunkState>> lists;
  for (auto& m : members) {
    if (m.address.empty()) {
      r.error = what + ": member " + std::to_string(m.target_id) + " is not in the map's targets";
      return r;
    }
    auto ch = net::RpcChannel::Connect(m.address, o);
    if (!ch.ok()) {
      r.error = "cannot connect to " + m.who() + " to compare " + what + ": " +
                ch.status().ToString();
      return r;
    }
    m.channel = std::move(*ch);
    auto l = list_all(m, chain);
    if (!l.ok()) {
      r.error = l.status().ToString();
      r.corrupt = l.status().code() == Code::kCorruption;
      return r;
    }
    lists.push_back(std::move(*l));
  }
  std::set<Key> keys;  // the union of every member's chunks
  for (const auto& l : lists) {
    for (const auto& entry : l) keys.insert(entry.first);
  }
  for (const Key& k : keys) {
    std::vector<ChunkCopy> copies;
    for (size_t i = 0; i < members.size(); ++i) {
      auto it = lists[i].find(k);
      copies.push_back(copy_of(members[i], it == lists[i].end() ? nullptr : &it->second));
    }
    ++r.chunks_compared;
    std::string diff;
    uint64_t at = 0;  // the first byte that differs, when diff is "bytes"
    for (int attempt = 0;; ++attempt) {
      diff = difference(copies);
      at = 0;
      bool changed_under_read = false;
      if (diff.empty() && compare_bytes && copies.front().size > 0) {
        auto d = first_difference(members, chain, k, copies.front().size);
        // A member that is not the chain's last serving one refuses a read
        // an update overlaps (ChunkDirty): the chunk is being written (a
        // roll-forward or resync after a failure goes on after clients
        // stop), not inconsistent. List it again, as for a change.
        changed_under_read =
            !d.ok() && d.status().code() == Code::kChunkDirty && attempt < kMaxAttempts;
        if (!d.ok() && !changed_under_read) {
          r.error = d.status().ToString();
          r.corrupt = d.status().code() == Code::kCorruption;
          return r;
        }
        if (d.ok()) {
          r.bytes_read += copies.front().size * members.size();
          if (*d) {
            diff = "bytes";
            at = **d;
          }
        }
      }
      if ((diff.empty() && !changed_under_read) || attempt == kMaxAttempts) break;
      // The chunk may have changed between the listing and now (a write,
      // or a removal or truncate the MDS's leader applies in the
      // background, even on a quiet cluster): after a pause, list it again
      // on every member, close together. A difference is reported only
      // when two listings in a row agree on every copy's state. Without
      // the pause a removal the head had done and its successor not yet
      // was listed twice in that state and reported (a stress run here).
      std::this_thread::sleep_for(kSettlePause);
      auto again = list_again(members, chain, k);
      if (!again.ok()) {
        r.error = again.status().ToString();
        r.corrupt = again.status().code() == Code::kCorruption;
        return r;
      }
      if (!changed_under_read && same_states(*again, copies)) break;
      copies = std::move(*again);
    }
    for (const auto& c : copies) r.bytes_compared += c.size;
    if (diff.empty()) continue;
    ReplicaMismatch mm;
    mm.first_differing_byte = at;
    std::tie(mm.ino, mm.slot, mm.position) = k;
    mm.what = std::move(diff);
    mm.copies = std::move(copies);
    r.mismatches.push_back(std::move(mm));
  }
  r.compared = true;
  return r;
}

}  // namespace surge::tools
