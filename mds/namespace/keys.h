// Key encoding of the namespace in the KvStore. Integers are big-endian so
// byte order is numeric order and a directory's entries are one contiguous
// range.
//
//   inodes:   ino(8)                          -> InodeRecord
//   dentries: parent(8) cookie(8) name        -> child(8) type(4)
//   xattrs:   ino(8) name                     -> value
//   system:   "fs_id" "format" "ino_hwm" "target_hwm" "map_version"
//             "t/" target(4)                  -> TargetInfo
//             "o/" ino(8)                     -> "" (orphan list)
//             "s/" sid(8)                     -> SessionRecord
//             "so/" sid(8) ino(8)             -> open count (4, big-endian)
//             "os/" ino(8) sid(8)             -> "" (the same open, by inode)
//
// A dentry's cookie is a 63-bit hash of its name (>= 3): entries of a
// directory are ordered by cookie, so "resume after cookie C" is a key
// position that stays meaningful while entries come and go. Two names with
// the same 63-bit hash would share a position (resuming between them could
// skip the second); at 2^-63 per pair this is accepted.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace surge::mds::keys {

void put_be64(std::string& out, uint64_t v);
void put_be32(std::string& out, uint32_t v);
uint64_t get_be64(std::string_view in);  // in.size() >= 8
uint32_t get_be32(std::string_view in);  // in.size() >= 4

uint64_t name_cookie(std::string_view name);

std::string inode(uint64_t ino);
std::string dentry(uint64_t parent, std::string_view name);
// First key of parent's entries with cookie >= c.
std::string dentry_from(uint64_t parent, uint64_t cookie);
// One past the last key of parent's entries.
std::string dentry_end(uint64_t parent);
std::string xattr(uint64_t ino, std::string_view name);
std::string xattr_end(uint64_t ino);

struct DentryValue {
  uint64_t child = 0;
  uint32_t type = 0;  // S_IFMT bits
};
std::string encode_dentry(const DentryValue& d);
bool decode_dentry(std::string_view v, DentryValue* d);
// Parent, cookie and name out of a dentry key.
bool decode_dentry_key(std::string_view k, uint64_t* parent, uint64_t* cookie,
                       std::string_view* name);

inline constexpr std::string_view kFsId = "fs_id";
inline constexpr std::string_view kFormat = "format";
inline constexpr std::string_view kInoHwm = "ino_hwm";
inline constexpr std::string_view kTargetHwm = "target_hwm";
inline constexpr std::string_view kMapVersion = "map_version";
inline constexpr std::string_view kTargetPrefix = "t/";
inline constexpr std::string_view kTargetEnd = "t0";  // '0' == '/' + 1
inline constexpr std::string_view kOrphanPrefix = "o/";
inline constexpr std::string_view kOrphanEnd = "o0";
std::string target(uint32_t id);
std::string orphan(uint64_t ino);
// Truncates not yet applied on the data servers: ino -> TruncateIntent.
inline constexpr std::string_view kTruncateIntentPrefix = "ti/";
inline constexpr std::string_view kTruncateIntentEnd = "ti0";
std::string truncate_intent(uint64_t ino);
// The chain table (ChainTable): chain id -> Chain record, its version and
// the chain id high-water mark.
inline constexpr std::string_view kChainPrefix = "c/";
inline constexpr std::string_view kChainEnd = "c0";
inline constexpr std::string_view kChainVersion = "chain_version";
inline constexpr std::string_view kChainHwm = "chain_hwm";
std::string chain(uint32_t id);
// Done ops (see Namespace::op_done): op id -> when, and when + op id -> "".
inline constexpr std::string_view kDoneOpPrefix = "r/";
inline constexpr std::string_view kDoneOpByTimePrefix = "rt/";
std::string done_op(uint64_t op_id);
std::string done_op_by_time(uint64_t when_ns, uint64_t op_id);
// The elected MDS leader's address, and one key per serving MDS (its
// address), each under its MDS's etcd lease (etcd_leader.h).
inline constexpr std::string_view kMdsLeader = "mds_leader";
inline constexpr std::string_view kMdsMemberPrefix = "mds_member/";
// Client sessions and the files they hold open (cluster/session_table.h).
inline constexpr std::string_view kSessionPrefix = "s/";
inline constexpr std::string_view kSessionEnd = "s0";
inline constexpr std::string_view kSessionOpenPrefix = "so/";
inline constexpr std::string_view kSessionOpenEnd = "so0";
inline constexpr std::string_view kOpenPrefix = "os/";
inline constexpr std::string_view kOpenEnd = "os0";
std::string session(uint64_t sid);
std::string session_open(uint64_t sid, uint64_t ino);
std::string session_opens_end(uint64_t sid);  // one past sid's "so/" keys
std::string open_by(uint64_t ino, uint64_t sid);
std::string opens_of_end(uint64_t ino);  // one past ino's "os/" keys

}  // namespace surge::mds::keys
