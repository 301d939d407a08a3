// InitExtensions: asks the kernel, at FUSE_INIT, for what Debian 12's
// libfuse 3.14 cannot name or chooses otherwise:
//   * FUSE_DIRECT_IO_ALLOW_MMAP (Linux 6.6+): files opened with direct IO
//     may still be mapped MAP_SHARED, through the page cache, so surge-fuse
//     can open files direct (no copy into page-cache pages) without
//     breaking mmap;
//   * 512 pages per request where libfuse asks for max_write's 256: a 1 MiB
//     read into memory that is not page-aligned spans 257 pages, which the
//     kernel would split into two requests (it clamps this to
//     fs.fuse.max_pages_limit; the max_read mount option still caps a
//     request at 1 MiB);
//   * FUSE_HANDLE_KILLPRIV_V2 (Linux 5.12+): the kernel leaves clearing
//     setuid/setgid to us and flags the requests whose caller lacks
//     CAP_FSETID (kill_privs.h).
//
// It works through libfuse's custom-IO hook: reads and writes of /dev/fuse
// pass through here unchanged, except the INIT reply, which is changed in
// place. Whether direct-IO mmap was granted is known once the reply has
// gone out (before any open can arrive).
#pragma once

#include <fuse_lowlevel.h>

namespace surge::fuse {

// Installs the hook on a mounted session (after fuse_session_mount). False
// when libfuse refused it; the mount then runs without the extensions.
bool install_init_extensions(fuse_session* se);

// Whether the kernel accepted FUSE_DIRECT_IO_ALLOW_MMAP on this mount.
bool direct_io_mmap_granted();

// Whether the kernel's INIT offered FUSE_HANDLE_KILLPRIV_V2 (known before
// the init operation runs); the reply then asks for it.
bool killpriv_v2_offered();

}  // namespace surge::fuse
