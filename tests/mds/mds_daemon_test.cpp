// surge-mds as a process over real RPC: operations and their errno codes
// reaching the client intact, data-server registration and heartbeats,
// sessions, restart durability, data-dir refusal, --check, and malformed or
// hostile requests answered with errors while the daemon keeps serving.
#include <fcntl.h>

#include <filesystem>
#include <thread>

#include "mds/daemon/mds_config.h"
#include "mds/kv/rocksdb_kv_store.h"
#include "mds/namespace/keys.h"
#include "tests/mds/mds_daemon_fixture.h"

namespace surge::mds::testing {
namespace {

constexpr uint64_t kRoot = pb::kRootIno;

TEST_F(MdsDaemonTest, NamespaceOperationsOverRpc) {
  start();
  ASSERT_TRUE(register_target(0, "tcp://127.0.0.1:1").ok());
  auto d = mkdir(kRoot, "d");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  auto f = create(d->ino(), "f");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(lookup(d->ino(), "f")->ino(), f->ino());
  ASSERT_TRUE(rename(d->ino(), "f", kRoot, "g").ok());
  pb::ReadDirRequest rd;
  rd.set_ino(kRoot);
  rd.set_plus(true);
  pb::ReadDirReply dir;
  ASSERT_TRUE(call<pb::MdsReadDir>(rd, &dir).ok());
  EXPECT_EQ(dir.entries_size(), 2);
  pb::UnlinkRequest u;
  u.set_parent(kRoot);
  u.set_name("g");
  EXPECT_TRUE(call<pb::MdsUnlink>(u).ok());
}

TEST_F(MdsDaemonTest, ErrnoCodesReachTheClient) {
  start();
  EXPECT_EQ(lookup(kRoot, "missing").status().code(), Code::kNotFound);
  ASSERT_TRUE(mkdir(kRoot, "d").ok());
  EXPECT_EQ(mkdir(kRoot, "d").status().code(), Code::kAlreadyExists);
  EXPECT_EQ(create(kRoot, std::string(256, 'n')).status().code(), Code::kNameTooLong);
  pb::UnlinkRequest u;
  u.set_parent(kRoot);
  u.set_name("d");
  EXPECT_EQ(call<pb::MdsUnlink>(u).code(), Code::kIsDirectory);
}

TEST_F(MdsDaemonTest, CreateWithoutDataServersFailsClearly) {
  start();
  auto f = create(kRoot, "f");
  EXPECT_EQ(f.status().code(), Code::kNoSpace);
  EXPECT_NE(f.status().message().find("no data server is up"), std::string::npos);
}

TEST_F(MdsDaemonTest, ClusterMapRegistrationHeartbeatAndDown) {
  start();
  pb::GetClusterMapReply m0;
  ASSERT_TRUE(call<pb::MdsGetClusterMap>(pb::GetClusterMapRequest(), &m0).ok());
  auto id = register_target(0, "tcp://127.0.0.1:5555");
  ASSERT_TRUE(id.ok());
  EXPECT_GT(*id, 0u);
  pb::GetClusterMapReply m1;
  ASSERT_TRUE(call<pb::MdsGetClusterMap>(pb::GetClusterMapRequest(), &m1).ok());
  EXPECT_GT(m1.map().version(), m0.map().version());
  ASSERT_EQ(m1.map().targets_size(), 1);
  EXPECT_EQ(m1.map().targets(0).state(), pb::TARGET_UP);

  pb::TargetHeartbeatRequest hb;
  hb.set_target_id(999);
  EXPECT_EQ(call<pb::MdsTargetHeartbeat>(hb).code(), Code::kNotFound);

  // timeout_ms = 600 in the test config: silence marks it down.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  pb::GetClusterMapReply m2;
  ASSERT_TRUE(call<pb::MdsGetClusterMap>(pb::GetClusterMapRequest(), &m2).ok());
  EXPECT_EQ(m2.map().targets(0).state(), pb::TARGET_DOWN);
  EXPECT_GT(m2.map().version(), m1.map().version());
}

TEST_F(MdsDaemonTest, TargetIdsSurviveRestart) {
  start();
  auto id = register_target(0, "tcp://127.0.0.1:5555");
  ASSERT_TRUE(id.ok());
  ASSERT_EQ(mds_.stop(), 0);
  start();
  pb::TargetHeartbeatRequest hb;
  hb.set_target_id(*id);
  hb.set_address("tcp://127.0.0.1:5555");
  EXPECT_TRUE(call<pb::MdsTargetHeartbeat>(hb).ok());
}

TEST_F(MdsDaemonTest, SessionsOpenHeartbeatClose) {
  start();
  pb::OpenSessionRequest os;
  os.set_client_name("test:1");
  pb::OpenSessionReply s;
  ASSERT_TRUE(call<pb::MdsOpenSession>(os, &s).ok());
  EXPECT_NE(s.session_id(), 0u);
  pb::SessionHeartbeatRequest hb;
  hb.set_session_id(s.session_id());
  EXPECT_TRUE(call<pb::MdsSessionHeartbeat>(hb).ok());
  pb::CloseSessionRequest cs;
  cs.set_session_id(s.session_id());
  EXPECT_TRUE(call<pb::MdsCloseSession>(cs).ok());
  EXPECT_EQ(call<pb::MdsSessionHeartbeat>(hb).code(), Code::kNotFound);
}

TEST_F(MdsDaemonTest, CleanStopAndRestartKeepsEverything) {
  start();
  ASSERT_TRUE(register_target(0, "tcp://127.0.0.1:1").ok());
  auto f = create(kRoot, "kept");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(mds_.stop(), 0);  // exit status 0 after SIGTERM
  std::string out;
  EXPECT_EQ(check(&out), 0) << out;
  start();
  auto l = lookup(kRoot, "kept");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->ino(), f->ino());
}

TEST_F(MdsDaemonTest, MalformedAndHostileRequestsGetErrors) {
  start();
  std::string resp;
  // Garbage body.
  EXPECT_EQ(
      ch_->call_raw(proto::kServiceMds, pb::MdsLookup::kMethod, "\xff\xff\xff\xff garbage", &resp)
          .code(),
      Code::kProtocolError);
  // Unknown method id.
  EXPECT_EQ(ch_->call_raw(proto::kServiceMds, 999, "", &resp).code(), Code::kUnknownMethod);
  // Unknown inodes, inode 0, bad names, oversize xattrs, wrong types.
  pb::GetAttrRequest ga;
  ga.set_ino(1ull << 60);
  EXPECT_EQ(call<pb::MdsGetAttr>(ga).code(), Code::kNotFound);
  ga.set_ino(0);
  EXPECT_EQ(call<pb::MdsGetAttr>(ga).code(), Code::kInvalidArgument);
  EXPECT_EQ(lookup(kRoot, "a/b").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(lookup(kRoot, std::string("a\0b", 3)).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(lookup(kRoot, "").status().code(), Code::kInvalidArgument);
  pb::SetXattrRequest sx;
  sx.set_ino(kRoot);
  sx.set_name("user.big");
  sx.set_value(std::string(70000, 'x'));
  EXPECT_EQ(call<pb::MdsSetXattr>(sx).code(), Code::kTooBig);
  sx.set_name(std::string(300, 'n'));
  sx.set_value("v");
  EXPECT_EQ(call<pb::MdsSetXattr>(sx).code(), Code::kOutOfRange);
  pb::ReadlinkRequest rl;
  rl.set_ino(kRoot);
  EXPECT_EQ(call<pb::MdsReadlink>(rl).code(), Code::kInvalidArgument);
  pb::ReadDirRequest rd;
  rd.set_ino(kRoot);
  rd.set_cookie(~0ull);
  EXPECT_TRUE(call<pb::MdsReadDir>(rd).ok());
  pb::RenameRequest rn;
  rn.set_old_parent(kRoot);
  rn.set_old_name("x");
  rn.set_new_parent(kRoot);
  rn.set_new_name("y");
  rn.set_flags(0xffff);
  EXPECT_EQ(call<pb::MdsRename>(rn).code(), Code::kInvalidArgument);
  pb::SetLayoutRequest sl;
  sl.set_ino(kRoot);
  sl.mutable_layout()->set_stripe_size(3);
  EXPECT_EQ(call<pb::MdsSetLayout>(sl).code(), Code::kInvalidArgument);
  // Still serving.
  EXPECT_TRUE(mkdir(kRoot, "alive").ok());
}

TEST_F(MdsDaemonTest, RefusesDataDirOfAnotherFileSystem) {
  start();
  ASSERT_EQ(mds_.stop(), 0);
  // The FSID file now names another file system than the database.
  std::ofstream(data_dir_ + "/FSID") << "0123456789abcdef\n";
  std::string out;
  const int rc = run_command(mds_binary() + " --data-dir " + data_dir_ +
                                 " --listen tcp://127.0.0.1:0 --cluster-key-file " + key_file_,
                             &out);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("belongs to file system"), std::string::npos) << out;
}

TEST_F(MdsDaemonTest, RefusesNonEmptyForeignDirectory) {
  std::filesystem::create_directories(data_dir_);
  std::ofstream(data_dir_ + "/somebodys-file") << "x";
  std::string out;
  const int rc = run_command(mds_binary() + " --data-dir " + data_dir_ +
                                 " --listen tcp://127.0.0.1:0 --cluster-key-file " + key_file_,
                             &out);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("not a surge-mds data dir"), std::string::npos) << out;
}

TEST_F(MdsDaemonTest, RefusesCorruptFsid) {
  start();
  ASSERT_EQ(mds_.stop(), 0);
  std::ofstream(data_dir_ + "/FSID") << "not hex at all\n";
  std::string out;
  const int rc = run_command(mds_binary() + " --data-dir " + data_dir_ +
                                 " --listen tcp://127.0.0.1:0 --cluster-key-file " + key_file_,
                             &out);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("does not hold a file system id"), std::string::npos) << out;
}

TEST_F(MdsDaemonTest, CheckReportsDamage) {
  start();
  ASSERT_TRUE(register_target(0, "tcp://127.0.0.1:1").ok());
  ASSERT_TRUE(create(kRoot, "f").ok());
  ASSERT_EQ(mds_.stop(), 0);
  {
    auto kv = RocksKvStore::Open({data_dir_ + "/db", true, false});
    ASSERT_TRUE(kv.ok()) << kv.status().ToString();
    KvBatch b;
    b.del(Space::kDentries, keys::dentry(kRoot, "f"));
    ASSERT_TRUE((*kv)->commit(b).ok());
  }
  std::string out;
  EXPECT_EQ(check(&out), 1) << out;
  EXPECT_NE(out.find("unreachable"), std::string::npos) << out;
}

TEST(MdsConfigTest, ShippedFileStatesTheDefaults) {
  const char* src = std::getenv("SURGE_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "SURGE_SOURCE_DIR is not set (run through ctest)";
  MdsConfig from_file, defaults;
  // Start from different values so every key in the file must be read.
  from_file.data_dir = from_file.listen = from_file.cluster_key_file = "changed";
  from_file.log_level = "changed";
  from_file.sync = false;
  from_file.default_stripe_count = 99;
  from_file.session_timeout_ms = 1;
  from_file.orphan_startup_grace_ms = 1;
  from_file.target_timeout_ms = 1;
  from_file.chain_rebalance_max_moves = 99;
  ASSERT_TRUE(load_config_file(std::string(src) + "/mds/surge-mds.toml", from_file).ok());
  EXPECT_EQ(from_file.data_dir, defaults.data_dir);
  EXPECT_EQ(from_file.listen, defaults.listen);
  EXPECT_EQ(from_file.cluster_key_file, defaults.cluster_key_file);
  EXPECT_EQ(from_file.log_level, defaults.log_level);
  EXPECT_EQ(from_file.sync, defaults.sync);
  EXPECT_EQ(from_file.default_stripe_count, defaults.default_stripe_count);
  EXPECT_EQ(from_file.session_timeout_ms, defaults.session_timeout_ms);
  EXPECT_EQ(from_file.orphan_startup_grace_ms, defaults.orphan_startup_grace_ms);
  EXPECT_EQ(from_file.target_timeout_ms, defaults.target_timeout_ms);
  EXPECT_EQ(from_file.chain_rebalance_max_moves, defaults.chain_rebalance_max_moves);
  EXPECT_TRUE(validate_config(from_file).ok());
}

TEST(MdsConfigTest, NoRebalanceMovesIsRefusedByName) {
  MdsConfig c;
  c.chain_rebalance_max_moves = 0;
  Status st = validate_config(c);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("chains.rebalance_max_moves"), std::string::npos) << st.message();
}

TEST(MdsConfigTest, UnknownKeyIsRefused) {
  TempDir t{"surge-mds-cfg"};
  const std::string p = t.path() + "/x.toml";
  std::ofstream(p) << "[server]\nlisten_addr = \"x\"\n";
  MdsConfig c;
  Status s = load_config_file(p, c);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("server.listen_addr"), std::string::npos);
}

TEST(MdsConfigTest, WrongTypeIsRefused) {
  TempDir t{"surge-mds-cfg"};
  const std::string p = t.path() + "/x.toml";
  std::ofstream(p) << "[store]\nsync = \"yes\"\n";
  MdsConfig c;
  EXPECT_EQ(load_config_file(p, c).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace surge::mds::testing
