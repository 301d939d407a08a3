#include "tests/stress/io_worker.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace surge::stress {

void RunLog::error(const std::string& what) {
  ++io_errors;
  std::lock_guard<std::mutex> l(mu);
  errors.push_back(what);
  if (errors.size() <= 20) std::printf("IO error: %s\n", what.c_str());
  std::fflush(stdout);
}

void RunLog::mismatch(const std::string& what) {
  std::lock_guard<std::mutex> l(mu);
  mismatches.push_back(what);
  std::printf("MISMATCH: %s\n", what.c_str());
  std::fflush(stdout);
}

IoWorker::IoWorker(std::unique_ptr<FileIo> io, WorkerOptions opt, RunLog* log)
    : io_(std::move(io)), opt_(std::move(opt)), log_(log), rng_(opt_.seed) {}

uint64_t IoWorker::sectors(uint64_t max_bytes) {
  const uint64_t max_s = std::max<uint64_t>(1, max_bytes / kSector);
  // Mostly small pieces, sometimes large ones that cross many stripes.
  const uint64_t cap = rng_() % 4 == 0 ? max_s : std::min<uint64_t>(max_s, 64);
  return (1 + rng_() % cap) * kSector;
}

Status IoWorker::write(uint32_t wid, uint64_t off, uint64_t len) {
  buf_.resize(len);
  fill_content(wid, off, len, buf_.data());
  Status st = io_->pwrite(buf_.data(), len, off);
  if (st.ok()) log_->bytes_written += len;
  return st;
}

void IoWorker::failed(const std::string& op, const FileModel& f, const Status& st) {
  log_->error(name() + ": " + op + " " + f.path() + ": " + st.ToString());
}

void IoWorker::run(const std::atomic<bool>& stop) {
  Status st = io_->mkdir(opt_.dir);
  if (!st.ok()) log_->error(name() + ": mkdir " + opt_.dir + ": " + st.ToString());
  while (!stop.load()) {
    round();
    ++log_->rounds;
  }
}

void IoWorker::round() {
  std::vector<size_t> live;
  for (size_t i = 0; i < files_.size(); ++i) {
    if (!files_[i].maybe()) live.push_back(i);
  }
  const int r = static_cast<int>(rng_() % 100);
  if (live.empty() || (r < 15 && static_cast<int>(files_.size()) < opt_.max_files)) {
    create_round();
    return;
  }
  if (r < 22 || static_cast<int>(files_.size()) > opt_.max_files) {
    remove_round(rng_() % files_.size());
    return;
  }
  FileModel& f = files_[live[rng_() % live.size()]];
  if (r < 27) {
    truncate_round(f);
  } else if (r < 75) {
    modify_round(f);
  } else {
    check_round(f);
  }
}

void IoWorker::create_round() {
  files_.emplace_back(opt_.dir + "/f" + std::to_string(next_file_++));
  FileModel& f = files_.back();
  Status st = io_->open(f.path(), true);
  if (!st.ok()) {
    f.set_exists(true, false);  // the create may have happened
    failed("create", f, st);
    return;
  }
  f.set_exists(true, true);
  Update u{Update::kWrite, 0, sectors(opt_.max_file_bytes / 2), log_->next_wid++};
  st = write(u.wid, u.offset, u.length);
  if (st.ok()) st = io_->fsync();
  Status closed = io_->close();
  if (st.ok()) st = closed;
  f.apply(u, st.ok());
  if (!st.ok()) failed("first write of", f, st);
}

void IoWorker::modify_round(FileModel& f) {
  Status st = io_->open(f.path(), false);
  if (!st.ok()) {
    failed("open", f, st);
    return;
  }
  std::vector<Update> done;
  const int n = 1 + static_cast<int>(rng_() % 4);
  for (int i = 0; i < n && st.ok(); ++i) {
    Update u{Update::kWrite, 0, 0, log_->next_wid++};
    const uint64_t end = f.size_max();
    if (rng_() % 3 == 0 || end == 0) {
      u.offset = end;  // append
    } else {
      u.offset = (rng_() % (end / kSector)) * kSector;  // overwrite
    }
    if (u.offset >= opt_.max_file_bytes) u.offset = 0;
    u.length = std::min(sectors(opt_.max_file_bytes / 4), opt_.max_file_bytes - u.offset);
    done.push_back(u);
    st = write(u.wid, u.offset, u.length);
  }
  if (st.ok()) st = io_->fsync();
  Status closed = io_->close();
  if (st.ok()) st = closed;
  for (const auto& u : done) f.apply(u, st.ok());
  if (!st.ok()) failed("write", f, st);
}

void IoWorker::truncate_round(FileModel& f) {
  Update u{Update::kTruncate, (rng_() % (f.size_max() / kSector + 2)) * kSector, 0, 0};
  u.offset = std::min(u.offset, opt_.max_file_bytes);
  Status st = io_->truncate(f.path(), u.offset);
  f.apply(u, st.ok());
  if (!st.ok()) failed("truncate to " + std::to_string(u.offset), f, st);
}

void IoWorker::remove_round(size_t i) {
  FileModel f = files_[i];
  Status st = io_->unlink(f.path());
  if (st.ok() || (f.maybe() && st.code() == Code::kNotFound)) {
    f.set_exists(false, true);
    gone_.push_back(f);
    files_.erase(files_.begin() + static_cast<long>(i));
    return;
  }
  files_[i].set_exists(true, false);  // maybe removed
  failed("unlink", f, st);
}

void IoWorker::check_round(FileModel& f) {
  auto data = io_->read_all(f.path());
  if (!data.ok()) {
    failed("read", f, data.status());
    return;
  }
  log_->bytes_checked += data->size();
  std::string bad = f.check(*data);
  if (!bad.empty()) log_->mismatch(name() + " while running: " + bad);
}

int IoWorker::verify(FileIo& io) {
  int checked = 0;
  auto names = io.list(opt_.dir);
  if (!names.ok()) {
    log_->mismatch(name() + ": list " + opt_.dir + ": " + names.status().ToString());
    return 0;
  }
  std::set<std::string> present;
  for (const auto& n : *names) present.insert(opt_.dir + "/" + n);
  for (const auto& f : files_) {
    if (present.count(f.path()) == 0) {
      if (!f.maybe()) log_->mismatch(f.path() + ": lost (the file is gone)");
      continue;
    }
    auto data = io.read_all(f.path());
    if (!data.ok()) {
      log_->mismatch(f.path() + ": read at the end: " + data.status().ToString());
      continue;
    }
    ++checked;
    log_->bytes_checked += data->size();
    std::string bad = f.check(*data);
    if (!bad.empty()) log_->mismatch(bad);
  }
  for (const auto& f : gone_) {
    if (present.count(f.path()) != 0) log_->mismatch(f.path() + ": removed, but it is back");
  }
  std::set<std::string> known;
  for (const auto& f : files_) known.insert(f.path());
  for (const auto& f : gone_) known.insert(f.path());
  for (const auto& p : present) {
    if (known.count(p) == 0) log_->mismatch(p + ": a file the run never created");
  }
  return checked;
}

}  // namespace surge::stress
