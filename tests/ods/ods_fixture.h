// Shared pieces of the surge-ods tests that run the daemon: a cluster key,
// the daemon started on a data dir, and a small typed client over
// RpcChannel that sends CRCs with writes and checks them on reads.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "net/cluster_key.h"
#include "net/proto/ods_methods.h"
#include "net/proto/ods_write_pieces.h"
#include "net/rpc_channel.h"
#include "tests/ods/daemon_process.h"
#include "tests/ods/test_dir.h"

namespace surge::ods::testing {

namespace pb = surge::proto::ods;

inline std::string make_key(const TempDir& dir) {
  std::string path = dir.path() + "/cluster.key";
  Status st = net::generate_cluster_key(path);
  if (!st.ok()) throw std::runtime_error(st.ToString());
  return path;
}

inline std::string key_of(const std::string& path) {
  auto k = net::load_cluster_key(path);
  if (!k.ok()) throw std::runtime_error(k.status().ToString());
  return *k;
}

// Starts surge-ods without an MDS on data_dir; returns its address.
inline std::string start_ods(DaemonProcess& p, const std::string& data_dir, const std::string& key_file,
                             const std::string& log, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--data-dir", data_dir, "--listen", listen_address(), "--mds", "",
                                   "--cluster-key-file", key_file, "--log-level", "info",
                                   "--pool-1m-buffers", "16", "--pool-64k-buffers", "64"};
  args.insert(args.end(), extra.begin(), extra.end());
  return address_of(p.start(build_dir() + "/ods/surge-ods", args, log));
}

inline std::vector<std::byte> pattern(size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<std::byte>(x);
  }
  return v;
}

class OdsClient {
 public:
  OdsClient(const std::string& address, const std::string& key,
            std::chrono::milliseconds call_timeout = std::chrono::milliseconds(30000)) {
    net::ChannelOptions o;
    o.cluster_key = key;
    o.call_timeout = call_timeout;
    auto ch = net::RpcChannel::Connect(address, o);
    if (!ch.ok()) throw std::runtime_error("connect " + address + ": " + ch.status().ToString());
    ch_ = *ch;
  }

  Result<uint64_t> write(uint64_t id, uint64_t off, std::span<const std::byte> data, bool sync = false) {
    pb::WriteRequest q;
    q.set_object_id(id);
    q.set_offset(off);
    q.set_length(data.size());
    pb::set_piece_crcs(q, data.data(), data.size());
    q.set_sync(sync);
    net::BulkRegion r{const_cast<std::byte*>(data.data()), data.size(), net::BulkAccess::kServerPull};
    pb::WriteReply a;
    SURGE_RETURN_IF_ERROR(ch_->call<pb::OdsWrite>(q, &a, {&r, 1}));
    return a.object_size();
  }

  // Reads and checks the reply's CRC against the bytes received.
  Result<std::vector<std::byte>> read(uint64_t id, uint64_t off, uint64_t len) {
    std::vector<std::byte> buf(len);
    SURGE_ASSIGN_OR_RETURN(uint64_t got, read_into(id, off, buf));
    buf.resize(got);
    return buf;
  }

  // The same into the caller's buffer (as a real client reads into its
  // user's memory); returns the length the server sent.
  Result<uint64_t> read_into(uint64_t id, uint64_t off, std::span<std::byte> buf) {
    pb::ReadRequest q;
    q.set_object_id(id);
    q.set_offset(off);
    q.set_length(buf.size());
    net::BulkRegion r{buf.data(), buf.size(), net::BulkAccess::kServerPush};
    pb::ReadReply a;
    SURGE_RETURN_IF_ERROR(ch_->call<pb::OdsRead>(q, &a, {&r, 1}));
    if (a.length() > buf.size()) return Status::ProtocolError("read reply longer than asked");
    if (surge::crc32c(buf.data(), a.length()) != a.crc32c()) {
      return Status::Corruption("read reply CRC does not match the bytes received");
    }
    return a.length();
  }

  Status sync(std::vector<uint64_t> ids) {
    pb::SyncRequest q;
    for (auto id : ids) q.add_object_ids(id);
    pb::SyncReply a;
    return ch_->call<pb::OdsSync>(q, &a);
  }

  // True when the object existed.
  Result<bool> remove(uint64_t id) {
    pb::RemoveRequest q;
    q.set_object_id(id);
    pb::RemoveReply a;
    SURGE_RETURN_IF_ERROR(ch_->call<pb::OdsRemove>(q, &a));
    return a.existed();
  }

  Result<uint64_t> stat(uint64_t id) {
    pb::StatRequest q;
    q.set_object_id(id);
    pb::StatReply a;
    SURGE_RETURN_IF_ERROR(ch_->call<pb::OdsStat>(q, &a));
    return a.size();
  }

  net::RpcChannel& channel() { return *ch_; }

 private:
  std::shared_ptr<net::RpcChannel> ch_;
};

}  // namespace surge::ods::testing
