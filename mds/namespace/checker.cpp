// Namespace checker; see checker.h.
#include "mds/namespace/checker.h"

#include <sys/stat.h>

#include <set>
#include <unordered_map>

#include "mds/namespace/keys.h"
#include "mds/namespace/records.pb.h"
#include "net/proto/mds_methods.h"

namespace surge::mds {

namespace {
struct Node {
  uint32_t mode = 0;
  uint32_t nlink = 0;
  uint64_t parent = 0;
  uint32_t links = 0;         // entries pointing here
  uint32_t subdirs = 0;       // entries here that are directories
  uint64_t entry_parent = 0;  // directory holding the (last) entry seen
};
constexpr size_t kMaxProblems = 1000;
}  // namespace

std::string CheckReport::summary() const {
  std::string s = std::to_string(inodes) + " inodes, " + std::to_string(dentries) + " entries, " +
                  std::to_string(orphans) + " orphans, " + std::to_string(xattrs) + " xattrs: ";
  s += clean() ? "clean" : std::to_string(problems.size()) + " problem(s)";
  return s;
}

Result<CheckReport> check_namespace(KvStore* kv) {
  CheckReport rep;
  auto problem = [&](std::string p) {
    if (rep.problems.size() < kMaxProblems) rep.problems.push_back(std::move(p));
  };
  std::unordered_map<uint64_t, Node> nodes;
  SURGE_RETURN_IF_ERROR(
      kv->scan(Space::kInodes, "", "", [&](std::string_view k, std::string_view v) {
        ++rep.inodes;
        records::InodeRecord r;
        if (k.size() != 8 || !r.ParseFromArray(v.data(), static_cast<int>(v.size()))) {
          problem("unreadable inode record");
          return true;
        }
        const uint64_t ino = keys::get_be64(k);
        if (r.attr().ino() != ino)
          problem("inode " + std::to_string(ino) + " records number " +
                  std::to_string(r.attr().ino()));
        Node& n = nodes[ino];
        n.mode = r.attr().mode();
        n.nlink = r.attr().nlink();
        n.parent = r.parent();
        return true;
      }));
  SURGE_RETURN_IF_ERROR(
      kv->scan(Space::kDentries, "", "", [&](std::string_view k, std::string_view v) {
        ++rep.dentries;
        uint64_t parent, cookie;
        std::string_view name;
        keys::DentryValue d;
        if (!keys::decode_dentry_key(k, &parent, &cookie, &name) || !keys::decode_dentry(v, &d)) {
          problem("unreadable directory entry");
          return true;
        }
        const std::string where =
            "entry '" + std::string(name) + "' in directory " + std::to_string(parent);
        if (cookie != keys::name_cookie(name)) problem(where + " is filed under the wrong cookie");
        auto p = nodes.find(parent);
        if (p == nodes.end()) {
          problem(where + ": the directory does not exist");
        } else if (!S_ISDIR(p->second.mode)) {
          problem(where + ": the parent is not a directory");
        }
        auto c = nodes.find(d.child);
        if (c == nodes.end()) {
          problem(where + " points to missing inode " + std::to_string(d.child));
          return true;
        }
        if ((c->second.mode & S_IFMT) != d.type) problem(where + " records the wrong file type");
        ++c->second.links;
        c->second.entry_parent = parent;
        if (S_ISDIR(c->second.mode) && p != nodes.end()) ++p->second.subdirs;
        return true;
      }));
  std::set<uint64_t> orphans;
  SURGE_RETURN_IF_ERROR(kv->scan(Space::kSystem, keys::kOrphanPrefix, keys::kOrphanEnd,
                                 [&](std::string_view k, std::string_view) {
                                   ++rep.orphans;
                                   if (k.size() == 10) orphans.insert(keys::get_be64(k.substr(2)));
                                   return true;
                                 }));
  SURGE_RETURN_IF_ERROR(kv->scan(Space::kXattrs, "", "", [&](std::string_view k, std::string_view) {
    ++rep.xattrs;
    if (k.size() < 8 || nodes.count(keys::get_be64(k)) == 0) problem("xattr of a missing inode");
    return true;
  }));

  const uint64_t root = proto::mds::kRootIno;
  if (nodes.count(root) == 0 || !S_ISDIR(nodes[root].mode))
    problem("the root directory is missing");
  for (uint64_t o : orphans) {
    auto it = nodes.find(o);
    if (it == nodes.end()) {
      problem("orphan " + std::to_string(o) + " has no inode");
    } else if (it->second.nlink != 0 || it->second.links != 0) {
      problem("orphan " + std::to_string(o) + " still has links (nlink " +
              std::to_string(it->second.nlink) + ", entries " + std::to_string(it->second.links) +
              ")");
    }
  }
  for (const auto& [ino, n] : nodes) {
    const std::string what = "inode " + std::to_string(ino);
    if (S_ISDIR(n.mode)) {
      if (ino == root) {
        if (n.links != 0) problem("the root directory has an entry pointing to it");
      } else if (n.links != 1) {
        problem("directory " + what + " has " + std::to_string(n.links) + " entries (must be 1)");
      } else if (n.entry_parent != n.parent) {
        problem("directory " + what + " is in directory " + std::to_string(n.entry_parent) +
                " but records parent " + std::to_string(n.parent));
      }
      if (n.nlink != 2 + n.subdirs) {
        problem("directory " + what + " has nlink " + std::to_string(n.nlink) + ", expected " +
                std::to_string(2 + n.subdirs));
      }
    } else {
      if (n.nlink != n.links) {
        problem(what + " has nlink " + std::to_string(n.nlink) + " but " + std::to_string(n.links) +
                " entries");
      }
      if (n.links == 0 && orphans.count(ino) == 0) {
        problem(what + " is unreachable and not in the orphan list");
      }
    }
  }
  // Every directory must reach the root through its parents (no detached cycles).
  std::set<uint64_t> reaches;
  reaches.insert(root);
  for (const auto& [ino, n] : nodes) {
    if (!S_ISDIR(n.mode) || n.links != 1) continue;
    std::vector<uint64_t> path;
    uint64_t cur = ino;
    bool ok = false;
    for (size_t step = 0; step <= nodes.size(); ++step) {
      if (reaches.count(cur)) {
        ok = true;
        break;
      }
      path.push_back(cur);
      auto it = nodes.find(cur);
      if (it == nodes.end() || it->second.links != 1) break;
      cur = it->second.entry_parent;
    }
    if (ok) {
      reaches.insert(path.begin(), path.end());
    } else {
      problem("directory inode " + std::to_string(ino) + " does not reach the root");
    }
  }
  return rep;
}

}  // namespace surge::mds
