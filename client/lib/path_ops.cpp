// The path-level half of surge::Client: walks "/a/b/c" one lookup at a time
// from the root with the caller's credentials (so search permission is
// checked on every directory), then calls the inode-level operation.
// Symbolic links inside a path are not followed (the FUSE mount gets that
// from the kernel; native callers pass resolved paths).
#include <fcntl.h>
#include <unistd.h>

#include <vector>

#include "surge/client.h"

namespace surge {

namespace {

std::vector<std::string_view> components(std::string_view path) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    size_t j = i;
    while (j < path.size() && path[j] != '/') ++j;
    if (j > i) {
      std::string_view c = path.substr(i, j - i);
      if (c != ".") out.push_back(c);
    }
    i = j;
  }
  return out;
}

// "'path' rest": built by append, which also keeps GCC 12's -Wrestrict
// false positive on `"'" + std::string(...)` quiet.
std::string quoted(std::string_view path, std::string_view rest) {
  std::string s;
  s.reserve(path.size() + rest.size() + 3);
  s.append("'").append(path).append("' ").append(rest);
  return s;
}

}  // namespace

Caller Caller::Current() {
  Caller c;
  c.uid = geteuid();
  c.gid = getegid();
  int n = getgroups(0, nullptr);
  if (n > 0) {
    std::vector<gid_t> g(static_cast<size_t>(n));
    n = getgroups(n, g.data());
    for (int i = 0; i < n; ++i) c.groups.push_back(g[static_cast<size_t>(i)]);
  }
  return c;
}

Result<Attr> Client::resolve(std::string_view path, const Caller& c) {
  std::vector<Attr> stack;
  SURGE_ASSIGN_OR_RETURN(Attr cur, getattr(kRootIno, c));
  for (std::string_view name : components(path)) {
    if (name == "..") {
      if (!stack.empty()) {
        cur = stack.back();
        stack.pop_back();
      }
      continue;
    }
    auto next = lookup(cur.ino, name, c);
    if (!next.ok()) {
      return next.status().WithContext(quoted(path, "(resolving)"));
    }
    stack.push_back(cur);
    cur = *next;
  }
  return cur;
}

Result<std::pair<Ino, std::string>> Client::resolve_parent(std::string_view path,
                                                           const Caller& c) {
  auto parts = components(path);
  if (parts.empty()) {
    return Status::InvalidArgument(quoted(path, "has no last component"));
  }
  std::string last(parts.back());
  if (last == "..") return Status::InvalidArgument(quoted(path, "ends in .."));
  std::string_view dir = path.substr(0, path.rfind(last));
  SURGE_ASSIGN_OR_RETURN(Attr parent, resolve(dir, c));
  if ((parent.mode & S_IFMT) != S_IFDIR) {
    return Status(Code::kNotDirectory, quoted(dir, "is not a directory"));
  }
  return std::make_pair(parent.ino, last);
}

Result<Attr> Client::stat(std::string_view path, const Caller& c) { return resolve(path, c); }

Result<FileRef> Client::open(std::string_view path, int flags, uint32_t mode, const Caller& c) {
  if (flags & O_CREAT) {
    SURGE_ASSIGN_OR_RETURN(auto pn, resolve_parent(path, c));
    return create(pn.first, pn.second, mode, flags, c, nullptr);
  }
  SURGE_ASSIGN_OR_RETURN(Attr a, resolve(path, c));
  if ((a.mode & S_IFMT) == S_IFDIR && (flags & O_ACCMODE) != O_RDONLY) {
    return Status(Code::kIsDirectory, quoted(path, "is a directory"));
  }
  return open(a.ino, flags, c, nullptr);
}

Status Client::mkdir(std::string_view path, uint32_t mode, const Caller& c) {
  SURGE_ASSIGN_OR_RETURN(auto pn, resolve_parent(path, c));
  return mkdir(pn.first, pn.second, mode, c).status();
}

Status Client::unlink(std::string_view path, const Caller& c) {
  SURGE_ASSIGN_OR_RETURN(auto pn, resolve_parent(path, c));
  return unlink(pn.first, pn.second, c);
}

Status Client::rmdir(std::string_view path, const Caller& c) {
  SURGE_ASSIGN_OR_RETURN(auto pn, resolve_parent(path, c));
  return rmdir(pn.first, pn.second, c);
}

Status Client::rename(std::string_view from, std::string_view to, uint32_t flags,
                      const Caller& c) {
  SURGE_ASSIGN_OR_RETURN(auto a, resolve_parent(from, c));
  SURGE_ASSIGN_OR_RETURN(auto b, resolve_parent(to, c));
  return rename(a.first, a.second, b.first, b.second, flags, c);
}

Status Client::link(std::string_view existing, std::string_view new_path, const Caller& c) {
  SURGE_ASSIGN_OR_RETURN(Attr a, resolve(existing, c));
  SURGE_ASSIGN_OR_RETURN(auto pn, resolve_parent(new_path, c));
  return link(a.ino, pn.first, pn.second, c).status();
}

Status Client::symlink(std::string_view target, std::string_view link_path, const Caller& c) {
  SURGE_ASSIGN_OR_RETURN(auto pn, resolve_parent(link_path, c));
  return symlink(pn.first, pn.second, target, c).status();
}

Status Client::truncate(std::string_view path, uint64_t size, const Caller& c) {
  SURGE_ASSIGN_OR_RETURN(Attr a, resolve(path, c));
  SetAttr sa;
  sa.mask = kSetSize;
  sa.size = size;
  return setattr(a.ino, sa, c).status();
}

Result<std::vector<DirEntry>> Client::list(std::string_view path, const Caller& c) {
  SURGE_ASSIGN_OR_RETURN(Attr d, resolve(path, c));
  std::vector<DirEntry> all;
  uint64_t cookie = 0;
  for (;;) {
    SURGE_ASSIGN_OR_RETURN(DirPage page, readdir(d.ino, cookie, 1024, c));
    for (auto& e : page.entries) {
      cookie = e.cookie;
      all.push_back(std::move(e));
    }
    if (page.eof || page.entries.empty()) break;
  }
  return all;
}

}  // namespace surge
