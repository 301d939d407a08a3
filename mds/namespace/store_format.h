// StoreFormat: the version of the MDS's on-disk store (system key
// "format") and the migration of an older store, run when the MDS opens it,
// before anything is served (docs/redundancy.md, "The MDS's stored types").
//
//   "1": inode records embedded the wire Attr and Layout (before chains).
//   "2": inode records are records::StoredAttr / StoredLayout, stamped
//        format_version 2, layouts with an explicit format.
// Migration is idempotent (a crash midway reruns it) and commits in
// batches; the format key moves last.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/status.h"
#include "mds/kv/kv_store.h"

namespace surge::mds {

inline constexpr std::string_view kStoreFormat = "2";
inline constexpr uint32_t kRecordFormatVersion = 2;

// Brings the store at `format` up to kStoreFormat; Corruption for a format
// this MDS does not know (a newer one included), naming both.
Status migrate_store(KvStore* kv, std::string_view format);

}  // namespace surge::mds
