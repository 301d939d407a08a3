// surge-stress: a kill-and-verify stress run of a whole Surge cluster, in
// the manner of RocksDB's db_stress. Real daemons on 127.0.0.1
// (tests/client's LocalCluster: one surge-mds, N surge-ods, a FUSE mount),
// replicated and erasure-coded directories, workers doing mixed IO through libsurge and
// through the mount (io_worker.h), a kill schedule SIGKILLing and
// restarting data servers and the MDS (chaos.h), and every daemon's RSS and
// open descriptors sampled from /proc (proc_monitor.h). At the end every
// daemon is back, the chains heal, every acknowledged byte is read back
// and checked against the workers' models, and `surgectl scrub` must find
// every chunk's replicas identical and every EC parity window the code of
// its data.
//
// Exit status 0 when all held; 1 on a lost or wrong byte, a lost or
// resurrected file, a daemon that died without being killed, descriptors
// growing without bound, chains that never healed, a scrub that found
// differing replicas, or (unless --allow-io-errors) any IO that returned an
// error while no more data servers were away than every file survives
// losing (replicas - 1, or M of an EC K+M); 2 on bad usage.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "tests/client/chain_state.h"
#include "tests/client/local_cluster.h"
#include "tests/stress/chaos.h"
#include "tests/stress/io_worker.h"
#include "tests/stress/proc_monitor.h"

namespace surge::stress {
namespace {

using namespace std::chrono_literals;

struct Options {
  double duration_s = 60;
  uint64_t seed = 0;
  int clients = 3;        // libsurge workers
  int mount_workers = 2;  // workers through the one FUSE mount (0: no mount)
  int ods = 4;
  std::vector<int> replicas = {2, 3};
  std::vector<std::pair<int, int>> ec;  // K+M directories beside the replicated ones
  double kill_interval_s = 6;
  int mds_kill_percent = 20;
  bool kill_ods = true;
  double sample_s = 5;
  uint64_t max_file_bytes = 4 << 20;
  int max_files = 6;
  uint32_t stripe_size = 256 << 10;
  int replace_after_ms = 0;  // 0: the MDS's default
  bool allow_io_errors = false;
  int fd_slack = 64;
  std::string csv;
  std::string mds_toml;  // appended to the MDS's config
};

const char* kUsage =
    "usage: surge-stress [--duration SEC] [--seed N] [--clients N] [--mount-workers N]\n"
    "         [--ods N] [--replicas 2,3|none] [--ec K+M,...] [--kill-interval SEC]\n"
    "         [--mds-kill-percent P] [--no-ods-kills] [--sample-interval SEC]\n"
    "         [--max-file-mib N] [--max-files N]\n"
    "         [--stripe-size BYTES] [--replace-after-ms MS] [--allow-io-errors]\n"
    "         [--fd-slack N] [--csv FILE] [--mds-toml TEXT]\n";

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--no-ods-kills") {
      o->kill_ods = false;
      continue;
    }
    if (a == "--allow-io-errors") {
      o->allow_io_errors = true;
      continue;
    }
    if ((v = val()) == nullptr) return false;
    if (a == "--duration") o->duration_s = std::atof(v);
    else if (a == "--seed") o->seed = std::strtoull(v, nullptr, 10);
    else if (a == "--clients") o->clients = std::atoi(v);
    else if (a == "--mount-workers") o->mount_workers = std::atoi(v);
    else if (a == "--ods") o->ods = std::atoi(v);
    else if (a == "--kill-interval") o->kill_interval_s = std::atof(v);
    else if (a == "--mds-kill-percent") o->mds_kill_percent = std::atoi(v);
    else if (a == "--sample-interval") o->sample_s = std::atof(v);
    else if (a == "--max-file-mib") o->max_file_bytes = std::strtoull(v, nullptr, 10) << 20;
    else if (a == "--max-files") o->max_files = std::atoi(v);
    else if (a == "--stripe-size") o->stripe_size = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
    else if (a == "--replace-after-ms") o->replace_after_ms = std::atoi(v);
    else if (a == "--fd-slack") o->fd_slack = std::atoi(v);
    else if (a == "--csv") o->csv = v;
    else if (a == "--mds-toml") o->mds_toml = v;
    else if (a == "--replicas") {
      o->replicas.clear();
      if (std::strcmp(v, "none") == 0) continue;  // EC directories only
      for (const char* p = v; *p != '\0';) {
        o->replicas.push_back(std::atoi(p));
        const char* c = std::strchr(p, ',');
        if (c == nullptr) break;
        p = c + 1;
      }
    } else if (a == "--ec") {
      for (const char* p = v; *p != '\0';) {
        char* end = nullptr;
        const long k = std::strtol(p, &end, 10);
        if (*end != '+') return false;
        const long m = std::strtol(end + 1, &end, 10);
        o->ec.emplace_back(static_cast<int>(k), static_cast<int>(m));
        if (*end == '\0') break;
        if (*end != ',') return false;
        p = end + 1;
      }
    } else {
      return false;
    }
  }
  if ((o->replicas.empty() && o->ec.empty()) || o->clients + o->mount_workers < 1) return false;
  for (int r : o->replicas) {
    if (r < 1 || r > o->ods) return false;
  }
  for (auto [k, m] : o->ec) {
    if (k < 1 || m < 1 || k + m > o->ods) return false;
  }
  return o->duration_s > 0 && o->sample_s > 0 && o->kill_interval_s > 0;
}

// A directory the workers share out: its path, the `surgectl setstripe`
// arguments that make it, and how many data servers its files survive
// losing at once.
struct StressDir {
  std::string path;
  std::string stripe;
  int tolerates = 0;
};

std::vector<StressDir> stress_dirs(const Options& o) {
  std::vector<StressDir> dirs;
  const std::string layout =
      " --count " + std::to_string(std::min(3, o.ods)) + " --size " + std::to_string(o.stripe_size);
  for (int r : o.replicas) {
    dirs.push_back({"/r" + std::to_string(r), "--replicas " + std::to_string(r) + layout, r - 1});
  }
  for (auto [k, m] : o.ec) {
    const std::string km = std::to_string(k) + "+" + std::to_string(m);
    dirs.push_back({"/ec" + std::to_string(k) + "p" + std::to_string(m), "--ec " + km + layout, m});
  }
  return dirs;
}

std::chrono::steady_clock::time_point g_start;
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - g_start).count();
}

// SURGE_BUILD_DIR for LocalCluster: as ctest sets it, or the build tree
// this binary is in (BUILD/tests/stress/surge-stress).
bool find_build_dir() {
  if (std::getenv("SURGE_BUILD_DIR") != nullptr) return true;
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return false;
  const auto build = exe.parent_path().parent_path().parent_path();
  if (!std::filesystem::exists(build / "mds" / "surge-mds")) return false;
  setenv("SURGE_BUILD_DIR", build.c_str(), 1);
  return true;
}

int run(const Options& o) {
  g_start = std::chrono::steady_clock::now();
  std::printf(
      "surge-stress: seed %llu, %.0f s, %d libsurge + %d mount workers, %d data servers, "
      "directories",
      static_cast<unsigned long long>(o.seed), o.duration_s, o.clients, o.mount_workers, o.ods);
  const std::vector<StressDir> dirs = stress_dirs(o);
  for (const auto& d : dirs) std::printf(" %s", d.path.c_str());
  std::printf(", kill interval %.1f s, MDS kills %d%% of ticks%s\n", o.kill_interval_s,
              o.mds_kill_percent, o.kill_ods ? "" : ", no data-server kills");
  test::ClusterConfig cfg;
  cfg.ods_count = o.ods;
  cfg.client_io_timeout_ms = "8000";
  // A small fd cache, full within the warm-up: the descriptor check then
  // sees a leak, not the cache filling (1024 objects by default, 3 fds
  // each; degraded EC writes read other positions' chunks and filled it
  // past the check's slack within a run). It also keeps eviction busy.
  cfg.ods_args = {"--max-open-objects", "64"};
  if (o.replace_after_ms > 0) {
    cfg.mds_toml = "[chains]\nreplace_after_ms = " + std::to_string(o.replace_after_ms) + "\n";
  }
  // More of the MDS's config, e.g. "[store]\nmemtable_mb = 4\n".
  cfg.mds_toml += o.mds_toml;
  auto started = test::LocalCluster::Start(cfg);
  if (!started.ok()) {
    std::printf("FAIL: cluster start: %s\n", started.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<test::LocalCluster> cluster = std::move(*started);
  std::printf("cluster in %s\n", cluster->dir().c_str());
  constexpr int kIoTimeoutMs = 8000;
  {
    auto cl = cluster->connect(kIoTimeoutMs);
    if (!cl.ok()) {
      std::printf("FAIL: connect: %s\n", cl.status().ToString().c_str());
      return 1;
    }
    for (const auto& d : dirs) {
      Status st = (*cl)->mkdir(d.path, 0777);
      std::string out;
      const std::string args = "setstripe " + d.stripe + " " + d.path;
      if (!st.ok() || test::run_surgectl(*cluster, args, &out) != 0) {
        std::printf("FAIL: making %s: %s %s\n", d.path.c_str(), st.ToString().c_str(), out.c_str());
        return 1;
      }
    }
  }
  std::string mnt;
  if (o.mount_workers > 0) {
    auto m = cluster->mount("mnt");
    if (!m.ok()) {
      std::printf("FAIL: mount: %s\n", m.status().ToString().c_str());
      return 1;
    }
    mnt = *m;
  }

  RunLog log;
  std::vector<std::unique_ptr<IoWorker>> workers;
  for (int w = 0; w < o.clients + o.mount_workers; ++w) {
    const bool lib = w < o.clients;
    const StressDir& d = dirs[static_cast<size_t>(w) % dirs.size()];
    WorkerOptions wo;
    wo.dir = d.path + (lib ? "/c" : "/m") + std::to_string(lib ? w : w - o.clients);
    wo.max_file_bytes = o.max_file_bytes;
    wo.max_files = o.max_files;
    wo.seed = o.seed * 1000 + static_cast<uint64_t>(w);
    std::unique_ptr<FileIo> io;
    if (lib) {
      auto cl = cluster->connect(kIoTimeoutMs);
      if (!cl.ok()) {
        std::printf("FAIL: connect: %s\n", cl.status().ToString().c_str());
        return 1;
      }
      io = libsurge_io(std::move(*cl));
    } else {
      io = posix_io(mnt);
    }
    workers.push_back(std::make_unique<IoWorker>(std::move(io), wo, &log));
  }

  std::mutex cluster_mu;
  ChaosOptions co;
  co.kill_interval_s = o.kill_interval_s;
  co.max_down = std::min_element(dirs.begin(), dirs.end(), [](const auto& a, const auto& b) {
                  return a.tolerates < b.tolerates;
                })->tolerates;
  co.mds_kill_percent = o.mds_kill_percent;
  co.kill_ods = o.kill_ods && co.max_down > 0;
  Chaos chaos(cluster.get(), &cluster_mu, co, o.seed ^ 0xC4A05ull, now_s);
  if (Status st = chaos.init(o.ods); !st.ok()) {
    std::printf("FAIL: %s\n", st.ToString().c_str());
    return 1;
  }

  ProcMonitor monitor;
  std::vector<std::string> failures;
  auto sample = [&] {
    std::map<std::string, pid_t> d;
    std::lock_guard<std::mutex> l(cluster_mu);
    d["mds"] = cluster->mds_pid();
    for (int i = 0; i < o.ods; ++i) d["ods" + std::to_string(i)] = cluster->ods_pid(i);
    if (!mnt.empty()) d["mount"] = cluster->mount_pid(mnt);
    for (const auto& dead : monitor.sample(now_s(), d)) {
      bool ours = false;
      for (const auto& [name, p] : d) ours |= dead.rfind(name + " ", 0) == 0 && chaos.killed(p);
      if (!ours) {
        const std::string name = dead.substr(0, dead.find(' '));
        const std::string log = name == "mount" ? "fuse-mnt" : name;
        failures.push_back("a daemon died that the run did not kill: " + dead + "; its log ends:\n" +
                           cluster->log_tail(log, 12));
        std::printf("FAIL: %s died, not killed by the run\n", dead.c_str());
      }
    }
  };
  sample();

  std::atomic<bool> stop_io{false}, stop_chaos{false}, release_chaos{false};
  std::vector<std::thread> threads;
  for (auto& w : workers) threads.emplace_back([&w, &stop_io] { w->run(stop_io); });
  // The daemons the schedule restarts are children of its thread, and
  // die with that thread (LocalCluster sets PR_SET_PDEATHSIG, which follows
  // the forking thread): it stays until the run is over.
  std::thread chaos_thread([&] {
    chaos.run(stop_chaos);
    while (!release_chaos.load()) std::this_thread::sleep_for(20ms);
  });
  struct Release {
    std::atomic<bool>& flag;
    std::thread& t;
    ~Release() {
      flag = true;
      t.join();
    }
  } release{release_chaos, chaos_thread};
  const auto end = g_start + std::chrono::duration<double>(o.duration_s);
  double next_print = 0;
  while (std::chrono::steady_clock::now() < end && failures.empty() && chaos.error().empty() &&
         log.mismatches.empty()) {
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(o.sample_s, 1.0)));
    if (now_s() < next_print) continue;
    next_print = now_s() + o.sample_s;
    sample();
    std::printf("t=%6.1fs rounds %llu, %.0f MiB written, %.0f MiB checked, %llu IO errors; RSS MiB:",
                now_s(), static_cast<unsigned long long>(log.rounds.load()),
                static_cast<double>(log.bytes_written.load()) / (1 << 20),
                static_cast<double>(log.bytes_checked.load()) / (1 << 20),
                static_cast<unsigned long long>(log.io_errors.load()));
    std::map<std::string, const Incarnation*> last;
    for (const auto& inc : monitor.incarnations()) last[inc.name] = &inc;
    for (const auto& [name, inc] : last) {
      if (!inc->samples.empty()) {
        std::printf(" %s %.1f/%dfd", name.c_str(), static_cast<double>(inc->samples.back().rss_kib) / 1024,
                    inc->samples.back().fds);
      }
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  stop_chaos = true;
  while (!chaos.stopped()) std::this_thread::sleep_for(20ms);
  stop_io = true;
  // A worker stuck in a call past every timeout is a hang: report it and
  // end (the daemons die with this process).
  std::atomic<bool> joined{false};
  std::thread watchdog([&] {
    const auto give_up = std::chrono::steady_clock::now() + 180s;
    while (!joined.load()) {
      if (std::chrono::steady_clock::now() > give_up) {
        std::printf("FAIL: a worker did not return within 180 s of the stop (a hung IO)\n");
        std::fflush(stdout);
        std::quick_exit(1);
      }
      std::this_thread::sleep_for(100ms);
    }
  });
  for (auto& t : threads) t.join();
  joined = true;
  watchdog.join();
  std::printf("t=%6.1fs IO stopped: %llu rounds, %.0f MiB written, %llu IO errors\n", now_s(),
              static_cast<unsigned long long>(log.rounds.load()),
              static_cast<double>(log.bytes_written.load()) / (1 << 20),
              static_cast<unsigned long long>(log.io_errors.load()));
  if (!chaos.error().empty()) failures.push_back(chaos.error());

  if (Status st = chaos.heal(240); !st.ok()) failures.push_back("healing: " + st.ToString());
  sample();
  int files = 0;
  {
    auto cl = cluster->connect(kIoTimeoutMs);
    if (!cl.ok()) {
      failures.push_back("connect for the final check: " + cl.status().ToString());
    } else {
      auto checker = libsurge_io(std::move(*cl));
      for (auto& w : workers) files += w->verify(*checker);
    }
  }
  std::printf("t=%6.1fs checked %d files through a fresh libsurge client\n", now_s(), files);
  std::string out;
  const int scrub_rc = test::run_surgectl(*cluster, "scrub", &out);
  const size_t summary = out.rfind("scrub: ");
  std::printf("t=%6.1fs surgectl scrub (exit %d): %s", now_s(), scrub_rc,
              summary == std::string::npos ? out.c_str() : out.substr(summary).c_str());
  if (scrub_rc != 0) failures.push_back("surgectl scrub exited " + std::to_string(scrub_rc) + ":\n" + out);
  sample();

  std::printf("\nevery daemon's memory and descriptors (sampled every %.0f s):\n%s", o.sample_s,
              monitor.table(12).c_str());
  if (!o.csv.empty()) {
    std::ofstream(o.csv) << monitor.csv();
    std::printf("samples in %s\n", o.csv.c_str());
  }
  if (std::string g = monitor.fd_growth(o.fd_slack); !g.empty()) {
    failures.push_back("descriptors growing: " + g);
  }
  uint64_t unknown = 0;
  (void)unknown;
  std::printf("\nkills: %d data server (%d of them during the victim's own resync), %d MDS\n",
              chaos.ods_kills(), chaos.resync_kills(), chaos.mds_kills());
  std::printf("IO: %llu rounds, %.0f MiB written, %.0f MiB checked, %llu rounds returned an error"
              " (their updates may or may not have happened; the check allows both)\n",
              static_cast<unsigned long long>(log.rounds.load()),
              static_cast<double>(log.bytes_written.load()) / (1 << 20),
              static_cast<double>(log.bytes_checked.load()) / (1 << 20),
              static_cast<unsigned long long>(log.io_errors.load()));
  if (log.io_errors.load() > 0 && !o.allow_io_errors) {
    failures.push_back(
        std::to_string(log.io_errors.load()) +
        " IO rounds returned an error with no more data servers away than every file "
        "survives losing, "
        "the first: " +
        log.errors.front());
  }
  for (const auto& m : log.mismatches) failures.push_back(m);
  if (failures.empty()) {
    std::printf("PASS: every acknowledged byte read back, replicas identical, no daemon crashed\n");
    return 0;
  }
  for (const auto& f : failures) std::printf("FAIL: %s\n", f.c_str());
  return 1;
}

}  // namespace
}  // namespace surge::stress

int main(int argc, char** argv) {
  surge::stress::Options o;
  o.seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) % 1000000;
  if (!surge::stress::parse(argc, argv, &o)) {
    std::fputs(surge::stress::kUsage, stderr);
    return 2;
  }
  if (!surge::stress::find_build_dir()) {
    std::fputs("surge-stress: SURGE_BUILD_DIR is not set and the build tree was not found\n", stderr);
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  // The clients log each retry (info, warn); only their errors here,
  // unless SURGE_STRESS_LOG names another level (to follow a failure).
  const char* level = std::getenv("SURGE_STRESS_LOG");
  (void)surge::init_logging(level != nullptr ? level : "error");
  return surge::stress::run(o);
}
