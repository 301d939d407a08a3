// POSIX permission checks as Linux applies them: owner, then group (primary
// or supplementary), then other; uid 0 may read and write anything and
// execute anything with at least one x bit (directories: always search).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>

#include "common/status.h"
#include "mds/namespace/records.pb.h"
#include "net/proto/mds.pb.h"

namespace surge::mds {

inline constexpr uint32_t kMayRead = 4;
inline constexpr uint32_t kMayWrite = 2;
inline constexpr uint32_t kMayExec = 1;

inline bool in_group(const proto::mds::Credentials& c, uint32_t gid) {
  if (c.gid() == gid) return true;
  for (uint32_t g : c.groups()) {
    if (g == gid) return true;
  }
  return false;
}

inline bool is_owner_or_root(const proto::mds::Credentials& c, const records::StoredAttr& a) {
  return c.uid() == 0 || c.uid() == a.uid();
}

// PermissionDenied naming the inode when any bit of mask is not granted.
inline Status check_access(const proto::mds::Credentials& c, const records::StoredAttr& a,
                           uint32_t mask, const char* what) {
  mask &= 7;
  if (mask == 0) return Status::OK();
  const uint32_t mode = a.mode();
  if (c.uid() == 0) {
    // Root: exec needs some x bit unless it is a directory.
    if ((mask & kMayExec) == 0 || S_ISDIR(mode) || (mode & 0111) != 0) return Status::OK();
  } else {
    uint32_t bits;
    if (c.uid() == a.uid()) {
      bits = (mode >> 6) & 7;
    } else if (in_group(c, a.gid())) {
      bits = (mode >> 3) & 7;
    } else {
      bits = mode & 7;
    }
    if ((bits & mask) == mask) return Status::OK();
  }
  return Status::PermissionDenied(std::string(what) + ": uid " + std::to_string(c.uid()) +
                                  " lacks access " + std::to_string(mask) + " to inode " +
                                  std::to_string(a.ino()) + " (mode " +
                                  std::to_string(mode & 07777) + ")");
}

// The mode without setuid, and without setgid where group-execute is set
// (setgid without it means mandatory locking and stays): what a chown, or a
// write or truncate by a process without CAP_FSETID, leaves.
inline uint32_t without_suidgid(uint32_t mode) {
  mode &= ~static_cast<uint32_t>(S_ISUID);
  if ((mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP)) mode &= ~static_cast<uint32_t>(S_ISGID);
  return mode;
}

// Sticky directory: only the owner of the entry, of the directory, or root
// may remove or rename it.
inline Status check_sticky(const proto::mds::Credentials& c, const records::StoredAttr& dir,
                           const records::StoredAttr& victim, const char* what) {
  if ((dir.mode() & S_ISVTX) == 0 || c.uid() == 0 || c.uid() == dir.uid() ||
      c.uid() == victim.uid()) {
    return Status::OK();
  }
  return Status::NotPermitted(std::string(what) + ": directory " + std::to_string(dir.ino()) +
                              " is sticky and uid " + std::to_string(c.uid()) +
                              " owns neither it nor inode " + std::to_string(victim.ino()));
}

}  // namespace surge::mds
