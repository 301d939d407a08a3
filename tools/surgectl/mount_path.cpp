// MountPath: see mount_path.h.
#include "tools/surgectl/mount_path.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace surge::tools {

namespace fs = std::filesystem;

namespace {

// The surge-fuse mount is "-o subtype=surge": the kernel shows fuse.surge.
constexpr const char* kSurgeFsType = "fuse.surge";

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7' && s[i + 2] >= '0' && s[i + 2] <= '7' &&
        s[i + 3] >= '0' && s[i + 3] <= '7') {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The namespace path of p under mount point mp, or "" when p is not under it.
std::string strip(const fs::path& p, const std::string& mp) {
  const fs::path m = fs::path(mp).lexically_normal();
  auto pi = p.begin();
  for (auto mi = m.begin(); mi != m.end(); ++mi) {
    if (mi->empty()) continue;  // a trailing separator
    if (pi == p.end() || *pi != *mi) return "";
    ++pi;
  }
  std::string rest;
  for (; pi != p.end(); ++pi) {
    if (pi->empty() || *pi == ".") continue;
    rest += '/';
    rest += pi->string();
  }
  return rest.empty() ? "/" : rest;
}

// The deepest Surge mount p lies under (mounts stack: the last one wins
// among equals), or nullptr.
const SurgeMount* mount_of(const fs::path& p, const std::vector<SurgeMount>& mounts,
                           std::string* ns) {
  const SurgeMount* best = nullptr;
  size_t best_len = 0;
  for (const auto& m : mounts) {
    std::string rest = strip(p, m.mount_point);
    if (rest.empty()) continue;
    if (best == nullptr || m.mount_point.size() >= best_len) {
      best = &m;
      best_len = m.mount_point.size();
      *ns = rest;
    }
  }
  return best;
}

std::string mounts_text(const std::vector<SurgeMount>& mounts) {
  if (mounts.empty()) return "no Surge file system is mounted here";
  std::string s = "Surge mounts here:";
  for (const auto& m : mounts) {
    s += ' ';
    s += m.mount_point;
    s += " (";
    s += m.source;
    s += ')';
  }
  return s;
}

std::string read_mountinfo() {
  std::ifstream f("/proc/self/mountinfo");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

std::vector<SurgeMount> surge_mounts(const std::string& mountinfo) {
  // id parent major:minor root mount-point options [optional...] - fstype source super-options
  std::vector<SurgeMount> out;
  std::istringstream lines(mountinfo);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream w(line);
    std::vector<std::string> f;
    std::string tok;
    while (w >> tok) f.push_back(tok);
    size_t dash = 0;
    for (size_t i = 6; i < f.size(); ++i) {
      if (f[i] == "-") {
        dash = i;
        break;
      }
    }
    if (dash == 0 || dash + 1 >= f.size() || f[dash + 1] != kSurgeFsType) continue;
    SurgeMount m;
    m.mount_point = unescape(f[4]);
    m.source = dash + 2 < f.size() ? unescape(f[dash + 2]) : "";
    out.push_back(std::move(m));
  }
  return out;
}

Result<ResolvedPath> resolve_surge_path(const std::string& typed, const std::string& mountinfo,
                                        const std::string& cwd) {
  if (typed.empty()) return Status::InvalidArgument("empty path");
  const std::vector<SurgeMount> mounts = surge_mounts(mountinfo);
  const bool relative = typed[0] != '/';
  const fs::path abs = (relative ? fs::path(cwd) / typed : fs::path(typed)).lexically_normal();
  ResolvedPath r;
  std::string ns;
  if (const SurgeMount* m = mount_of(abs, mounts, &ns)) {
    r.ns_path = ns;
    r.mount_point = m->mount_point;
    return r;
  }
  // Through a symlink (or a relative path with ".." across a link)?
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(abs, ec);
  if (!ec) {
    if (const SurgeMount* m = mount_of(real, mounts, &ns)) {
      r.ns_path = ns;
      r.mount_point = m->mount_point;
      return r;
    }
  }
  if (relative) {
    return Status::InvalidArgument("path " + typed + " (" + abs.string() +
                                   ") is not under a Surge mount; " + mounts_text(mounts) +
                                   "; give a mount path or an absolute path in the Surge "
                                   "namespace");
  }
  r.ns_path = abs.string();
  return r;
}

Result<ResolvedPath> resolve_surge_path(const std::string& typed) {
  char buf[4096];
  const char* cwd = ::getcwd(buf, sizeof buf);
  return resolve_surge_path(typed, read_mountinfo(), cwd != nullptr ? cwd : "/");
}

Status not_a_surge_path(const std::string& typed, const Status& lookup) {
  return Status(lookup.code(),
                "path " + typed + " is neither under a Surge mount nor in the Surge namespace (" +
                    lookup.message() + "); " + mounts_text(surge_mounts(read_mountinfo())));
}

}  // namespace surge::tools
