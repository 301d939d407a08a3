// What the surgectl tests share: a LocalCluster (real surge-mds and
// surge-ods processes on 127.0.0.1, killed on every exit path), surgectl run
// as a process against it, and small helpers to write files and to find an
// object's file in a data server's directory.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "tests/client/local_cluster.h"

namespace surge::test {

class SurgectlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One copy (format 1): these tests count objects and targets per file.
    auto c = LocalCluster::Start(one_copy(ClusterConfig{}));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
  }

  // Runs surgectl with args; returns its exit status, output in *out.
  int surgectl(const std::string& args, std::string* out) {
    return surgectl_at(cluster_->mds_address(), args, out);
  }
  // The same with --mds mds (one address or a list).
  int surgectl_at(const std::string& mds, const std::string& args, std::string* out) {
    const char* b = std::getenv("SURGE_BUILD_DIR");
    if (b == nullptr) throw std::runtime_error("SURGE_BUILD_DIR is not set (run through ctest)");
    out->clear();
    return sh(std::string(b) + "/tools/surgectl --mds " + mds + " --key-file " +
                  cluster_->key_file() + " " + args + " 2>&1",
              out);
  }

  // Runs surgectl with args; stdout in *out and stderr in *err apart (a
  // --json document alone on stdout).
  int surgectl_apart(const std::string& args, std::string* out, std::string* err) {
    const char* b = std::getenv("SURGE_BUILD_DIR");
    if (b == nullptr) throw std::runtime_error("SURGE_BUILD_DIR is not set (run through ctest)");
    const std::string err_file = cluster_->dir() + "/surgectl.stderr";
    out->clear();
    const int rc = sh(std::string(b) + "/tools/surgectl --mds " + cluster_->mds_address() +
                          " --key-file " + cluster_->key_file() + " " + args + " 2>" + err_file,
                      out);
    std::ifstream e(err_file);
    err->assign(std::istreambuf_iterator<char>(e), {});
    return rc;
  }

  // Creates path with `bytes` of data; returns its inode and layout targets.
  std::pair<uint64_t, std::set<uint32_t>> write_new_file(const std::string& path, size_t bytes) {
    auto cl = cluster_->connect();
    if (!cl.ok()) throw std::runtime_error(cl.status().ToString());
    auto f = (*cl)->open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
    if (!f.ok()) throw std::runtime_error("create " + path + ": " + f.status().ToString());
    if (bytes > 0) {
      std::string data = random_bytes(bytes, bytes);
      auto w = (*cl)->pwrite(**f, data.data(), data.size(), 0);
      if (!w.ok()) throw std::runtime_error("write " + path + ": " + w.status().ToString());
    }
    const uint64_t ino = (*f)->ino();
    Status st = (*cl)->close(*f);
    if (!st.ok()) throw std::runtime_error("close " + path + ": " + st.ToString());
    auto l = (*cl)->get_layout(ino, Caller{});
    if (!l.ok()) throw std::runtime_error("layout of " + path + ": " + l.status().ToString());
    return {ino, std::set<uint32_t>(l->targets.begin(), l->targets.end())};
  }

  // The data files of object `id` on any data server ("" entries skipped).
  std::vector<std::string> object_files(uint64_t id, int ods_count = 3) {
    char name[32];
    std::snprintf(name, sizeof name, "%016llx.dat", static_cast<unsigned long long>(id));
    std::vector<std::string> found;
    for (int i = 0; i < ods_count; ++i) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(cluster_->ods_dir(i))) {
        if (e.is_regular_file() && e.path().filename() == name) found.push_back(e.path());
      }
    }
    return found;
  }

  std::unique_ptr<LocalCluster> cluster_;
};

}  // namespace surge::test
