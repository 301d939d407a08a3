// surgectl: Surge administration from the command line.
//   surgectl [--mds ADDR] [--key-file F] [--json] status | targets | chains | df
//   surgectl ... setstripe DIR [--size BYTES] [--count N] [--replicas N | --ec K+M] | getstripe
//   PATH surgectl ... drain TARGET_ID [--wait] | undrain TARGET_ID   (or drain --off) surgectl ...
//   rebalance [--dry-run] [--max-moves N] [--wait] surgectl ... scrub [--target ID] [--crc-only]
//   surgectl keygen FILE        (a new cluster key, mode 0600)
// PATH / DIR: a path under a Surge mount (/mnt/surge/dir) or a path in
// the Surge namespace (/dir); see mount_path.h.
//
// Exit status: 0 success; 1 an error (message on stderr naming what
// failed). scrub: 3 when corruption was found or the replicas of a chunk
// differ or an EC chain's parity differs from its data, else 2 when some
// target could not be scrubbed or some replicated chain could not be
// compared (down, unreachable, error, fewer than 2 serving members) or
// some EC chain's parity could not be checked (a position that does not
// serve), else 0 (1: it could not start, e.g. the MDS is
// unreachable or the target id unknown).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <future>
#include <string>
#include <vector>

#include "common/log.h"
#include "net/cluster_key.h"
#include "surge/client.h"
#include "tools/surgectl/chain_report.h"
#include "tools/surgectl/cluster_admin.h"
#include "tools/surgectl/drain_wait.h"
#include "tools/surgectl/ec_parity_check.h"
#include "tools/surgectl/ec_report.h"
#include "tools/surgectl/json_output.h"
#include "tools/surgectl/mount_path.h"
#include "tools/surgectl/rebalance.h"
#include "tools/surgectl/replica_compare.h"
#include "tools/surgectl/space_report.h"
#include "tools/surgectl/target_scrub.h"

namespace {

using surge::tools::print_json;
using surge::tools::state_name;
namespace pb = surge::proto::mds;

constexpr const char* kDrainNote =
    "drain stops new placement; existing stripes stay until rewritten for files of layout "
    "format 1 (nothing is moved), while the target's chains move to other targets (surgectl "
    "chains shows them rebuilding; surgectl targets says drained when it holds nothing)";

int fail(const surge::Status& st) {
  std::fprintf(stderr, "surgectl: %s\n", st.ToString().c_str());
  return 1;
}

unsigned long long ull(uint64_t v) {
  return static_cast<unsigned long long>(v);
}

int print_map(surge::tools::ClusterAdmin& admin, bool json, bool summary) {
  auto m = admin.cluster_map();
  if (!m.ok()) return fail(m.status());
  if (json) {
    print_json(surge::tools::map_json(admin.mds_address(), *m, admin.mds_leader()));
    return 0;
  }
  int up = 0, down = 0, draining = 0;
  for (const auto& t : m->targets()) {
    up += t.state() != pb::TARGET_DOWN;  // alive: up or draining
    down += t.state() == pb::TARGET_DOWN;
    draining += t.draining();
  }
  if (summary) {
    std::printf(
        "mds %s  fs_id %llu  map version %llu  targets %d up of %d (%d down, %d draining)\n",
        admin.mds_address().c_str(), ull(m->fs_id()), ull(m->version()), up, m->targets_size(),
        down, draining);
    // Several MDS elect the one that runs failure detection and chain changes.
    if (!admin.mds_leader().empty() && admin.mds_leader() != admin.mds_address()) {
      std::printf("mds leader %s\n", admin.mds_leader().c_str());
    }
    std::printf("%s\n", surge::tools::health_summary(surge::tools::count_health(m->chains())).c_str());
    const std::string totals = surge::tools::sync_totals_text(surge::tools::sync_totals(m->chains()));
    if (!totals.empty()) std::printf("%s\n", totals.c_str());
    std::printf("%s", surge::tools::unhealthy_text(m->chains()).c_str());
  }
  std::printf("%-6s %-28s %-9s %-8s %14s %14s %7s\n", "id", "address", "state", "drain",
              "capacity", "free", "chains");
  for (const auto& t : m->targets()) {
    const char* drain = t.drained() ? "drained" : t.draining() ? "yes" : "no";
    std::printf("%-6u %-28s %-9s %-8s %14llu %14llu %7u\n", t.target_id(), t.address().c_str(),
                state_name(t.state()), drain, ull(t.capacity_bytes()), ull(t.free_bytes()),
                t.chain_memberships());
  }
  return 0;
}

pb::Credentials credentials_of(const surge::Caller& c) {
  pb::Credentials out;
  out.set_uid(c.uid);
  out.set_gid(c.gid);
  for (uint32_t g : c.groups) out.add_groups(g);
  return out;
}

std::string ids_text(const google::protobuf::RepeatedField<uint32_t>& ids) {
  std::string s;
  for (int i = 0; i < ids.size(); ++i) {
    if (i != 0) s += ',';
    s += std::to_string(ids.Get(i));
  }
  return s;
}

// getstripe: the layout, and for a chained file each slot's chain with its
// members and their state.
void print_layout(const std::string& path, const pb::GetLayoutReply& r, bool json) {
  const pb::Layout& l = r.layout();
  const uint32_t format = l.format() == 0 ? 1 : l.format();
  std::string scheme = "replicas 1";
  if (l.scheme() == pb::SCHEME_REPLICAS) scheme = "replicas " + std::to_string(l.replicas());
  if (l.scheme() == pb::SCHEME_EC) {
    scheme = "ec " + std::to_string(l.ec_data()) + "+" + std::to_string(l.ec_parity());
  }
  auto chain_of = [&](uint32_t id) -> const pb::Chain* {
    for (const auto& c : r.chains()) {
      if (c.chain_id() == id) return &c;
    }
    return nullptr;
  };
  if (json) {
    print_json(surge::tools::layout_json(path, r));
    return;
  }
  if (format == 1 && l.scheme() != pb::SCHEME_UNSET) {  // a directory's default
    std::printf("%s: stripe_size %u stripe_count %u %s%s\n", path.c_str(), l.stripe_size(),
                l.stripe_count(), scheme.c_str(), r.inherited() ? " (inherited)" : "");
    return;
  }
  if (format == 1) {
    std::printf("%s: stripe_size %u stripe_count %u targets [%s]\n", path.c_str(),
                l.stripe_size(), l.stripe_count(), ids_text(l.targets()).c_str());
    return;
  }
  std::printf("%s: stripe_size %u stripe_count %u %s chains [%s]\n", path.c_str(),
              l.stripe_size(), l.stripe_count(), scheme.c_str(), ids_text(l.chains()).c_str());
  const bool ec = l.scheme() == pb::SCHEME_EC;
  if (ec) std::printf("  %s\n", surge::tools::ec_groups_text(l).c_str());
  for (int i = 0; i < l.chains_size(); ++i) {
    const pb::Chain* c = chain_of(l.chains(i));
    if (c == nullptr) {
      std::printf("  slot %d: chain %u (not in the map)\n", i, l.chains(i));
      continue;
    }
    const std::string members = surge::tools::members_text(*c);
    std::printf("  slot %d: chain %u version %llu %s: %s\n", i, c->chain_id(), ull(c->version()),
                surge::tools::health_name(c->health()), members.c_str());
  }
}

int set_drain(surge::tools::ClusterAdmin& admin, uint32_t id, bool draining, bool json) {
  auto r = admin.set_draining(id, draining);
  if (!r.ok()) return fail(r.status());
  if (json) {
    print_json(surge::tools::drain_json(*r));
  } else if (draining) {
    std::printf("target %u (%s) is draining, map version %llu: %s\n", id,
                r->target().address().c_str(), ull(r->map_version()), kDrainNote);
  } else {
    std::printf(
        "target %u (%s) is no longer draining, map version %llu: new files may use it again\n", id,
        r->target().address().c_str(), ull(r->map_version()));
  }
  return 0;
}

int scrub(surge::tools::ClusterAdmin& admin, const std::string& key, int64_t target,
          int slice_timeout_s, bool crc_only, bool json) {
  auto m = admin.cluster_map();
  if (!m.ok()) return fail(m.status());
  std::vector<pb::TargetInfo> chosen;
  std::vector<surge::tools::TargetScrubResult> results;
  if (target >= 0) {
    std::string known;
    for (const auto& t : m->targets()) {
      if (t.target_id() == static_cast<uint64_t>(target)) chosen.push_back(t);
      known += (known.empty() ? "" : ", ") + std::to_string(t.target_id());
    }
    if (chosen.empty()) {
      return fail(surge::Status::NotFound(
          "scrub: target " + std::to_string(target) + " is not in the cluster map of " +
          admin.mds_address() + " (known targets: " + (known.empty() ? "none" : known) + ")"));
    }
  } else {
    for (const auto& t : m->targets()) {
      if (t.state() != pb::TARGET_DOWN) {
        chosen.push_back(t);
      } else {
        // Not asked: counted as not scrubbed, so the exit status says the
        // pass was incomplete.
        surge::tools::TargetScrubResult r;
        r.target_id = t.target_id();
        r.address = t.address();
        r.state = state_name(t.state());
        r.error = "target " + std::to_string(t.target_id()) + " at " + t.address() +
                  " is down: not scrubbed";
        results.push_back(std::move(r));
      }
    }
  }
  // Every target scrubs its own disks: ask them all at once.
  std::vector<std::future<surge::tools::TargetScrubResult>> running;
  for (const auto& t : chosen) {
    running.push_back(std::async(std::launch::async, [t, &key, slice_timeout_s] {
      return surge::tools::scrub_target(t, key, std::chrono::seconds(slice_timeout_s));
    }));
  }
  for (auto& f : running) results.push_back(f.get());
  std::sort(results.begin(), results.end(),
            [](const auto& a, const auto& b) { return a.target_id < b.target_id; });

  // Then the replicas of every chained chunk, chain by chain (with
  // --target: the chains it serves in).
  std::vector<surge::tools::ChainCompareResult> chains;
  for (const auto& c : m->chains().chains()) {
    if (!surge::tools::is_replicated(c)) continue;
    if (target >= 0) {
      bool member = false;
      for (const auto& cm : c.members()) {
        member |= cm.target_id() == static_cast<uint64_t>(target);
      }
      if (!member) continue;
    }
    chains.push_back(
        surge::tools::compare_chain(c, *m, key, std::chrono::seconds(slice_timeout_s), !crc_only));
  }
  // And the parity of every EC chain against its data.
  std::vector<surge::tools::EcChainCheckResult> ec_chains;
  for (const auto& c : m->chains().chains()) {
    if (c.scheme() != pb::SCHEME_EC) continue;
    if (target >= 0) {
      bool member = false;
      for (const auto& cm : c.members()) {
        member |= cm.target_id() == static_cast<uint64_t>(target);
      }
      if (!member) continue;
    }
    ec_chains.push_back(
        surge::tools::check_ec_chain(c, *m, key, std::chrono::seconds(slice_timeout_s)));
  }
  uint64_t inconsistent = 0;
  int unchecked = 0;
  for (const auto& c : ec_chains) {
    inconsistent += c.mismatches.size();
    unchecked += !c.checked;
  }
  uint64_t differ = 0, chunks_compared = 0;
  int uncompared = 0;
  for (const auto& c : chains) {
    differ += c.mismatches.size() + (c.corrupt ? 1 : 0);
    chunks_compared += c.chunks_compared;
    uncompared += !c.compared && !c.corrupt;
  }

  uint64_t bad = 0, objects = 0, bytes = 0;
  int unscrubbed = 0;
  for (const auto& r : results) {
    bad += r.bad_blocks.size();
    objects += r.objects_checked;
    bytes += r.bytes_checked;
    unscrubbed += !r.scrubbed;
  }
  if (json) {
    print_json(surge::tools::scrub_json(results, chains, ec_chains));
  } else {
    for (const auto& r : results) {
      if (!r.scrubbed) {
        std::printf("target %u %s (%s): NOT SCRUBBED: %s\n", r.target_id, r.address.c_str(),
                    r.state.c_str(), r.error.c_str());
        continue;
      }
      std::printf("target %u %s (%s): %llu objects, %llu bytes checked, %zu corrupt blocks\n",
                  r.target_id, r.address.c_str(), r.state.c_str(), ull(r.objects_checked),
                  ull(r.bytes_checked), r.bad_blocks.size());
      for (const auto& b : r.bad_blocks) {
        if (b.object_id == 0) {
          std::printf("  corrupt: chunk ino %llu slot %u position %u of chain %u block at offset "
                      "%llu\n",
                      ull(b.ino), b.slot, b.position, b.chain_id, ull(b.offset));
          continue;
        }
        std::printf("  corrupt: object %llu (inode %llu) block at offset %llu\n", ull(b.object_id),
                    ull(b.object_id), ull(b.offset));
      }
    }
    for (const auto& c : chains) std::printf("%s", surge::tools::chain_text(c).c_str());
    std::printf(
        "scrub: %zu targets, %llu objects, %llu bytes checked, %llu corrupt blocks, %d not "
        "scrubbed\n",
        results.size(), ull(objects), ull(bytes), ull(bad), unscrubbed);
    std::printf(
        "scrub: %zu replicated chains, %llu chunks compared, %llu replicas differ, %d chains not "
        "compared\n",
        chains.size(), ull(chunks_compared), ull(differ), uncompared);
    for (const auto& c : ec_chains) std::printf("%s", surge::tools::ec_chain_text(c).c_str());
    if (!ec_chains.empty()) {
      std::printf("scrub: %zu EC chains, %llu parity windows inconsistent, %d chains not checked\n",
                  ec_chains.size(), ull(inconsistent), unchecked);
    }
  }
  if (bad > 0 || differ > 0 || inconsistent > 0) return 3;
  return unscrubbed > 0 || uncompared > 0 || unchecked > 0 ? 2 : 0;
}

// df: the totals from the MDS (each file system once), then each data
// server file system with the targets on it.
int print_df(surge::Client& cl, const std::string& mds, const std::string& key_file, bool json) {
  auto s = cl.statfs();
  if (!s.ok()) return fail(s.status());
  auto key = surge::net::load_cluster_key(key_file);
  if (!key.ok()) return fail(key.status());
  auto admin = surge::tools::ClusterAdmin::Connect(mds, *key, std::chrono::milliseconds(5000));
  if (!admin.ok()) return fail(admin.status());
  auto m = admin->cluster_map();
  if (!m.ok()) return fail(m.status());
  const auto file_systems = surge::tools::file_systems(*m);
  const auto usable = surge::tools::usable_space(*m, s->total_bytes, s->free_bytes);
  if (json) {
    print_json(surge::tools::df_json(*s, file_systems, usable));
    return 0;
  }
  std::printf("%16s %16s %16s %12s %12s\n", "bytes", "used", "free", "inodes", "ifree");
  std::printf("%16llu %16llu %16llu %12llu %12llu\n", ull(s->total_bytes),
              ull(s->total_bytes - s->free_bytes), ull(s->free_bytes), ull(s->total_inodes),
              ull(s->free_inodes));
  std::printf("\n%16s %16s %-10s %s\n", "fs bytes", "fs free", "targets", "file system");
  for (const auto& fs : file_systems) {
    std::string ids;
    for (uint32_t id : fs.targets) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    std::printf("%16llu %16llu %-10s %s%s\n", ull(fs.capacity_bytes), ull(fs.free_bytes),
                ids.c_str(), fs.filesystem_id.empty() ? "(not reported)" : fs.filesystem_id.c_str(),
                fs.up ? "" : " (down: not counted)");
  }
  // bytes/free above are raw: every replica and parity chunk counts.
  if (!usable.empty()) {
    std::printf("\n%-14s %16s %16s\n", "scheme", "usable bytes", "usable free");
    for (const auto& u : usable) {
      std::printf("%-14s %16llu %16llu\n", u.scheme.c_str(), ull(u.usable_bytes),
                  ull(u.usable_free_bytes));
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mds = "tcp://127.0.0.1:7100", key_file = "/etc/surge/cluster.key";
  bool json = false;
  CLI::App app{"surgectl: Surge administration"};
  app.add_option("--mds", mds,
                 "MDS address; several comma-separated (MDS on etcd): the first that answers");
  app.add_option("--key-file", key_file, "cluster key file");
  app.add_flag("--json", json, "JSON output");
  app.require_subcommand(1);
  auto* status = app.add_subcommand("status", "cluster summary");
  auto* targets = app.add_subcommand("targets", "data servers and their state");
  auto* chains = app.add_subcommand(
      "chains", "every chain: members head first, their state, health, resync progress");
  auto* df = app.add_subcommand("df", "space and inodes");
  std::string path;
  uint32_t size = 0, count = 0, replicas = 0;
  std::string ec_text;
  auto* setstripe = app.add_subcommand("setstripe", "default layout of a directory");
  setstripe->add_option("dir", path)->required();
  setstripe->add_option("-S,--size", size,
                        "stripe size in bytes (0: inherit; with --ec: the largest power of two "
                        "at most 1 MiB / K, so a 1 MiB write fills whole stripe groups)");
  setstripe->add_option("-c,--count", count, "stripe count (0: inherit)");
  auto* replicas_opt = setstripe->add_option("-r,--replicas", replicas,
                        "copies of each new file, on chains of that many data servers "
                        "(1..number of data servers; 0: inherit)");
  setstripe
      ->add_option("--ec", ec_text,
                   "erasure coding K+M (e.g. 4+2): each stripe group is K data and M parity "
                   "chunks on K+M distinct data servers (K+M at most their number)")
      ->excludes(replicas_opt);
  auto* getstripe = app.add_subcommand("getstripe", "layout of a file or directory");
  getstripe->add_option("path", path)->required();
  uint32_t drain_id = 0;
  bool drain_off = false;
  auto* drain = app.add_subcommand(
      "drain",
      std::string("mark a data server draining: new files get no stripes on it. ") + kDrainNote);
  drain->add_option("target_id", drain_id, "target id (surgectl targets)")->required();
  drain->add_flag("--off", drain_off, "clear the mark (as undrain)");
  bool drain_wait = false;
  drain->add_flag("--wait", drain_wait,
                  "then wait until the target is in no chain (holds nothing), printing progress");
  auto* undrain = app.add_subcommand(
      "undrain", "clear a data server's draining mark: new files may use it again");
  undrain->add_option("target_id", drain_id, "target id (surgectl targets)")->required();
  bool rebalance_dry = false, rebalance_wait = false;
  uint32_t rebalance_max = 0;
  auto* rebalance_cmd = app.add_subcommand(
      "rebalance",
      "move chain memberships from the fullest data servers to the emptiest (a new one takes its "
      "fair share), a few chains at a time, each synced before the old member leaves");
  rebalance_cmd->add_flag("--dry-run", rebalance_dry, "only list the moves it would start");
  rebalance_cmd->add_option("--max-moves", rebalance_max,
                            "moves in flight at once (0: the MDS's chains.rebalance_max_moves)");
  rebalance_cmd->add_flag("--wait", rebalance_wait,
                          "keep going as moves finish until the targets are balanced");
  int64_t scrub_target = -1;
  int slice_timeout_s = 600;
  auto* scrub_cmd = app.add_subcommand("scrub",
                                       "verify the CRC32C of every stored block on every up data "
                                       "server (or one), then compare the replicas of every "
                                       "chained chunk on every serving member of its chain "
                                       "(version, size, CRC32C of the bytes); reports corrupt "
                                       "blocks and differing chunks, repairs nothing. Exit 3: "
                                       "corruption or replicas differ; 2: a target could not be "
                                       "scrubbed or a chain compared; 1: could not start");
  scrub_cmd->add_option("--target", scrub_target,
                        "only this target id (tried even when marked down)");
  bool crc_only = false;
  scrub_cmd->add_flag("--crc-only", crc_only,
                      "compare replicas by version, size and CRC32C only; do not read every "
                      "copy back to compare it byte for byte");
  scrub_cmd
      ->add_option("--slice-timeout", slice_timeout_s,
                   "seconds one slice of 4096 directories may take")
      ->check(CLI::PositiveNumber);
  std::string key_out;
  auto* keygen = app.add_subcommand("keygen", "write a new cluster key");
  keygen->add_option("file", key_out)->required();
  CLI11_PARSE(app, argc, argv);
  (void)surge::init_logging("warn");

  if (keygen->parsed()) {
    surge::Status st = surge::net::generate_cluster_key(key_out);
    if (!st.ok()) return fail(st);
    if (json) {
      print_json(surge::tools::Json{{"key_file", key_out}});
    } else {
      std::printf("cluster key written to %s\n", key_out.c_str());
    }
    return 0;
  }

  if (status->parsed() || targets->parsed() || chains->parsed() || drain->parsed() ||
      undrain->parsed() || scrub_cmd->parsed() || rebalance_cmd->parsed()) {
    auto key = surge::net::load_cluster_key(key_file);
    if (!key.ok()) return fail(key.status());
    auto admin = surge::tools::ClusterAdmin::Connect(mds, *key, std::chrono::milliseconds(5000));
    if (!admin.ok()) return fail(admin.status());
    if (status->parsed() || targets->parsed()) return print_map(*admin, json, status->parsed());
    if (chains->parsed()) {
      auto m = admin->cluster_map();
      if (!m.ok()) return fail(m.status());
      if (json) {
        print_json(surge::tools::chains_json(*m));
      } else {
        surge::tools::print_chains(*m);
      }
      return 0;
    }
    if (drain->parsed()) {
      const int rc = set_drain(*admin, drain_id, !drain_off, json);
      if (rc != 0 || drain_off || !drain_wait) return rc;
      std::fflush(stdout);
      return surge::tools::wait_drained(*admin, drain_id, json);
    }
    if (undrain->parsed()) return set_drain(*admin, drain_id, false, json);
    if (rebalance_cmd->parsed()) {
      return surge::tools::rebalance(*admin, rebalance_dry, rebalance_max, rebalance_wait, json);
    }
    return scrub(*admin, *key, scrub_target, slice_timeout_s, crc_only, json);
  }

  surge::ClientOptions o;
  o.mds_address = mds;
  o.cluster_key_file = key_file;
  o.mds_timeout = std::chrono::milliseconds(5000);
  auto c = surge::Client::Connect(o);
  if (!c.ok()) return fail(c.status());
  auto& cl = **c;

  if (df->parsed()) return print_df(cl, mds, key_file, json);
  if (setstripe->parsed() || getstripe->parsed()) {
    auto where = surge::tools::resolve_surge_path(path);
    if (!where.ok()) return fail(where.status());
    auto a = cl.stat(where->ns_path);
    if (!a.ok()) {
      if (where->mount_point.empty() && a.status().code() == surge::Code::kNotFound) {
        return fail(surge::tools::not_a_surge_path(path, a.status()));
      }
      return fail(a.status().WithContext("path " + path + " (" + where->ns_path +
                                         " in the Surge mount at " + where->mount_point + ")"));
    }
    auto key = surge::net::load_cluster_key(key_file);
    if (!key.ok()) return fail(key.status());
    auto admin = surge::tools::ClusterAdmin::Connect(mds, *key, std::chrono::milliseconds(5000));
    if (!admin.ok()) return fail(admin.status());
    const pb::Credentials cred = credentials_of(surge::Caller::Current());
    if (setstripe->parsed()) {
      pb::Layout want;
      want.set_stripe_size(size);
      want.set_stripe_count(count);
      if (replicas != 0) {
        want.set_scheme(pb::SCHEME_REPLICAS);
        want.set_replicas(replicas);
      }
      if (!ec_text.empty()) {
        auto ec = surge::tools::parse_ec_scheme(ec_text);
        if (!ec.ok()) return fail(ec.status());
        want.set_scheme(pb::SCHEME_EC);
        want.set_ec_data(ec->data);
        want.set_ec_parity(ec->parity);
        if (size == 0) want.set_stripe_size(surge::tools::default_ec_unit(ec->data));
      }
      auto r = admin->set_layout(a->ino, want, cred);
      if (!r.ok()) return fail(r.status());
      if (json) {
        pb::GetLayoutReply set;
        *set.mutable_layout() = r->layout();
        print_json(surge::tools::layout_json(path, set));
      }
      return 0;
    }
    auto l = admin->get_layout(a->ino, cred);
    if (!l.ok()) return fail(l.status());
    print_layout(path, *l, json);
    return 0;
  }
  return 0;
}
