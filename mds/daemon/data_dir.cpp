// The MDS data directory; see data_dir.h.
#include "mds/daemon/data_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "mds/namespace/namespace.h"

namespace surge::mds {

namespace fs = std::filesystem;

namespace {

std::string hex16(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

Status write_fsid(const std::string& dir, uint64_t id) {
  const std::string tmp = dir + "/FSID.tmp", final_path = dir + "/FSID";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(errno, "creating " + tmp);
  const std::string text = hex16(id) + "\n";
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) return Status::FromErrno(err, "writing " + tmp);
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    return Status::FromErrno(errno, "renaming " + tmp + " to " + final_path);
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::OK();
}

Result<uint64_t> read_fsid(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::IOError("cannot read " + path);
  std::string s;
  std::getline(in, s);
  if (s.size() != 16 || s.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return Status::Corruption(path + " does not hold a file system id (16 hex digits)");
  }
  return std::stoull(s, nullptr, 16);
}

}  // namespace

Result<OpenedDataDir> open_data_dir(const DataDirOptions& o) {
  std::error_code ec;
  const std::string dir = o.path;
  const std::string db = dir + "/db", fsid_path = dir + "/FSID";
  if (!fs::exists(dir, ec)) {
    if (!o.allow_format) return Status::NotFound("data dir " + dir + " does not exist");
    fs::create_directories(dir, ec);
    if (ec) return Status::IOError("cannot create data dir " + dir + ": " + ec.message());
  }
  if (!fs::is_directory(dir, ec)) return Status::InvalidArgument(dir + " is not a directory");

  const bool has_fsid = fs::exists(fsid_path, ec);
  const bool has_db = fs::exists(db, ec);
  uint64_t file_id = 0;
  if (has_fsid) {
    SURGE_ASSIGN_OR_RETURN(file_id, read_fsid(fsid_path));
    if (!has_db) {
      return Status::Corruption("data dir " + dir + " has an FSID but no database (" + db + ")");
    }
  } else if (!has_db) {
    // A new file system only in an empty dir: never take over someone's files.
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      return Status::InvalidArgument("data dir " + dir + " is not empty (has " +
                                     e.path().filename().string() +
                                     ") and is not a surge-mds data dir");
    }
    if (!o.allow_format) return Status::NotFound("data dir " + dir + " holds no file system");
  }
  if (o.expect_fs_id != 0 && has_fsid && file_id != o.expect_fs_id) {
    return Status::InvalidArgument("data dir " + dir + " belongs to file system " + hex16(file_id) +
                                   ", expected " + hex16(o.expect_fs_id));
  }

  RocksKvOptions ko;
  ko.path = db;
  ko.sync = o.sync;
  ko.create_if_missing = !has_db;
  ko.block_cache_bytes = o.block_cache_bytes;
  ko.memtable_bytes = o.memtable_bytes;
  auto kv = RocksKvStore::Open(ko);
  if (!kv.ok()) return kv.status().WithContext("data dir " + dir);
  OpenedDataDir out;
  out.kv = std::move(*kv);
  auto id = Namespace::FormatOrLoad(out.kv.get(), has_fsid ? file_id : o.expect_fs_id);
  if (!id.ok()) return id.status().WithContext("data dir " + dir);
  out.fs_id = *id;
  out.formatted = !has_db;
  if (!has_fsid) {
    // Formatted now, or the FSID write of an interrupted format is missing.
    SURGE_RETURN_IF_ERROR(write_fsid(dir, out.fs_id));
  }
  return out;
}

}  // namespace surge::mds
