// IoWorker: one stress client's loop. It owns a directory and the files in
// it (no other worker touches them, so its FileModels are exact), and does
// rounds until told to stop: create a file and write it, modify one
// (overwrites at random sector-aligned offsets and appends, then fsync
// and close: the round is acknowledged when all of it returned OK),
// truncate one, remove one, or read one back whole and check it.
// Each round that returned an error is recorded and leaves its updates
// uncertain in the model (file_model.h); a wrong byte read is a failure.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "tests/stress/file_io.h"
#include "tests/stress/file_model.h"

namespace surge::stress {

// Shared by the workers: counts and what went wrong.
struct RunLog {
  std::atomic<uint64_t> rounds{0}, bytes_written{0}, bytes_checked{0}, io_errors{0};
  std::atomic<uint32_t> next_wid{1};
  std::mutex mu;
  std::vector<std::string> errors;      // rounds that returned an error
  std::vector<std::string> mismatches;  // wrong or lost bytes, lost files
  void error(const std::string& what);
  void mismatch(const std::string& what);
};

struct WorkerOptions {
  std::string dir;               // its own directory, e.g. "/r2/w0"
  uint64_t max_file_bytes = 4 << 20;
  int max_files = 6;
  uint64_t seed = 1;
};

class IoWorker {
 public:
  IoWorker(std::unique_ptr<FileIo> io, WorkerOptions opt, RunLog* log);
  // Rounds until stop; mkdir of its directory first.
  void run(const std::atomic<bool>& stop);
  // After the run: every file read back through io (its own, or a fresh
  // checker's) and compared with the model, and the directory listed: a
  // file that should exist and does not, or one that should not and does,
  // is a mismatch. Returns the files checked.
  int verify(FileIo& io);
  std::string name() const { return io_->name() + " " + opt_.dir; }

 private:
  void round();
  void create_round();
  void modify_round(FileModel& f);
  void truncate_round(FileModel& f);
  void remove_round(size_t i);
  void check_round(FileModel& f);
  uint64_t sectors(uint64_t max_bytes);  // a random length, whole sectors, >= 1
  // Writes `wid`'s content at [off, off + len) through the open file.
  Status write(uint32_t wid, uint64_t off, uint64_t len);
  void failed(const std::string& op, const FileModel& f, const Status& st);

  std::unique_ptr<FileIo> io_;
  WorkerOptions opt_;
  RunLog* log_;
  std::mt19937_64 rng_;
  std::vector<FileModel> files_;  // live ones (and maybe-live)
  std::vector<FileModel> gone_;   // removed ones, must not come back
  int next_file_ = 0;
  std::string buf_;
};

}  // namespace surge::stress
