// surge-bench --mode md: the mdtest-like run (see metadata_bench.h).
//
// The parent forks the processes and only coordinates: for every step it
// writes one byte down each child's command pipe and waits for one byte back
// from each, so a step is a barrier. Children count finished files in a
// shared anonymous mapping, which the parent reads for the progress display.
// A child connects (libsurge) only after the fork: a client's threads do not
// survive one.
#include "tools/surge-bench/metadata_bench.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "surge/client.h"

namespace surge::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Where a directory is, for each API: a path in the mount, an inode number.
struct Dir {
  std::string path;
  Ino ino = 0;
};

// The file-system calls of one process, through one API.
class MetadataEngine {
 public:
  virtual ~MetadataEngine() = default;
  virtual Status connect() = 0;
  virtual Result<Dir> base() = 0;  // --path itself
  virtual Result<Dir> mkdir(const Dir& parent, const std::string& name) = 0;
  virtual Result<Dir> lookup_dir(const Dir& parent, const std::string& name) = 0;
  virtual Status rmdir(const Dir& parent, const std::string& name) = 0;
  // open(O_CREAT|O_EXCL|O_WRONLY), write `bytes`, close.
  virtual Status create(const Dir& d, const std::string& name, uint64_t bytes) = 0;
  virtual Status stat(const Dir& d, const std::string& name) = 0;
  // open(O_RDONLY), read `bytes`, close.
  virtual Status read(const Dir& d, const std::string& name, uint64_t bytes) = 0;
  virtual Status remove(const Dir& d, const std::string& name) = 0;
};

class PosixMetadataEngine : public MetadataEngine {
 public:
  PosixMetadataEngine(const MetadataConfig& c) : c_(c) {}
  Status connect() override {
    buf_.assign(std::max(c_.write_bytes, c_.read_bytes), 'm');
    return Status::OK();
  }
  Result<Dir> base() override {
    struct stat st;
    if (::stat(c_.path.c_str(), &st) != 0) return Status::FromErrno(errno, "stat " + c_.path);
    return Dir{c_.path, 0};
  }
  Result<Dir> mkdir(const Dir& parent, const std::string& name) override {
    std::string p = parent.path + "/" + name;
    if (::mkdir(p.c_str(), 0755) != 0) return Status::FromErrno(errno, "mkdir " + p);
    return Dir{p, 0};
  }
  Result<Dir> lookup_dir(const Dir& parent, const std::string& name) override {
    return Dir{parent.path + "/" + name, 0};
  }
  Status rmdir(const Dir& parent, const std::string& name) override {
    std::string p = parent.path + "/" + name;
    if (::rmdir(p.c_str()) != 0) return Status::FromErrno(errno, "rmdir " + p);
    return Status::OK();
  }
  Status create(const Dir& d, const std::string& name, uint64_t bytes) override {
    std::string p = d.path + "/" + name;
    int fd = ::open(p.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd < 0) return Status::FromErrno(errno, "create " + p);
    Status st = transfer(fd, p, bytes, true);
    if (::close(fd) != 0 && st.ok()) st = Status::FromErrno(errno, "close " + p);
    return st;
  }
  Status stat(const Dir& d, const std::string& name) override {
    std::string p = d.path + "/" + name;
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) return Status::FromErrno(errno, "stat " + p);
    return Status::OK();
  }
  Status read(const Dir& d, const std::string& name, uint64_t bytes) override {
    std::string p = d.path + "/" + name;
    int fd = ::open(p.c_str(), O_RDONLY);
    if (fd < 0) return Status::FromErrno(errno, "open " + p);
    Status st = transfer(fd, p, bytes, false);
    if (::close(fd) != 0 && st.ok()) st = Status::FromErrno(errno, "close " + p);
    return st;
  }
  Status remove(const Dir& d, const std::string& name) override {
    std::string p = d.path + "/" + name;
    if (::unlink(p.c_str()) != 0) return Status::FromErrno(errno, "unlink " + p);
    return Status::OK();
  }

 private:
  Status transfer(int fd, const std::string& p, uint64_t bytes, bool write) {
    uint64_t done = 0;
    while (done < bytes) {
      ssize_t n = write ? ::write(fd, buf_.data() + done, bytes - done)
                        : ::read(fd, buf_.data() + done, bytes - done);
      if (n < 0) return Status::FromErrno(errno, (write ? "write " : "read ") + p);
      if (n == 0) return Status::IOError("read " + p + ": file shorter than --read-bytes");
      done += static_cast<uint64_t>(n);
    }
    return Status::OK();
  }
  const MetadataConfig& c_;
  std::string buf_;
};

// libsurge at the inode level, as an application that keeps its directory's
// inode (or the mount, which keeps dentries) would call it: no path walk per
// operation.
class NativeMetadataEngine : public MetadataEngine {
 public:
  NativeMetadataEngine(const MetadataConfig& c) : c_(c) {}
  Status connect() override {
    ClientOptions o;
    o.mds_address = c_.mds;
    o.cluster_key_file = c_.key_file;
    o.pool_buffers = 8;
    SURGE_ASSIGN_OR_RETURN(client_, Client::Connect(o));
    caller_ = Caller::Current();
    buf_.assign(std::max(c_.write_bytes, c_.read_bytes), 'm');
    return Status::OK();
  }
  Result<Dir> base() override {
    SURGE_ASSIGN_OR_RETURN(Attr a, client_->resolve(c_.path, caller_));
    return Dir{c_.path, a.ino};
  }
  Result<Dir> mkdir(const Dir& parent, const std::string& name) override {
    auto a = client_->mkdir(parent.ino, name, 0755, caller_);
    if (!a.ok()) return a.status().WithContext("mkdir " + parent.path + "/" + name);
    return Dir{parent.path + "/" + name, a->ino};
  }
  Result<Dir> lookup_dir(const Dir& parent, const std::string& name) override {
    auto a = client_->lookup(parent.ino, name, caller_);
    if (!a.ok()) return a.status().WithContext("lookup " + parent.path + "/" + name);
    return Dir{parent.path + "/" + name, a->ino};
  }
  Status rmdir(const Dir& parent, const std::string& name) override {
    return client_->rmdir(parent.ino, name, caller_)
        .WithContext("rmdir " + parent.path + "/" + name);
  }
  Status create(const Dir& d, const std::string& name, uint64_t bytes) override {
    auto f = client_->create(d.ino, name, 0644, O_CREAT | O_EXCL | O_WRONLY, caller_, nullptr);
    if (!f.ok()) return f.status().WithContext("create " + d.path + "/" + name);
    Status st;
    if (bytes > 0) {
      auto n = client_->pwrite(**f, buf_.data(), bytes, 0);
      if (!n.ok()) st = n.status().WithContext("write " + d.path + "/" + name);
    }
    Status cl = client_->close(std::move(*f));
    if (st.ok() && !cl.ok()) st = cl.WithContext("close " + d.path + "/" + name);
    return st;
  }
  Status stat(const Dir& d, const std::string& name) override {
    auto a = client_->lookup(d.ino, name, caller_);
    if (!a.ok()) return a.status().WithContext("stat " + d.path + "/" + name);
    return Status::OK();
  }
  Status read(const Dir& d, const std::string& name, uint64_t bytes) override {
    auto a = client_->lookup(d.ino, name, caller_);
    if (!a.ok()) return a.status().WithContext("lookup " + d.path + "/" + name);
    auto f = client_->open(a->ino, O_RDONLY, caller_, nullptr);
    if (!f.ok()) return f.status().WithContext("open " + d.path + "/" + name);
    Status st;
    if (bytes > 0) {
      auto n = client_->pread(**f, buf_.data(), bytes, 0);
      if (!n.ok()) {
        st = n.status().WithContext("read " + d.path + "/" + name);
      } else if (*n != bytes) {
        st = Status::IOError("read " + d.path + "/" + name + ": file shorter than --read-bytes");
      }
    }
    Status cl = client_->close(std::move(*f));
    if (st.ok() && !cl.ok()) st = cl.WithContext("close " + d.path + "/" + name);
    return st;
  }
  Status remove(const Dir& d, const std::string& name) override {
    return client_->unlink(d.ino, name, caller_).WithContext("unlink " + d.path + "/" + name);
  }

 private:
  const MetadataConfig& c_;
  std::unique_ptr<Client> client_;
  Caller caller_;
  std::string buf_;
};

// What the parent and the children share (an anonymous MAP_SHARED mapping).
struct ProcessSlot {
  std::atomic<uint64_t> done{0};  // files finished in the current step
  char error[512] = {0};          // first error of this process, "" if none
};

// The steps, in the order the parent runs them. Timed ones are the phases.
enum class Step : char {
  kTop = 't',        // process 0 makes PATH/mdtest.<pid>
  kOwnDir = 'd',     // each process makes its directory (unique dirs)
  kCreate = 'c',
  kStat = 's',
  kRead = 'r',
  kRemove = 'x',
  kRemoveDirs = 'D',  // each process removes its directory (unique dirs)
  kRemoveTop = 'T',   // process 0 removes the top directory
  kExit = 'q',
};

std::string file_name(const MetadataConfig& c, int proc, uint64_t i) {
  // Built by append: GCC 12 misreports `"literal" + std::string` (PR 105651).
  std::string n;
  if (c.shared_dir) n.append("p").append(std::to_string(proc)).append(".");
  return n.append("f").append(std::to_string(i));
}

// One child's whole life: connect, then run each step the parent sends.
class MetadataProcess {
 public:
  MetadataProcess(const MetadataConfig& c, int proc, const std::string& top, ProcessSlot* slot)
      : c_(c), proc_(proc), top_name_(top), slot_(slot) {
    if (c.api == "posix") {
      e_ = std::make_unique<PosixMetadataEngine>(c);
    } else {
      e_ = std::make_unique<NativeMetadataEngine>(c);
    }
  }

  Status start() {
    SURGE_RETURN_IF_ERROR(e_->connect());
    SURGE_ASSIGN_OR_RETURN(base_, e_->base());
    return Status::OK();
  }

  Status run(Step s) {
    slot_->done.store(0);
    const int peer = (proc_ + 1) % c_.processes;  // mdtest -N 1
    switch (s) {
      case Step::kTop:
        if (proc_ == 0) {
          SURGE_ASSIGN_OR_RETURN(top_, e_->mkdir(base_, top_name_));
        }
        return Status::OK();
      case Step::kOwnDir: {
        if (proc_ != 0) {
          SURGE_ASSIGN_OR_RETURN(top_, e_->lookup_dir(base_, top_name_));
        }
        if (c_.shared_dir) return Status::OK();
        SURGE_ASSIGN_OR_RETURN(own_, e_->mkdir(top_, dir_name(proc_)));
        return Status::OK();
      }
      case Step::kCreate:
        return each_file(proc_, [&](const Dir& d, const std::string& n) {
          return e_->create(d, n, c_.write_bytes);
        });
      case Step::kStat:
        return each_file(peer, [&](const Dir& d, const std::string& n) { return e_->stat(d, n); });
      case Step::kRead:
        return each_file(peer, [&](const Dir& d, const std::string& n) {
          return e_->read(d, n, c_.read_bytes);
        });
      case Step::kRemove:
        return each_file(proc_, [&](const Dir& d, const std::string& n) { return e_->remove(d, n); });
      case Step::kRemoveDirs:
        return c_.shared_dir ? Status::OK() : e_->rmdir(top_, dir_name(proc_));
      case Step::kRemoveTop:
        return proc_ == 0 ? e_->rmdir(base_, top_name_) : Status::OK();
      case Step::kExit:
        return Status::OK();
    }
    return Status::OK();
  }

 private:
  static std::string dir_name(int proc) { return std::string("p").append(std::to_string(proc)); }

  template <class Op>
  Status each_file(int owner, Op op) {
    Dir d = top_;
    if (!c_.shared_dir) {
      if (owner == proc_) {
        d = own_;
      } else {
        SURGE_ASSIGN_OR_RETURN(d, e_->lookup_dir(top_, dir_name(owner)));
      }
    }
    for (uint64_t i = 0; i < c_.files; ++i) {
      SURGE_RETURN_IF_ERROR(op(d, file_name(c_, owner, i)));
      slot_->done.fetch_add(1, std::memory_order_relaxed);
    }
    return Status::OK();
  }

  const MetadataConfig& c_;
  int proc_;
  std::string top_name_;
  ProcessSlot* slot_;
  std::unique_ptr<MetadataEngine> e_;
  Dir base_, top_, own_;
};

struct Child {
  pid_t pid = -1;
  int cmd = -1;   // parent writes steps
  int done = -1;  // child writes one byte per finished step
};

[[noreturn]] void child_main(const MetadataConfig& c, int proc, const std::string& top,
                             ProcessSlot* slot, int cmd, int done) {
  MetadataProcess p(c, proc, top, slot);
  Status st = p.start();
  auto report = [&](const Status& s) {
    if (!s.ok() && slot->error[0] == '\0') {
      std::snprintf(slot->error, sizeof slot->error, "process %d: %s", proc, s.ToString().c_str());
    }
    char b = s.ok() ? 'k' : 'e';
    if (::write(done, &b, 1) != 1) _exit(3);
  };
  report(st);
  char s = 0;
  while (::read(cmd, &s, 1) == 1 && s != static_cast<char>(Step::kExit)) {
    report(st.ok() ? p.run(static_cast<Step>(s)) : st);
  }
  _exit(st.ok() ? 0 : 1);
}

void draw_progress(const std::string& phase, uint64_t done, uint64_t total, double secs) {
  const int width = 30;
  int filled = total ? static_cast<int>(static_cast<double>(done) * width /
                                        static_cast<double>(total))
                     : width;
  char bar[width + 1];
  for (int i = 0; i < width; ++i) bar[i] = i < filled ? '#' : '.';
  bar[width] = '\0';
  std::fprintf(stderr, "\r%-6s [%s] %5.1f%% %10.0f ops/s", phase.c_str(), bar,
               total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0,
               secs > 0 ? static_cast<double>(done) / secs : 0.0);
  std::fflush(stderr);
}

struct PhaseResult {
  std::string name;
  uint64_t ops = 0;
  double seconds = 0;
  std::string error;
};

class Coordinator {
 public:
  Coordinator(const MetadataConfig& c, std::vector<Child> kids, ProcessSlot* slots)
      : c_(c), kids_(std::move(kids)), slots_(slots) {}

  // Every child reports once after connecting.
  bool wait_ready() { return collect("start", 0, false); }

  // Sends `s` to every child and waits for all; false on any error.
  bool step(Step s, const std::string& name, bool timed, PhaseResult* r) {
    char b = static_cast<char>(s);
    auto t0 = Clock::now();
    for (auto& k : kids_) {
      if (::write(k.cmd, &b, 1) != 1) {
        error_ = "surge-bench: lost process " + std::to_string(k.pid);
        return false;
      }
    }
    bool ok = collect(name, c_.files * static_cast<uint64_t>(kids_.size()),
                      timed && c_.progress, t0);
    if (r != nullptr) {
      r->name = name;
      r->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      for (size_t i = 0; i < kids_.size(); ++i) r->ops += slots_[i].done.load();
      if (!ok) r->error = error_;
    }
    return ok;
  }

  void finish() {
    char b = static_cast<char>(Step::kExit);
    for (auto& k : kids_) {
      if (::write(k.cmd, &b, 1) != 1) {
        // the child is gone already; waitpid below reaps it
      }
      ::close(k.cmd);
    }
    for (auto& k : kids_) {
      int status = 0;
      ::waitpid(k.pid, &status, 0);
      ::close(k.done);
    }
  }

  const std::string& error() const { return error_; }

 private:
  bool collect(const std::string& name, uint64_t total, bool progress,
               Clock::time_point t0 = Clock::now()) {
    std::vector<bool> answered(kids_.size(), false);
    size_t left = kids_.size();
    bool ok = true;
    while (left > 0) {
      std::vector<pollfd> fds;
      std::vector<size_t> which;
      for (size_t i = 0; i < kids_.size(); ++i) {
        if (!answered[i]) {
          fds.push_back({kids_[i].done, POLLIN, 0});
          which.push_back(i);
        }
      }
      int n = ::poll(fds.data(), fds.size(), 200);
      if (progress) {
        uint64_t done = 0;
        for (size_t i = 0; i < kids_.size(); ++i) done += slots_[i].done.load();
        draw_progress(name, done, total,
                      std::chrono::duration<double>(Clock::now() - t0).count());
      }
      if (n <= 0) continue;
      for (size_t j = 0; j < fds.size(); ++j) {
        if (fds[j].revents == 0) continue;
        size_t i = which[j];
        char b = 0;
        if (::read(kids_[i].done, &b, 1) != 1 || b != 'k') {
          ok = false;
          error_ = slots_[i].error[0] ? slots_[i].error
                                      : "process " + std::to_string(i) + " died during " + name;
        }
        answered[i] = true;
        --left;
      }
    }
    if (progress) std::fprintf(stderr, "\n");
    return ok;
  }

  const MetadataConfig& c_;
  std::vector<Child> kids_;
  ProcessSlot* slots_;
  std::string error_;
};

Step phase_step(const std::string& p) {
  if (p == "create") return Step::kCreate;
  if (p == "stat") return Step::kStat;
  if (p == "read") return Step::kRead;
  return Step::kRemove;
}

void print(const MetadataConfig& c, const std::vector<PhaseResult>& rs) {
  if (c.json) {
    std::printf("{\"mode\":\"md\",\"api\":\"%s\",\"processes\":%d,\"files_per_process\":%llu,"
                "\"shared_dir\":%s,\"write_bytes\":%llu,\"read_bytes\":%llu,\"phases\":[",
                c.api.c_str(), c.processes, static_cast<unsigned long long>(c.files),
                c.shared_dir ? "true" : "false", static_cast<unsigned long long>(c.write_bytes),
                static_cast<unsigned long long>(c.read_bytes));
  } else {
    std::printf("md, api %s, %d process(es), %llu files each, %s, %llu bytes written, "
                "%llu read per file\n",
                c.api.c_str(), c.processes, static_cast<unsigned long long>(c.files),
                c.shared_dir ? "one shared directory" : "a directory per process",
                static_cast<unsigned long long>(c.write_bytes),
                static_cast<unsigned long long>(c.read_bytes));
    std::printf("%-7s %10s %10s %12s\n", "phase", "ops", "seconds", "ops/s");
  }
  for (size_t i = 0; i < rs.size(); ++i) {
    const auto& r = rs[i];
    double rate = r.seconds > 0 ? static_cast<double>(r.ops) / r.seconds : 0;
    if (c.json) {
      std::string err;
      for (char ch : r.error) {
        if (ch == '"' || ch == '\\') err += '\\';
        err += (ch >= 0 && ch < 0x20) ? ' ' : ch;
      }
      std::printf("%s{\"phase\":\"%s\",\"ops\":%llu,\"seconds\":%.3f,\"ops_per_s\":%.1f,"
                  "\"error\":\"%s\"}",
                  i ? "," : "", r.name.c_str(), static_cast<unsigned long long>(r.ops), r.seconds,
                  rate, err.c_str());
    } else {
      std::printf("%-7s %10llu %10.3f %12.1f%s%s\n", r.name.c_str(),
                  static_cast<unsigned long long>(r.ops), r.seconds, rate,
                  r.error.empty() ? "" : "  ERROR: ", r.error.c_str());
    }
  }
  if (c.json) std::printf("]}\n");
}

}  // namespace

int run_metadata_bench(const MetadataConfig& c) {
  const size_t n = static_cast<size_t>(c.processes);
  void* mem = ::mmap(nullptr, sizeof(ProcessSlot) * n, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::perror("surge-bench: mmap of the shared counters");
    return 1;
  }
  auto* slots = static_cast<ProcessSlot*>(mem);
  for (size_t i = 0; i < n; ++i) new (&slots[i]) ProcessSlot();
  const std::string top = "mdtest." + std::to_string(::getpid());

  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<Child> kids;
  for (int p = 0; p < c.processes; ++p) {
    int cmd[2], done[2];
    if (::pipe(cmd) != 0 || ::pipe(done) != 0) {
      std::perror("surge-bench: pipe");
      return 1;
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("surge-bench: fork");
      return 1;
    }
    if (pid == 0) {
      for (auto& k : kids) {
        ::close(k.cmd);
        ::close(k.done);
      }
      ::close(cmd[1]);
      ::close(done[0]);
      child_main(c, p, top, &slots[p], cmd[0], done[1]);
    }
    ::close(cmd[0]);
    ::close(done[1]);
    kids.push_back({pid, cmd[1], done[0]});
  }

  Coordinator co(c, std::move(kids), slots);
  std::vector<PhaseResult> results;
  bool ok = co.wait_ready() && co.step(Step::kTop, "mkdir", false, nullptr) &&
            co.step(Step::kOwnDir, "mkdir", false, nullptr);
  bool removed = false;
  for (const auto& ph : c.phases) {
    if (!ok) break;
    PhaseResult r;
    ok = co.step(phase_step(ph), ph, true, &r);
    results.push_back(r);
    removed = removed || ph == "remove";
  }
  if (ok && removed && !c.keep) {
    ok = co.step(Step::kRemoveDirs, "rmdir", false, nullptr) &&
         co.step(Step::kRemoveTop, "rmdir", false, nullptr);
  }
  std::string err = co.error();
  co.finish();
  print(c, results);
  if (!ok) {
    std::fprintf(stderr, "surge-bench: %s\n", err.c_str());
    return 1;
  }
  return 0;
}

}  // namespace surge::bench
