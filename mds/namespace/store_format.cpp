// StoreFormat: see store_format.h.
#include "mds/namespace/store_format.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/log.h"
#include "mds/namespace/keys.h"
#include "mds/namespace/records.pb.h"

namespace surge::mds {

namespace {

constexpr size_t kBatch = 1024;

// Format 1 -> 2: the encodings agree field for field, so this only stamps
// each record and makes a file layout's format explicit.
Status migrate_1_to_2(KvStore* kv) {
  std::vector<std::pair<std::string, std::string>> pending;
  uint64_t migrated = 0;
  Status bad;
  auto flush = [&]() -> Status {
    if (pending.empty()) return Status::OK();
    KvBatch b;
    for (auto& [k, v] : pending) b.put(Space::kInodes, std::move(k), std::move(v));
    pending.clear();
    return kv->commit(b);
  };
  SURGE_RETURN_IF_ERROR(kv->scan(Space::kInodes, "", "", [&](std::string_view k, std::string_view v) {
    records::InodeRecord r;
    if (!r.ParseFromArray(v.data(), static_cast<int>(v.size()))) {
      bad = Status::Corruption("migrating the store to format 2: unreadable inode record of " +
                               std::to_string(k.size() == 8 ? keys::get_be64(k) : 0));
      return false;
    }
    if (r.format_version() >= kRecordFormatVersion) return true;
    r.set_format_version(kRecordFormatVersion);
    if (r.attr().has_layout() && r.attr().layout().format() == 0) {
      r.mutable_attr()->mutable_layout()->set_format(1);
    }
    pending.emplace_back(std::string(k), r.SerializeAsString());
    ++migrated;
    if (pending.size() >= std::min(kBatch, kv->max_batch_ops())) {
      bad = flush();
      if (!bad.ok()) return false;
    }
    return true;
  }));
  SURGE_RETURN_IF_ERROR(bad);
  SURGE_RETURN_IF_ERROR(flush());
  KvBatch b;
  b.put(Space::kSystem, std::string(keys::kFormat), std::string(kStoreFormat));
  SURGE_RETURN_IF_ERROR(kv->commit(b));
  SLOG_INFO("metadata store migrated from format 1 to 2 ({} inode records)", migrated);
  return Status::OK();
}

}  // namespace

Status migrate_store(KvStore* kv, std::string_view format) {
  if (format == kStoreFormat) return Status::OK();
  if (format == "1") return migrate_1_to_2(kv).WithContext("migrating the metadata store");
  return Status::Corruption("metadata store has format '" + std::string(format) +
                            "', this surge-mds reads '1' and '" + std::string(kStoreFormat) + "'");
}

}  // namespace surge::mds
