// The namespace's store by configuration; see open_store.h.
#include "mds/daemon/open_store.h"

#include "mds/daemon/data_dir.h"
#include "mds/kv/etcd/etcd_kv_store.h"
#include "mds/kv/etcd/etcd_leader.h"
#include "mds/namespace/keys.h"
#include "mds/namespace/namespace.h"

namespace surge::mds {

namespace {

uint64_t parse_fs_id(const std::string& hex) {
  return hex.empty() ? 0 : std::stoull(hex, nullptr, 16);
}

std::vector<std::string> split_endpoints(const std::string& list) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    std::string ep = list.substr(pos, end - pos);
    const size_t b = ep.find_first_not_of(" \t"), e = ep.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(ep.substr(b, e - b + 1));
    pos = end + 1;
  }
  return out;
}

Result<OpenedStore> open_etcd(const MdsConfig& cfg, bool allow_format) {
  EtcdKvOptions o;
  o.endpoints = split_endpoints(cfg.etcd_endpoints);
  o.prefix = cfg.etcd_prefix;
  o.deadline = std::chrono::milliseconds(cfg.etcd_deadline_ms);
  o.election_wait = std::chrono::milliseconds(cfg.etcd_election_wait_ms);
  o.max_txn_ops = cfg.etcd_max_txn_ops;
  o.max_request_bytes = cfg.etcd_max_request_bytes;
  OpenedStore out;
  out.where = "etcd " + cfg.etcd_endpoints + " prefix " + cfg.etcd_prefix;
  auto kv = EtcdKvStore::Open(o);
  if (!kv.ok()) return kv.status().WithContext(out.where);
  auto had = (*kv)->get(Space::kSystem, keys::kFsId);
  if (!had.ok()) return had.status().WithContext("opening the namespace");
  if (!had->has_value() && !allow_format) {
    return Status::NotFound(out.where + " holds no file system");
  }
  auto id = Namespace::FormatOrLoad(kv->get(), parse_fs_id(cfg.expect_fs_id));
  if (!id.ok()) return id.status().WithContext(out.where);
  out.fs_id = *id;
  out.formatted = !had->has_value();
  EtcdLeaderOptions lo;
  lo.endpoints = o.endpoints;
  lo.key = (*kv)->etcd_key(Space::kSystem, keys::kMdsLeader);
  lo.members_prefix = (*kv)->etcd_key(Space::kSystem, keys::kMdsMemberPrefix);
  lo.ttl = std::chrono::seconds(cfg.etcd_leader_ttl_s);
  lo.deadline = o.deadline;
  auto leader = EtcdLeader::Create(lo);
  if (!leader.ok()) return leader.status().WithContext(out.where);
  out.leadership = std::move(*leader);
  out.kv = std::move(*kv);
  return out;
}

}  // namespace

Result<OpenedStore> open_store(const MdsConfig& cfg, bool allow_format) {
  if (cfg.backend == "etcd") return open_etcd(cfg, allow_format);
  DataDirOptions d;
  d.path = cfg.data_dir;
  d.allow_format = allow_format;
  d.expect_fs_id = parse_fs_id(cfg.expect_fs_id);
  d.sync = cfg.sync;
  d.block_cache_bytes = cfg.block_cache_mb << 20;
  d.memtable_bytes = cfg.memtable_mb << 20;
  auto dd = open_data_dir(d);
  if (!dd.ok()) return dd.status();
  OpenedStore out;
  out.rocks = dd->kv.get();
  out.kv = std::move(dd->kv);
  out.fs_id = dd->fs_id;
  out.formatted = dd->formatted;
  out.where = "data dir " + cfg.data_dir;
  out.leadership = std::make_unique<SoleLeader>();
  return out;
}

}  // namespace surge::mds
