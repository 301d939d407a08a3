// MountPath: turns what an admin types after `setstripe` / `getstripe` into
// a path in the Surge namespace. Either a path under a mounted Surge file
// system (a FUSE mount of type fuse.surge, found in /proc/self/mountinfo):
// the mount point is stripped, so /mnt/surge/a/b names /a/b; or a path in
// the namespace itself ("/a/b"). A relative path is taken relative to the
// working directory and must lie under a Surge mount.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace surge::tools {

struct SurgeMount {
  std::string mount_point;  // as the kernel shows it, escapes decoded
  std::string source;       // "surge:tcp://host:port"
};

// The Surge mounts listed in a mountinfo text (proc(5) format).
std::vector<SurgeMount> surge_mounts(const std::string& mountinfo);

// What the typed path resolves to.
struct ResolvedPath {
  std::string ns_path;      // the path inside the Surge namespace
  std::string mount_point;  // the mount it was under; "" when typed as a namespace path
};

// Resolves `typed` against the mounts in `mountinfo`, with `cwd` for a
// relative path. An absolute path under a Surge mount (lexically, or once
// symlinks are resolved) is stripped of its mount point; any other absolute
// path is taken as a namespace path. A relative path under no Surge mount
// is InvalidArgument naming it.
Result<ResolvedPath> resolve_surge_path(const std::string& typed, const std::string& mountinfo,
                                        const std::string& cwd);

// resolve_surge_path with this process's /proc/self/mountinfo and cwd.
Result<ResolvedPath> resolve_surge_path(const std::string& typed);

// The error for a path that is neither in the namespace nor under a mount:
// names the path and the Surge mounts there are.
Status not_a_surge_path(const std::string& typed, const Status& lookup);

}  // namespace surge::tools
