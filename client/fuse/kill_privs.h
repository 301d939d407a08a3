// KillPrivs: setuid/setgid cleared the way Linux clears them, on a write or
// truncate by a process without CAP_FSETID (the owner included). The mount
// asks the kernel for FUSE_HANDLE_KILLPRIV_V2 (init_extensions.h): the
// kernel then leaves the clearing to us and says, per request, when the
// caller lacks CAP_FSETID: FUSE_WRITE_KILL_SUIDGID on a write,
// FATTR_KILL_SUIDGID on a truncate, FUSE_OPEN_KILL_SUIDGID on an O_TRUNC
// open. libfuse 3.14 passes none of these on, so they are read from the
// raw request the worker holds (fuse_loop.h). The MDS clears the bits
// (SETATTR_KILL_SUIDGID); a size change by a uid other than 0 clears them
// there anyway.
#pragma once

#include <sys/stat.h>

#include <cstdint>

namespace surge::fuse {

// Whether a write or truncate by a process without CAP_FSETID would change
// this mode: setuid, or setgid with group-execute.
inline bool has_killable_privs(uint32_t mode) {
  return (mode & S_ISUID) != 0 || (mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP);
}

// The kernel's kill flag on the request in hand (false off a loop worker,
// or when the request is not of that kind).
bool write_kills_privs();    // FUSE_WRITE
bool setattr_kills_privs();  // FUSE_SETATTR
bool open_kills_privs();     // FUSE_OPEN

}  // namespace surge::fuse
