#include "tests/stress/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace surge::stress {

namespace {

class LibsurgeIo : public FileIo {
 public:
  explicit LibsurgeIo(std::unique_ptr<Client> c) : c_(std::move(c)) {}

  Status open(const std::string& path, bool create) override {
    auto f = c_->open(path, O_RDWR | (create ? O_CREAT | O_EXCL : 0), 0644);
    if (!f.ok()) return f.status();
    f_ = *f;
    path_ = path;
    return Status::OK();
  }
  Status pwrite(const char* data, size_t len, uint64_t offset) override {
    auto w = c_->pwrite(*f_, data, len, offset);
    if (!w.ok()) return w.status();
    if (*w != len) {
      return Status::IOError("pwrite " + path_ + " at " + std::to_string(offset) + ": " +
                             std::to_string(*w) + " of " + std::to_string(len) + " bytes");
    }
    return Status::OK();
  }
  Status fsync() override { return c_->fsync(*f_, false); }
  Status close() override {
    if (!f_) return Status::OK();
    Status st = c_->close(std::move(f_));
    f_.reset();
    return st;
  }
  Status truncate(const std::string& path, uint64_t size) override {
    return c_->truncate(path, size);
  }
  Status unlink(const std::string& path) override { return c_->unlink(path); }
  Result<std::string> read_all(const std::string& path) override {
    auto f = c_->open(path, O_RDONLY, 0);
    if (!f.ok()) return f.status();
    std::string out;
    std::string buf(1 << 20, '\0');
    for (;;) {
      auto n = c_->pread(**f, buf.data(), buf.size(), out.size());
      if (!n.ok()) {
        (void)c_->close(*f);
        return n.status();
      }
      if (*n == 0) break;
      out.append(buf.data(), *n);
    }
    (void)c_->close(*f);
    return out;
  }
  Result<std::vector<std::string>> list(const std::string& dir) override {
    auto l = c_->list(dir);
    if (!l.ok()) return l.status();
    std::vector<std::string> names;
    for (const auto& e : *l) {
      if (e.name != "." && e.name != "..") names.push_back(e.name);
    }
    return names;
  }
  Status mkdir(const std::string& dir) override { return c_->mkdir(dir, 0777); }
  std::string name() const override { return "libsurge"; }

 private:
  std::unique_ptr<Client> c_;
  FileRef f_;
  std::string path_;
};

class PosixIo : public FileIo {
 public:
  explicit PosixIo(std::string mnt) : mnt_(std::move(mnt)) {}
  ~PosixIo() override { (void)close(); }

  Status open(const std::string& path, bool create) override {
    path_ = mnt_ + path;
    fd_ = ::open(path_.c_str(), O_RDWR | (create ? O_CREAT | O_EXCL : 0), 0644);
    if (fd_ < 0) return Status::FromErrno(errno, "open " + path_);
    return Status::OK();
  }
  Status pwrite(const char* data, size_t len, uint64_t offset) override {
    size_t done = 0;
    while (done < len) {
      ssize_t n = ::pwrite(fd_, data + done, len - done, static_cast<off_t>(offset + done));
      if (n < 0) {
        return Status::FromErrno(errno, "pwrite " + path_ + " at " + std::to_string(offset + done));
      }
      done += static_cast<size_t>(n);
    }
    return Status::OK();
  }
  Status fsync() override {
    if (::fsync(fd_) != 0) return Status::FromErrno(errno, "fsync " + path_);
    return Status::OK();
  }
  Status close() override {
    if (fd_ < 0) return Status::OK();
    int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return Status::FromErrno(errno, "close " + path_);
    return Status::OK();
  }
  Status truncate(const std::string& path, uint64_t size) override {
    if (::truncate((mnt_ + path).c_str(), static_cast<off_t>(size)) != 0) {
      return Status::FromErrno(errno, "truncate " + mnt_ + path);
    }
    return Status::OK();
  }
  Status unlink(const std::string& path) override {
    if (::unlink((mnt_ + path).c_str()) != 0) return Status::FromErrno(errno, "unlink " + mnt_ + path);
    return Status::OK();
  }
  Result<std::string> read_all(const std::string& path) override {
    const std::string p = mnt_ + path;
    int fd = ::open(p.c_str(), O_RDONLY);
    if (fd < 0) return Status::FromErrno(errno, "open " + p);
    std::string out;
    std::string buf(1 << 20, '\0');
    for (;;) {
      ssize_t n = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(out.size()));
      if (n < 0) {
        Status st = Status::FromErrno(errno, "pread " + p + " at " + std::to_string(out.size()));
        ::close(fd);
        return st;
      }
      if (n == 0) break;
      out.append(buf.data(), static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
  }
  Result<std::vector<std::string>> list(const std::string& dir) override {
    const std::string p = mnt_ + dir;
    DIR* d = ::opendir(p.c_str());
    if (d == nullptr) return Status::FromErrno(errno, "opendir " + p);
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
    return names;
  }
  Status mkdir(const std::string& dir) override {
    if (::mkdir((mnt_ + dir).c_str(), 0777) != 0) return Status::FromErrno(errno, "mkdir " + mnt_ + dir);
    return Status::OK();
  }
  std::string name() const override { return "mount"; }

 private:
  std::string mnt_;
  std::string path_;
  int fd_ = -1;
};

}  // namespace

std::unique_ptr<FileIo> libsurge_io(std::unique_ptr<Client> client) {
  return std::make_unique<LibsurgeIo>(std::move(client));
}
std::unique_ptr<FileIo> posix_io(const std::string& mountpoint) {
  return std::make_unique<PosixIo>(mountpoint);
}

}  // namespace surge::stress
