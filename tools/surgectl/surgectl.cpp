// surgectl: Surge administration from the command line.
//   surgectl [--mds ADDR] [--key-file F] [--json] status | targets | df
//   surgectl ... setstripe DIR --size BYTES --count N | getstripe PATH
//   surgectl keygen FILE        (a new cluster key, mode 0600)
// Paths are inside the file system ("/dir"), not mount paths.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "common/log.h"
#include "net/cluster_key.h"
#include "surge/client.h"

namespace {

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o.push_back('\\');
    o.push_back(c);
  }
  return o;
}

int fail(const surge::Status& st) {
  std::fprintf(stderr, "surgectl: %s\n", st.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mds = "tcp://127.0.0.1:7100", key_file = "/etc/surge/cluster.key";
  bool json = false;
  CLI::App app{"surgectl: Surge administration"};
  app.add_option("--mds", mds, "MDS address");
  app.add_option("--key-file", key_file, "cluster key file");
  app.add_flag("--json", json, "JSON output");
  app.require_subcommand(1);
  auto* status = app.add_subcommand("status", "cluster summary");
  auto* targets = app.add_subcommand("targets", "data servers and their state");
  auto* df = app.add_subcommand("df", "space and inodes");
  std::string path;
  uint32_t size = 0, count = 0;
  auto* setstripe = app.add_subcommand("setstripe", "default layout of a directory");
  setstripe->add_option("dir", path)->required();
  setstripe->add_option("-S,--size", size, "stripe size in bytes (0: inherit)");
  setstripe->add_option("-c,--count", count, "stripe count (0: inherit)");
  auto* getstripe = app.add_subcommand("getstripe", "layout of a file or directory");
  getstripe->add_option("path", path)->required();
  std::string key_out;
  auto* keygen = app.add_subcommand("keygen", "write a new cluster key");
  keygen->add_option("file", key_out)->required();
  CLI11_PARSE(app, argc, argv);
  (void)surge::init_logging("warn");

  if (keygen->parsed()) {
    surge::Status st = surge::net::generate_cluster_key(key_out);
    if (!st.ok()) return fail(st);
    std::printf("cluster key written to %s\n", key_out.c_str());
    return 0;
  }

  surge::ClientOptions o;
  o.mds_address = mds;
  o.cluster_key_file = key_file;
  o.mds_timeout = std::chrono::milliseconds(5000);
  auto c = surge::Client::Connect(o);
  if (!c.ok()) return fail(c.status());
  auto& cl = **c;

  if (status->parsed() || targets->parsed()) {
    auto cs = cl.cluster_status();
    if (!cs.ok()) return fail(cs.status());
    int up = 0;
    for (const auto& t : cs->targets) up += t.state == "up";
    if (json) {
      std::printf("{\"mds\":\"%s\",\"fs_id\":%llu,\"map_version\":%llu,\"targets_up\":%d,"
                  "\"targets\":[",
                  json_escape(cs->mds_address).c_str(),
                  static_cast<unsigned long long>(cs->fs_id),
                  static_cast<unsigned long long>(cs->map_version), up);
      for (size_t i = 0; i < cs->targets.size(); ++i) {
        const auto& t = cs->targets[i];
        std::printf("%s{\"id\":%u,\"address\":\"%s\",\"state\":\"%s\",\"capacity\":%llu,"
                    "\"free\":%llu}",
                    i ? "," : "", t.id, json_escape(t.address).c_str(), t.state.c_str(),
                    static_cast<unsigned long long>(t.capacity_bytes),
                    static_cast<unsigned long long>(t.free_bytes));
      }
      std::printf("]}\n");
    } else {
      if (status->parsed()) {
        std::printf("mds %s  fs_id %llu  map version %llu  targets %d up of %zu\n",
                    cs->mds_address.c_str(), static_cast<unsigned long long>(cs->fs_id),
                    static_cast<unsigned long long>(cs->map_version), up, cs->targets.size());
      }
      std::printf("%-6s %-28s %-9s %14s %14s\n", "id", "address", "state", "capacity", "free");
      for (const auto& t : cs->targets) {
        std::printf("%-6u %-28s %-9s %14llu %14llu\n", t.id, t.address.c_str(), t.state.c_str(),
                    static_cast<unsigned long long>(t.capacity_bytes),
                    static_cast<unsigned long long>(t.free_bytes));
      }
    }
    return 0;
  }
  if (df->parsed()) {
    auto s = cl.statfs();
    if (!s.ok()) return fail(s.status());
    if (json) {
      std::printf("{\"total_bytes\":%llu,\"free_bytes\":%llu,\"total_inodes\":%llu,"
                  "\"free_inodes\":%llu}\n",
                  static_cast<unsigned long long>(s->total_bytes),
                  static_cast<unsigned long long>(s->free_bytes),
                  static_cast<unsigned long long>(s->total_inodes),
                  static_cast<unsigned long long>(s->free_inodes));
    } else {
      std::printf("%16s %16s %16s %12s %12s\n", "bytes", "used", "free", "inodes", "ifree");
      std::printf("%16llu %16llu %16llu %12llu %12llu\n",
                  static_cast<unsigned long long>(s->total_bytes),
                  static_cast<unsigned long long>(s->total_bytes - s->free_bytes),
                  static_cast<unsigned long long>(s->free_bytes),
                  static_cast<unsigned long long>(s->total_inodes),
                  static_cast<unsigned long long>(s->free_inodes));
    }
    return 0;
  }
  if (setstripe->parsed()) {
    auto a = cl.stat(path);
    if (!a.ok()) return fail(a.status());
    surge::Status st = cl.set_dir_layout(a->ino, size, count, surge::Caller::Current());
    if (!st.ok()) return fail(st);
    return 0;
  }
  if (getstripe->parsed()) {
    auto a = cl.stat(path);
    if (!a.ok()) return fail(a.status());
    auto l = cl.get_layout(a->ino, surge::Caller::Current());
    if (!l.ok()) return fail(l.status());
    std::string ts;
    for (size_t i = 0; i < l->targets.size(); ++i) {
      ts += (i ? "," : "") + std::to_string(l->targets[i]);
    }
    if (json) {
      std::printf("{\"path\":\"%s\",\"stripe_size\":%u,\"stripe_count\":%u,\"targets\":[%s]}\n",
                  json_escape(path).c_str(), l->stripe_size, l->stripe_count, ts.c_str());
    } else {
      std::printf("%s: stripe_size %u stripe_count %u targets [%s]\n", path.c_str(),
                  l->stripe_size, l->stripe_count, ts.c_str());
    }
    return 0;
  }
  return 0;
}
