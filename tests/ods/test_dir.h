// TempDir: a fresh directory (under /tmp unless told) for one test, removed with it.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace surge::ods::testing {

class TempDir {
 public:
  // base: the directory to make it in (a benchmark may put it on tmpfs).
  explicit TempDir(const std::string& prefix = "surge-ods-test", const std::string& base = "/tmp") {
    std::string tmpl = base + "/" + prefix + "-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace surge::ods::testing
