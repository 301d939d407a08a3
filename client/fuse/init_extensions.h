// InitExtensions: asks the kernel, at FUSE_INIT, for what Debian 12's
// libfuse 3.14 cannot name. Today that is FUSE_DIRECT_IO_ALLOW_MMAP (Linux
// 6.6+): files opened with direct IO may still be mapped MAP_SHARED, through
// the page cache, so surge-fuse can open read-write files direct (no copy
// into page-cache pages on write) without breaking mmap.
//
// It works through libfuse's custom-IO hook: reads and writes of /dev/fuse
// pass through here unchanged, except the INIT reply, whose flags2 gets the
// bit when the kernel offered it. Whether it was granted is known once the
// reply has gone out (before any open can arrive).
#pragma once

#include <fuse_lowlevel.h>

namespace surge::fuse {

// Installs the hook on a mounted session (after fuse_session_mount). False
// when libfuse refused it; the mount then runs without the extensions.
bool install_init_extensions(fuse_session* se);

// Whether the kernel accepted FUSE_DIRECT_IO_ALLOW_MMAP on this mount.
bool direct_io_mmap_granted();

}  // namespace surge::fuse
