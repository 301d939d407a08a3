// mds_bench: metadata operations per second through the RPC client, next to
// the ceiling, raw RocksDB synced writes from as many threads, in the same
// run, on the same file system.
//
//   mds_bench [--clients 8] [--files 2000] [--shared-dir] [--dir /tmp] [--etcd]
//             [--prefill N [--settle S]]
//
// Starts surge-mds (from $SURGE_BUILD_DIR, or next to this binary's build
// tree) on a fresh data dir with a synced WAL, registers one placeholder
// data server so files get layouts, then each client (own connection,
// one call at a time) creates --files empty files, stats them (lookup),
// and unlinks them; in its own directory, or all in one with --shared-dir.
// The ceiling: the same number of threads each doing --files single-key
// RocksDB writes with WriteOptions::sync = true (RocksDB group commit).
// --etcd: then the same on a second MDS with store.backend = etcd, on a
// 3-member etcd cluster started on loopback in --dir (fsync on).
// --prefill N: before the timed phases, N entries are created in every
// directory the clients use (spread over the clients, untimed but its rate
// printed), so create, stat and unlink are measured in directories of N
// entries (issue 14: the same cost as in an empty one); after them, one
// client lists the first directory whole in readdirplus pages, and the
// MDS's VmRSS before and after the listing and its VmHWM are printed (the
// listing must not hold memory in proportion to the directory). --settle S
// waits S seconds between the prefill and the timed phases. A short phase
// after a prefill can catch the flush of the prefill's last memtable and
// an L0 compaction whole (docs/metadata-path.md, "Large directories"): use
// enough --files for the phases to hold their own. The start of the timed
// phases is marked on stderr with the MDS's pid, for a profiler.
#include <rocksdb/db.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <thread>

#include "net/cluster_key.h"
#include "net/proto/mds_methods.h"
#include "net/rpc_channel.h"
#include "tests/common/etcd_cluster.h"
#include "tests/ods/daemon_process.h"

namespace {

using namespace surge;
namespace pb = surge::proto::mds;
using Clock = std::chrono::steady_clock;

std::string build_dir_guess() {
  if (const char* d = std::getenv("SURGE_BUILD_DIR"); d != nullptr && *d != 0) return d;
  // <build>/tests/mds/mds_bench
  return std::filesystem::canonical("/proc/self/exe").parent_path().parent_path().parent_path();
}

// Runs fn(thread_index) on n threads started together; seconds taken.
double timed(int n, const std::function<void(int)>& fn) {
  std::barrier sync(n + 1);
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i) {
    ts.emplace_back([&, i] {
      sync.arrive_and_wait();
      fn(i);
    });
  }
  sync.arrive_and_wait();
  const auto t0 = Clock::now();
  for (auto& t : ts) t.join();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double rocksdb_ceiling(const std::string& path, int threads, int per_thread) {
  rocksdb::Options o;
  o.create_if_missing = true;
  o.IncreaseParallelism(2);
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(o, path, &raw);
  if (!s.ok()) {
    std::fprintf(stderr, "ceiling: cannot open RocksDB at %s: %s\n", path.c_str(),
                 s.ToString().c_str());
    std::exit(1);
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::WriteOptions w;
  w.sync = true;
  const std::string value(160, 'v');  // about an inode record
  std::atomic<int> errors{0};
  const double secs = timed(threads, [&](int t) {
    for (int i = 0; i < per_thread; ++i) {
      if (!db->Put(w, "k" + std::to_string(t) + "_" + std::to_string(i), value).ok()) ++errors;
    }
  });
  if (errors) std::fprintf(stderr, "ceiling: %d writes failed\n", errors.load());
  return threads * per_thread / secs;
}

// A "Vm...:" line of /proc/PID/status in MiB; -1 if it cannot be read.
double proc_mib(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024;
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mds_bench: surge-mds create/stat/unlink rate vs raw RocksDB synced writes"};
  int clients = 8, files = 2000;
  bool shared = false;
  std::string base = "/tmp";
  app.add_option("--clients", clients, "concurrent clients (threads, one connection each)");
  app.add_option("--files", files, "files per client");
  app.add_flag("--shared-dir", shared, "all clients in one directory");
  bool with_etcd = false;
  app.add_flag("--etcd", with_etcd, "also run the MDS on a 3-member etcd cluster (store.backend = etcd)");
  app.add_option("--dir", base, "where the data dirs go (the file system under test)");
  long prefill = 0;
  app.add_option("--prefill", prefill,
                 "entries put into each directory before the timed phases (then one is listed)");
  int settle = 0;
  app.add_option("--settle", settle,
                 "seconds to wait after the prefill (RocksDB flushes and compacts what it wrote, "
                 "the disk writes it back) before the timed phases");
  CLI11_PARSE(app, argc, argv);

  std::string tmpl = base + "/surge-mds-bench-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string dir = tmpl;
  struct Cleanup {
    std::string d;
    ~Cleanup() { std::filesystem::remove_all(d); }
  } cleanup{dir};

  const std::string key_file = dir + "/cluster.key";
  if (!net::generate_cluster_key(key_file).ok()) return 1;
  const std::string key = *net::load_cluster_key(key_file);
  std::atomic<int> errors{0};
  struct Rates {
    double create = 0, stat = 0, unlink = 0;  // seconds for all clients' files
    double prefill = 0, list = 0;             // seconds (--prefill)
    long listed = 0;                          // entries the listing returned
    double rss_before_list = 0, rss_after_list = 0, hwm = 0;  // MiB
  };
  // One MDS on the given store flags: create, stat, unlink; false on a
  // failure to start or connect (printed).
  auto run_mds = [&](const std::string& label, std::vector<std::string> store_args, Rates& out) -> bool {
  // The placeholder data server never heartbeats: keep it up for the run.
  const std::string config = dir + "/mds.toml";
  if (FILE* f = std::fopen(config.c_str(), "w")) {
    std::fputs("[targets]\ntimeout_ms = 3600000\n", f);
    std::fclose(f);
  }
  std::vector<std::string> args = {"--config", config, "--data-dir", dir + "/mds-" + label, "--listen", "tcp://127.0.0.1:0",
                                   "--cluster-key-file", key_file, "--log-level", "warn"};
  args.insert(args.end(), store_args.begin(), store_args.end());
  ods::testing::DaemonProcess mds;
  std::string address;
  try {
    address = ods::testing::address_of(
        mds.start(build_dir_guess() + "/mds/surge-mds", args, dir + "/mds-" + label + ".log"));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mds_bench: %s\n", e.what());
    return false;
  }

  net::ChannelOptions co;
  co.cluster_key = key;
  std::vector<std::shared_ptr<net::RpcChannel>> chans;
  for (int i = 0; i < clients; ++i) {
    auto ch = net::RpcChannel::Connect(address, co);
    if (!ch.ok()) {
      std::fprintf(stderr, "mds_bench: %s\n", ch.status().ToString().c_str());
      return false;
    }
    chans.push_back(*ch);
  }
  pb::Credentials root;
  {
    pb::RegisterTargetRequest r;
    r.set_address("tcp://127.0.0.1:1");
    r.set_capacity_bytes(1ull << 40);
    r.set_free_bytes(1ull << 40);
    pb::RegisterTargetReply out;
    if (Status s = chans[0]->call<pb::MdsRegisterTarget>(r, &out); !s.ok()) {
      std::fprintf(stderr, "mds_bench: register: %s\n", s.ToString().c_str());
      return false;
    }
  }
  std::vector<uint64_t> dirs(clients);
  for (int i = 0; i < clients; ++i) {
    if (shared && i > 0) {
      dirs[i] = dirs[0];
      continue;
    }
    pb::MkdirRequest r;
    *r.mutable_cred() = root;
    r.set_parent(pb::kRootIno);
    r.set_name("c" + std::to_string(i));
    r.set_mode(0755);
    pb::EntryReply out;
    if (Status s = chans[i]->call<pb::MdsMkdir>(r, &out); !s.ok()) {
      std::fprintf(stderr, "mds_bench: mkdir: %s\n", s.ToString().c_str());
      return false;
    }
    dirs[i] = out.attr().ino();
  }
  auto name = [](int c, int i) { return "f" + std::to_string(c) + "_" + std::to_string(i); };
  auto op_id = [](int c, int i) {
    return (static_cast<uint64_t>(c + 1) << 32) + static_cast<uint64_t>(i) + 1;
  };
  auto check = [&](const Status& s) {
    if (!s.ok() && errors++ == 0) std::fprintf(stderr, "mds_bench: %s\n", s.ToString().c_str());
  };

  if (prefill > 0) {
    // Every directory gets `prefill` entries: a shared one from all
    // clients (each its share), a client's own from that client.
    const long share = shared ? (prefill + clients - 1) / clients : prefill;
    out.prefill = timed(clients, [&](int c) {
      const long from = shared ? c * share : 0;
      const long to = std::min<long>(from + share, prefill);
      for (long k = from; k < to; ++k) {
        pb::CreateRequest r;
        *r.mutable_cred() = root;
        r.set_parent(dirs[c]);
        r.set_name("p" + std::to_string(k));
        r.set_mode(0644);
        r.set_exclusive(true);
        r.set_op_id((uint64_t{3} << 60) + (static_cast<uint64_t>(c) << 40) +
                    static_cast<uint64_t>(k));
        pb::EntryReply reply;
        check(chans[c]->call<pb::MdsCreate>(r, &reply));
      }
    });
    std::fprintf(stderr, "mds_bench: %s: prefill done, settling %d s\n", label.c_str(), settle);
    std::this_thread::sleep_for(std::chrono::seconds(settle));
  }
  // A mark for a profiler attached to the MDS (perf record --control).
  std::fprintf(stderr, "mds_bench: %s: timed phases start (MDS pid %d)\n", label.c_str(),
               static_cast<int>(mds.pid()));
  // The machine may be shared: measure the ceiling right before and right
  // after the MDS runs and compare with their mean.
  out.create = timed(clients, [&](int c) {
    for (int i = 0; i < files; ++i) {
      pb::CreateRequest r;
      *r.mutable_cred() = root;
      r.set_parent(dirs[c]);
      r.set_name(name(c, i));
      r.set_mode(0644);
      r.set_exclusive(true);
      r.set_op_id(op_id(c, i));  // as libsurge sends them
      pb::EntryReply out;
      check(chans[c]->call<pb::MdsCreate>(r, &out));
    }
  });
  out.stat = timed(clients, [&](int c) {
    for (int i = 0; i < files; ++i) {
      pb::LookupRequest r;
      *r.mutable_cred() = root;
      r.set_parent(dirs[c]);
      r.set_name(name(c, i));
      pb::EntryReply out;
      check(chans[c]->call<pb::MdsLookup>(r, &out));
    }
  });
  out.unlink = timed(clients, [&](int c) {
    for (int i = 0; i < files; ++i) {
      pb::UnlinkRequest r;
      *r.mutable_cred() = root;
      r.set_parent(dirs[c]);
      r.set_name(name(c, i));
      r.set_op_id(op_id(c, i) + (uint64_t{1} << 62));  // as libsurge sends them (done-op record)
      pb::UnlinkReply out;
      check(chans[c]->call<pb::MdsUnlink>(r, &out));
    }
  });
  if (prefill > 0) {
    // The first directory, whole, in readdirplus pages, by one client.
    out.rss_before_list = proc_mib(mds.pid(), "VmRSS");
    const auto t0 = Clock::now();
    pb::ReadDirRequest r;
    *r.mutable_cred() = root;
    r.set_ino(dirs[0]);
    r.set_max_entries(1024);
    r.set_plus(true);
    for (;;) {
      pb::ReadDirReply page;
      Status s = chans[0]->call<pb::MdsReadDir>(r, &page);
      check(s);
      if (!s.ok()) break;
      out.listed += page.entries_size();
      if (page.eof() || page.entries_size() == 0) break;
      r.set_cookie(page.entries(page.entries_size() - 1).cookie());
    }
    out.list = std::chrono::duration<double>(Clock::now() - t0).count();
    out.rss_after_list = proc_mib(mds.pid(), "VmRSS");
    out.hwm = proc_mib(mds.pid(), "VmHWM");
  }
  chans.clear();
  mds.stop();
  return true;
  };
  const double ceiling_before = rocksdb_ceiling(dir + "/ceiling1", clients, files);
  Rates rocks, etcd_rates;
  if (!run_mds("rocksdb", {}, rocks)) return 1;
  std::unique_ptr<test::EtcdCluster> etcd;
  if (with_etcd) {
    std::filesystem::create_directories(dir + "/etcd");
    test::EtcdClusterOptions eo;
    eo.dir = dir + "/etcd";
    etcd = std::make_unique<test::EtcdCluster>(eo);
    if (Status st = etcd->start(); !st.ok()) {
      std::fprintf(stderr, "mds_bench: %s\n", st.ToString().c_str());
      return 1;
    }
    std::string eps;
    for (const auto& ep : etcd->endpoints()) eps += (eps.empty() ? "" : ",") + ep;
    if (!run_mds("etcd", {"--backend", "etcd", "--etcd-endpoints", eps}, etcd_rates)) return 1;
    etcd.reset();
  }

  const double ceiling_after = rocksdb_ceiling(dir + "/ceiling2", clients, files);
  const double ceiling = (ceiling_before + ceiling_after) / 2;
  const double n = static_cast<double>(clients) * files;
  std::printf("mds_bench: %d clients x %d files, %s, synced WAL, data in %s\n", clients, files,
              shared ? "one shared directory" : "a directory per client", base.c_str());
  if (prefill > 0) {
    const long dirs_filled = shared ? 1 : clients;
    std::printf("  prefill: %ld entries in each of %ld director%s first, %.0f creates/s\n", prefill,
                dirs_filled, dirs_filled == 1 ? "y" : "ies",
                static_cast<double>(prefill * dirs_filled) / rocks.prefill);
    std::printf("  readdirplus of one whole directory (%ld entries, pages of 1024): %.0f entries/s; "
                "MDS VmRSS %.1f MiB before, %.1f after, VmHWM %.1f\n",
                rocks.listed, static_cast<double>(rocks.listed) / rocks.list,
                rocks.rss_before_list, rocks.rss_after_list, rocks.hwm);
  }
  std::printf("  %-34s %10.0f ops/s\n", "create (RPC)", n / rocks.create);
  std::printf("  %-34s %10.0f ops/s\n", "stat/lookup (RPC)", n / rocks.stat);
  std::printf("  %-34s %10.0f ops/s\n", "unlink (RPC)", n / rocks.unlink);
  std::printf("  %-34s %10.0f ops/s (before %.0f, after %.0f)\n", "ceiling: RocksDB Put, sync=true",
              ceiling, ceiling_before, ceiling_after);
  std::printf("  create / ceiling = %.2f\n", n / rocks.create / ceiling);
  if (with_etcd) {
    std::printf("  store.backend = etcd (3 members on this machine, fsync on):\n");
    std::printf("  %-34s %10.0f ops/s\n", "create (RPC, etcd)", n / etcd_rates.create);
    std::printf("  %-34s %10.0f ops/s\n", "stat/lookup (RPC, etcd)", n / etcd_rates.stat);
    std::printf("  %-34s %10.0f ops/s\n", "unlink (RPC, etcd)", n / etcd_rates.unlink);
  }
  if (prefill > 0 && rocks.listed != prefill) {
    std::fprintf(stderr, "mds_bench: the listing returned %ld entries of the %ld put there\n",
                 rocks.listed, prefill);
    return 1;
  }
  if (errors) {
    std::fprintf(stderr, "mds_bench: %d operations failed\n", errors.load());
    return 1;
  }
  return 0;
}
