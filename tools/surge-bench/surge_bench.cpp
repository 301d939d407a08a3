// surge-bench: IOR-style throughput runs, through the mount (POSIX calls on
// a directory) or through libsurge directly (--api native).
//
// N tasks (threads) each move --block-size bytes in --transfer-size IOs,
// into one file each (--file-per-process) or into disjoint blocks of one
// shared file (task i owns [i*block, (i+1)*block), as IOR's segment layout;
// --interleaved: record j of task i at (j*N + i)*transfer, IOR-hard's).
// Phases: write (then fsync with --fsync), read. A progress bar goes to
// stderr; the result (MiB/s and IOPS per phase) to stdout, --json for tools.
// The native path moves data from registered buffers (the zero-copy path).
// --mode md is the mdtest-like metadata run instead (metadata_bench.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "surge/client.h"
#include "tools/surge-bench/metadata_bench.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Config {
  std::string api = "posix";
  std::string path = ".";
  std::string mds;
  std::string key_file = "/etc/surge/cluster.key";
  uint64_t transfer = 1 << 20;
  uint64_t block = 256ull << 20;
  int tasks = 1;
  bool file_per_process = false;
  bool interleaved = false;  // shared file: task t's j-th IO at (j * tasks + t) * transfer
  bool do_write = false;
  bool do_read = false;
  bool fsync = false;
  bool drop_caches = false;
  bool keep = false;
  bool json = false;
  bool progress = true;
};

struct PhaseResult {
  std::string name;
  uint64_t bytes = 0;
  uint64_t ops = 0;
  double seconds = 0;
  int error = 0;
  std::string error_text;
};

uint64_t parse_size(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string unit(end);
  for (auto& c : unit) c = static_cast<char>(std::tolower(c));
  uint64_t mul = 1;
  if (unit == "k" || unit == "kb" || unit == "kib") mul = 1ull << 10;
  if (unit == "m" || unit == "mb" || unit == "mib") mul = 1ull << 20;
  if (unit == "g" || unit == "gb" || unit == "gib") mul = 1ull << 30;
  if (unit == "t" || unit == "tb" || unit == "tib") mul = 1ull << 40;
  return static_cast<uint64_t>(v * static_cast<double>(mul));
}

// One IO engine per API.
class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string setup() { return ""; }
  // Per task: open (create for write), IO, close. Return errno or 0.
  virtual int open(int task, bool write, void** handle) = 0;
  virtual int io(void* handle, bool write, char* buf, uint64_t len, uint64_t off) = 0;
  virtual int sync(void* handle) = 0;
  virtual int close(void* handle) = 0;
  virtual char* buffer(int task) = 0;
  virtual void cleanup() = 0;
};

std::string file_name(const Config& c, int task) {
  return c.file_per_process ? "surge-bench." + std::to_string(task) : std::string("surge-bench");
}

class PosixEngine : public Engine {
 public:
  explicit PosixEngine(const Config& c) : c_(c) {
    for (int i = 0; i < c.tasks; ++i) {
      void* p = nullptr;
      if (posix_memalign(&p, 4096, c.transfer) != 0) p = nullptr;
      std::memset(p, 'a' + i % 26, c.transfer);
      bufs_.push_back(static_cast<char*>(p));
    }
  }
  ~PosixEngine() override {
    for (char* b : bufs_) free(b);
  }
  int open(int task, bool write, void** h) override {
    std::string p = c_.path + "/" + file_name(c_, task);
    int fd = ::open(p.c_str(), write ? (O_WRONLY | O_CREAT) : O_RDONLY, 0644);
    if (fd < 0) return errno;
    *h = reinterpret_cast<void*>(static_cast<intptr_t>(fd));
    return 0;
  }
  int io(void* h, bool write, char* buf, uint64_t len, uint64_t off) override {
    int fd = static_cast<int>(reinterpret_cast<intptr_t>(h));
    uint64_t done = 0;
    while (done < len) {
      ssize_t n = write ? ::pwrite(fd, buf + done, len - done, static_cast<off_t>(off + done))
                        : ::pread(fd, buf + done, len - done, static_cast<off_t>(off + done));
      if (n < 0) return errno;
      if (n == 0) return EIO;  // short file: the read phase expects the written data
      done += static_cast<uint64_t>(n);
    }
    return 0;
  }
  int sync(void* h) override {
    return ::fsync(static_cast<int>(reinterpret_cast<intptr_t>(h))) == 0 ? 0 : errno;
  }
  int close(void* h) override {
    return ::close(static_cast<int>(reinterpret_cast<intptr_t>(h))) == 0 ? 0 : errno;
  }
  char* buffer(int task) override { return bufs_[static_cast<size_t>(task)]; }
  void cleanup() override {
    for (int i = 0; i < (c_.file_per_process ? c_.tasks : 1); ++i) {
      ::unlink((c_.path + "/" + file_name(c_, i)).c_str());
    }
  }

 private:
  const Config& c_;
  std::vector<char*> bufs_;
};

class NativeEngine : public Engine {
 public:
  explicit NativeEngine(const Config& c) : c_(c) {}
  std::string setup() override {
    surge::ClientOptions o;
    o.mds_address = c_.mds;
    o.cluster_key_file = c_.key_file;
    o.pool_buffers = static_cast<size_t>(std::max(8, c_.tasks * 2));
    auto cl = surge::Client::Connect(o);
    if (!cl.ok()) return cl.status().ToString();
    client_ = std::move(*cl);
    for (int i = 0; i < c_.tasks; ++i) {
      auto b = client_->register_buffer(c_.transfer);
      if (!b.ok()) return b.status().ToString();
      std::memset((*b)->data(), 'a' + i % 26, c_.transfer);
      bufs_.push_back(std::move(*b));
    }
    auto st = client_->stat(c_.path);
    if (!st.ok()) {
      auto s = client_->mkdir(c_.path, 0755);
      if (!s.ok()) return s.ToString();
    }
    return "";
  }
  int open(int task, bool write, void** h) override {
    auto f = client_->open(c_.path + "/" + file_name(c_, task),
                           write ? (O_WRONLY | O_CREAT) : O_RDONLY, 0644);
    if (!f.ok()) return f.status().to_errno();
    *h = new surge::FileRef(std::move(*f));
    return 0;
  }
  int io(void* h, bool write, char* buf, uint64_t len, uint64_t off) override {
    surge::File& f = **static_cast<surge::FileRef*>(h);
    auto n = write ? client_->pwrite(f, buf, len, off) : client_->pread(f, buf, len, off);
    if (!n.ok()) {
      last_error_ = n.status().ToString();
      return n.status().to_errno();
    }
    return *n == len ? 0 : EIO;
  }
  int sync(void* h) override {
    auto st = client_->fsync(**static_cast<surge::FileRef*>(h), false);
    return st.ok() ? 0 : st.to_errno();
  }
  int close(void* h) override {
    auto* ref = static_cast<surge::FileRef*>(h);
    auto st = client_->close(std::move(*ref));
    delete ref;
    return st.ok() ? 0 : st.to_errno();
  }
  char* buffer(int task) override {
    return reinterpret_cast<char*>(bufs_[static_cast<size_t>(task)]->data());
  }
  void cleanup() override {
    for (int i = 0; i < (c_.file_per_process ? c_.tasks : 1); ++i) {
      (void)client_->unlink(c_.path + "/" + file_name(c_, i));
    }
  }

 private:
  const Config& c_;
  std::unique_ptr<surge::Client> client_;
  std::vector<std::unique_ptr<surge::RegisteredBuffer>> bufs_;
  std::string last_error_;
};

void draw_progress(const char* phase, uint64_t done, uint64_t total, double secs) {
  int width = 30;
  int filled = total ? static_cast<int>(static_cast<double>(done) / static_cast<double>(total) *
                                        width)
                     : width;
  char bar[64];
  for (int i = 0; i < width; ++i) bar[i] = i < filled ? '#' : '.';
  bar[width] = '\0';
  double mib = static_cast<double>(done) / (1 << 20);
  std::fprintf(stderr, "\r%-5s [%s] %5.1f%% %9.1f MiB/s", phase, bar,
               total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0,
               secs > 0 ? mib / secs : 0.0);
  std::fflush(stderr);
}

PhaseResult run_phase(const Config& c, Engine& e, bool write) {
  PhaseResult r;
  r.name = write ? "write" : "read";
  const uint64_t total = c.block * static_cast<uint64_t>(c.tasks);
  std::atomic<uint64_t> done{0};
  std::atomic<int> error{0};
  auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < c.tasks; ++t) {
    ts.emplace_back([&, t] {
      void* h = nullptr;
      int rc = e.open(t, write, &h);
      if (rc != 0) {
        error = rc;
        return;
      }
      uint64_t base = c.file_per_process ? 0 : static_cast<uint64_t>(t) * c.block;
      for (uint64_t off = 0; off < c.block && error.load() == 0; off += c.transfer) {
        uint64_t n = std::min(c.transfer, c.block - off);
        uint64_t at = base + off;
        if (c.interleaved && !c.file_per_process) {
          at = (off / c.transfer * static_cast<uint64_t>(c.tasks) + static_cast<uint64_t>(t)) *
               c.transfer;
        }
        rc = e.io(h, write, e.buffer(t), n, at);
        if (rc != 0) {
          error = rc;
          break;
        }
        done += n;
      }
      if (write && c.fsync && error.load() == 0) {
        rc = e.sync(h);
        if (rc != 0) error = rc;
      }
      rc = e.close(h);
      if (rc != 0 && error.load() == 0) error = rc;
    });
  }
  std::atomic<bool> finished{false};
  std::thread progress;
  if (c.progress) {
    progress = std::thread([&] {
      while (!finished.load()) {
        draw_progress(r.name.c_str(), done.load(), total,
                      std::chrono::duration<double>(Clock::now() - t0).count());
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  }
  for (auto& t : ts) t.join();
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  finished = true;
  if (progress.joinable()) {
    progress.join();
    draw_progress(r.name.c_str(), done.load(), total, r.seconds);
    std::fprintf(stderr, "\n");
  }
  r.bytes = done.load();
  r.ops = (r.bytes + c.transfer - 1) / c.transfer;
  r.error = error.load();
  if (r.error != 0) r.error_text = std::strerror(r.error);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  std::string transfer = "1m", block = "256m";
  CLI::App app{"surge-bench: IOR-style throughput, or mdtest-like metadata rates (--mode md), "
               "through the mount or libsurge"};
  std::string mode = "io";
  surge::bench::MetadataConfig md;
  std::string md_phases = "create,stat,read,remove", write_bytes = "0", read_bytes = "0";
  app.add_option("--mode", mode, "io (IOR-like, default) or md (mdtest-like)")
      ->check(CLI::IsMember({"io", "md"}));
  app.add_option("--files", md.files, "md: files per process")->check(CLI::PositiveNumber);
  app.add_flag("--shared-dir", md.shared_dir, "md: every process in one directory");
  app.add_option("--write-bytes", write_bytes, "md: bytes written into each file by create");
  app.add_option("--read-bytes", read_bytes, "md: bytes read from each file by read");
  app.add_option("--phases", md_phases, "md: comma-separated, of create,stat,read,remove");
  app.add_option("--api", c.api, "posix (through a mounted directory) or native (libsurge)")
      ->check(CLI::IsMember({"posix", "native"}));
  app.add_option("-o,--path", c.path,
                 "posix: directory in the mount; native: directory in the file system");
  app.add_option("--mds", c.mds, "native: MDS address, tcp://HOST:PORT");
  app.add_option("--key-file", c.key_file, "native: cluster key file");
  app.add_option("-t,--transfer-size", transfer, "bytes per IO (k, m, g suffixes)");
  app.add_option("-b,--block-size", block, "bytes per task");
  app.add_option("-n,--tasks", c.tasks, "parallel tasks (threads; md: processes)")->check(CLI::PositiveNumber);
  app.add_flag("-F,--file-per-process", c.file_per_process, "one file per task (default shared)");
  app.add_flag("--interleaved", c.interleaved,
               "shared file: the tasks' IOs interleave, record by record (IOR-hard's pattern)");
  app.add_flag("-w,--write", c.do_write, "write phase");
  app.add_flag("-r,--read", c.do_read, "read phase (both when neither is given)");
  app.add_flag("-e,--fsync", c.fsync, "fsync after writing");
  app.add_flag("--drop-caches", c.drop_caches, "posix: drop the page cache before reading");
  app.add_flag("-k,--keep", c.keep, "keep the files");
  app.add_flag("--json", c.json, "JSON result on stdout");
  bool no_progress = false;
  app.add_flag("--no-progress", no_progress, "no progress bar");
  CLI11_PARSE(app, argc, argv);
  c.transfer = parse_size(transfer);
  c.block = parse_size(block);
  c.progress = !no_progress;
  if (!c.do_write && !c.do_read) c.do_write = c.do_read = true;
  if (c.transfer == 0 || c.block == 0 || c.block % c.transfer != 0) {
    std::fprintf(stderr, "surge-bench: block size must be a non-zero multiple of transfer size\n");
    return 2;
  }
  if (c.api == "native" && c.mds.empty()) {
    std::fprintf(stderr, "surge-bench: --api native needs --mds\n");
    return 2;
  }
  (void)surge::init_logging("warn");
  if (mode == "md") {
    md.api = c.api;
    md.path = c.path;
    md.mds = c.mds;
    md.key_file = c.key_file;
    md.processes = c.tasks;
    md.write_bytes = parse_size(write_bytes);
    md.read_bytes = parse_size(read_bytes);
    md.keep = c.keep;
    md.json = c.json;
    md.progress = c.progress && isatty(STDERR_FILENO);
    md.phases.clear();
    for (size_t i = 0; i <= md_phases.size();) {
      size_t j = md_phases.find(',', i);
      if (j == std::string::npos) j = md_phases.size();
      std::string ph = md_phases.substr(i, j - i);
      if (ph != "create" && ph != "stat" && ph != "read" && ph != "remove") {
        std::fprintf(stderr, "surge-bench: unknown md phase '%s'\n", ph.c_str());
        return 2;
      }
      md.phases.push_back(ph);
      i = j + 1;
    }
    return surge::bench::run_metadata_bench(md);
  }

  std::unique_ptr<Engine> e;
  if (c.api == "posix") {
    e = std::make_unique<PosixEngine>(c);
  } else {
    e = std::make_unique<NativeEngine>(c);
  }
  std::string err = e->setup();
  if (!err.empty()) {
    std::fprintf(stderr, "surge-bench: %s\n", err.c_str());
    return 1;
  }
  std::vector<PhaseResult> results;
  if (c.do_write) results.push_back(run_phase(c, *e, true));
  if (c.do_read && (results.empty() || results.back().error == 0)) {
    if (c.drop_caches && c.api == "posix") {
      sync();
      int fd = ::open("/proc/sys/vm/drop_caches", O_WRONLY);
      if (fd >= 0) {
        if (::write(fd, "3\n", 2) != 2) std::fprintf(stderr, "surge-bench: drop_caches failed\n");
        ::close(fd);
      }
    }
    results.push_back(run_phase(c, *e, false));
  }
  if (!c.keep) e->cleanup();

  int rc = 0;
  if (c.json) {
    std::printf("{\"api\":\"%s\",\"tasks\":%d,\"transfer\":%llu,\"block\":%llu,"
                "\"file_per_process\":%s,\"phases\":[",
                c.api.c_str(), c.tasks, static_cast<unsigned long long>(c.transfer),
                static_cast<unsigned long long>(c.block), c.file_per_process ? "true" : "false");
  } else {
    std::printf("api %s, %d task(s), transfer %llu KiB, block %llu MiB, %s\n", c.api.c_str(),
                c.tasks, static_cast<unsigned long long>(c.transfer >> 10),
                static_cast<unsigned long long>(c.block >> 20),
                c.file_per_process ? "file per task" : "shared file");
    std::printf("%-6s %12s %10s %12s %10s\n", "phase", "MiB", "seconds", "MiB/s", "IOPS");
  }
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    double mib = static_cast<double>(r.bytes) / (1 << 20);
    double mibs = r.seconds > 0 ? mib / r.seconds : 0;
    double iops = r.seconds > 0 ? static_cast<double>(r.ops) / r.seconds : 0;
    if (r.error != 0) rc = 1;
    if (c.json) {
      std::printf("%s{\"phase\":\"%s\",\"bytes\":%llu,\"seconds\":%.3f,\"mib_per_s\":%.1f,"
                  "\"iops\":%.1f,\"error\":\"%s\"}",
                  i ? "," : "", r.name.c_str(), static_cast<unsigned long long>(r.bytes),
                  r.seconds, mibs, iops, r.error_text.c_str());
    } else {
      std::printf("%-6s %12.1f %10.3f %12.1f %10.1f%s%s\n", r.name.c_str(), mib, r.seconds, mibs,
                  iops, r.error ? "  ERROR: " : "", r.error_text.c_str());
    }
  }
  if (c.json) std::printf("]}\n");
  return rc;
}
