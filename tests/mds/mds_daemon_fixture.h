// Pieces of the tests that run surge-mds as a process: a temp dir with a
// cluster key and a small config (short timeouts), the daemon started on a
// data dir (DaemonProcess from tests/ods kills and reaps it on every exit
// path), and a typed RPC client with credentials filled in. With
// SURGE_TEST_KV=etcd, the daemon keeps its namespace on the process's shared
// 3-member etcd cluster (tests/common/etcd_test_env.h) under a fresh prefix
// instead of a RocksDB in the data dir.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "net/cluster_key.h"
#include "net/proto/mds_methods.h"
#include "net/rpc_channel.h"
#include "tests/common/etcd_test_env.h"
#include "tests/ods/daemon_process.h"
#include "tests/ods/test_dir.h"

namespace surge::mds::testing {

namespace pb = ::surge::proto::mds;
using ods::testing::address_of;
using ods::testing::build_dir;
using ods::testing::DaemonProcess;
using ods::testing::TempDir;

inline std::string mds_binary() {
  return build_dir() + "/mds/surge-mds";
}

// Runs a command to completion; returns its exit code and stdout+stderr.
inline int run_command(const std::string& cmd, std::string* output) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[512];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, n);
  int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

class MdsDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_file_ = tmp_.path() + "/cluster.key";
    Status st = net::generate_cluster_key(key_file_);
    ASSERT_TRUE(st.ok()) << st.ToString();
    key_ = *net::load_cluster_key(key_file_);
    data_dir_ = tmp_.path() + "/mds";
    config_ = tmp_.path() + "/mds.toml";
    std::ofstream(config_) << "[targets]\nheartbeat_interval_ms = 100\ntimeout_ms = 600\n"
                           << "[orphans]\ninterval_ms = 100\nstartup_grace_ms = 0\n";
    if (on_etcd_ || test::test_kv_is_etcd()) {
      auto& etcd = test::shared_etcd();
      ASSERT_TRUE(etcd.started.ok()) << etcd.started.ToString();
      std::string endpoints;
      for (const auto& ep : etcd.cluster->endpoints())
        endpoints += (endpoints.empty() ? "" : ",") + ep;
      store_args_ = {"--backend", "etcd",          "--etcd-endpoints",
                     endpoints,   "--etcd-prefix", test::fresh_etcd_prefix()};
    }
  }

  // The flags of an MDS on this fixture's config, key and store, with its
  // own data dir and a free port.
  std::vector<std::string> mds_args(const std::string& data_dir) const {
    std::vector<std::string> args = {
        "--config",           config_,   "--data-dir",  data_dir, "--listen", "tcp://127.0.0.1:0",
        "--cluster-key-file", key_file_, "--log-level", "info"};
    args.insert(args.end(), store_args_.begin(), store_args_.end());
    return args;
  }

  // Starts (or restarts) the daemon; returns its address.
  std::string start() {
    const std::string line =
        mds_.start(mds_binary(), mds_args(data_dir_), tmp_.path() + "/mds.log");
    address_ = address_of(line);
    net::ChannelOptions o;
    o.cluster_key = key_;
    o.call_timeout = std::chrono::milliseconds(20000);
    auto ch = net::RpcChannel::Connect(address_, o);
    if (!ch.ok()) throw std::runtime_error(ch.status().ToString());
    ch_ = *ch;
    return address_;
  }

  // Another MDS on the same store (several serve one file system from
  // etcd), started after the first formatted it: its data dir and log are
  // tmp_/name and tmp_/name.log. Returns its address.
  std::string start_peer(DaemonProcess& proc, const std::string& name) {
    return address_of(proc.start(mds_binary(), mds_args(tmp_.path() + "/" + name),
                                 tmp_.path() + "/" + name + ".log"));
  }

  template <typename M>
  Status call(typename M::Request req, typename M::Response* resp = nullptr) {
    if constexpr (requires { req.mutable_cred(); }) {
      if (!req.has_cred()) *req.mutable_cred() = cred_;
    }
    typename M::Response local;
    return ch_->call<M>(req, resp != nullptr ? resp : &local);
  }

  Result<pb::Attr> create(uint64_t parent, const std::string& name) {
    pb::CreateRequest r;
    r.set_parent(parent);
    r.set_name(name);
    r.set_mode(0644);
    r.set_exclusive(true);
    pb::EntryReply out;
    SURGE_RETURN_IF_ERROR(call<pb::MdsCreate>(r, &out));
    return out.attr();
  }
  Result<pb::Attr> mkdir(uint64_t parent, const std::string& name) {
    pb::MkdirRequest r;
    r.set_parent(parent);
    r.set_name(name);
    r.set_mode(0755);
    pb::EntryReply out;
    SURGE_RETURN_IF_ERROR(call<pb::MdsMkdir>(r, &out));
    return out.attr();
  }
  Result<pb::Attr> lookup(uint64_t parent, const std::string& name) {
    pb::LookupRequest r;
    r.set_parent(parent);
    r.set_name(name);
    pb::EntryReply out;
    SURGE_RETURN_IF_ERROR(call<pb::MdsLookup>(r, &out));
    return out.attr();
  }
  Status rename(uint64_t op, const std::string& on, uint64_t np, const std::string& nn) {
    pb::RenameRequest r;
    r.set_old_parent(op);
    r.set_old_name(on);
    r.set_new_parent(np);
    r.set_new_name(nn);
    return call<pb::MdsRename>(r);
  }
  Result<uint32_t> register_target(uint32_t id, const std::string& addr) {
    pb::RegisterTargetRequest r;
    r.set_target_id(id);
    r.set_address(addr);
    r.set_capacity_bytes(1ull << 30);
    r.set_free_bytes(1ull << 29);
    pb::RegisterTargetReply out;
    SURGE_RETURN_IF_ERROR(call<pb::MdsRegisterTarget>(r, &out));
    return out.target_id();
  }
  // surge-mds --check on the data dir or etcd prefix (the daemon must be stopped).
  int check(std::string* out) {
    std::string cmd = mds_binary() + " --check --data-dir " + data_dir_;
    for (const auto& a : store_args_) cmd += " '" + a + "'";
    return run_command(cmd, out);
  }

  TempDir tmp_{"surge-mds-test"};
  std::string key_file_, key_, data_dir_, config_, address_;
  bool on_etcd_ = false;                 // a fixture that always runs on etcd sets it before SetUp
  std::vector<std::string> store_args_;  // the backend's flags (empty: RocksDB in data_dir_)
  DaemonProcess mds_;
  std::shared_ptr<net::RpcChannel> ch_;
  pb::Credentials cred_;  // root
};

}  // namespace surge::mds::testing
