// Fuzzes every MDS request a peer can send, through the real service: the
// handlers register_mds_handlers() binds (protobuf decode, the request
// checks, the namespace, cluster map and sessions) over a real RocksDB in a
// temp dir. Only the data servers are a stand-in (ObjectTargets that
// answer OK), as in the namespace unit tests.
//
// An input is a sequence of request records (fuzz_support.h,
// dispatch_one), so one input can build the state a later request needs
// (create, then rename, link, setxattr on it). The store persists across
// inputs of one run: a finding is reproduced by rerunning its input on a
// fresh store first, and otherwise by the run's -runs log.
#include <memory>

#include "mds/cluster/cluster_map.h"
#include "mds/cluster/object_targets.h"
#include "mds/cluster/session_table.h"
#include "mds/kv/rocksdb_kv_store.h"
#include "mds/namespace/namespace.h"
#include "mds/service/mds_metrics.h"
#include "mds/service/mds_service.h"
#include "net/proto/mds_methods.h"
#include "tests/fuzz/fuzz_support.h"

using namespace surge;
namespace pb = surge::proto::mds;

namespace {

class NullObjectTargets final : public mds::ObjectTargets {
 public:
  Status truncate(uint32_t, const std::string&, uint64_t, uint64_t, uint64_t) override {
    return Status::OK();
  }
  Status remove(uint32_t, const std::string&, uint64_t, uint64_t) override { return Status::OK(); }
  Status probe(const std::string&) override { return Status::OK(); }
  Status truncate_chunk(const mds::ChunkAddress&, uint64_t, uint64_t) override {
    return Status::OK();
  }
  Status remove_chunk(const mds::ChunkAddress&, uint64_t) override { return Status::OK(); }
};

struct Mds {
  std::unique_ptr<net::BufferPool> pool;
  std::unique_ptr<mds::RocksKvStore> kv;
  std::unique_ptr<mds::ClusterMap> map;
  std::unique_ptr<mds::SessionTable> sessions;
  NullObjectTargets objects;
  std::unique_ptr<mds::Namespace> ns;
  mds::MdsMetrics metrics;
  std::unique_ptr<fuzz::CapturingServer> server;
};
Mds* g = nullptr;

template <typename T>
T must(Result<T> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "mds_rpc_fuzzer: %s: %s\n", what, r.status().ToString().c_str());
    std::abort();
  }
  return std::move(*r);
}

void set_up() {
  g = new Mds;
  net::BufferPoolOptions po;
  po.name = "fuzz-mds";
  po.classes = {{4096, 16}, {64 * 1024, 4}};
  po.huge_pages = false;
  po.lock_memory = false;
  g->pool = must(net::BufferPool::Create(po), "buffer pool");
  mds::RocksKvOptions ko;
  ko.path = fuzz::make_temp_dir("surge-fuzz-mds") + "/db";
  ko.sync = false;
  ko.block_cache_bytes = 8 << 20;
  g->kv = must(mds::RocksKvStore::Open(ko), "open RocksDB");
  uint64_t fs_id = must(mds::Namespace::FormatOrLoad(g->kv.get(), 0), "format");
  g->map = must(mds::ClusterMap::Load(g->kv.get(), fs_id, {}), "cluster map");
  for (uint32_t i = 1; i <= 3; ++i) {
    pb::RegisterTargetRequest r;
    r.set_target_id(i);
    r.set_address("tcp://127.0.0.1:" + std::to_string(7100 + i));
    r.set_capacity_bytes(100ull << 30);
    r.set_free_bytes(50ull << 30);
    (void)must(g->map->register_target(r), "register target");
  }
  g->sessions = std::make_unique<mds::SessionTable>(g->kv.get(), mds::SessionOptions{}, false);
  mds::NamespaceOptions no;
  no.default_stripe_size = 64 * 1024;
  no.default_stripe_count = 2;
  // Short directory leases: an input adding to another session's leased
  // directory over and over waits one term each time (-timeout=30).
  no.dir_lease_ms = 2;
  g->ns = must(mds::Namespace::Open(g->kv.get(), g->map.get(), g->sessions.get(), &g->objects, no),
               "namespace");
  g->server = std::make_unique<fuzz::CapturingServer>(*g->pool);
  mds::register_mds_handlers(*g->server, *g->ns, *g->map, *g->sessions, g->objects, &g->metrics);
}

uint8_t index_of(uint16_t method) {
  const auto& hs = g->server->handlers();
  for (size_t i = 0; i < hs.size(); ++i) {
    if (hs[i].method == method) return static_cast<uint8_t>(i);
  }
  std::fprintf(stderr, "mds_rpc_fuzzer: no handler for method %u\n", method);
  std::abort();
}

template <typename M>
std::string rec(const typename M::Request& req) {
  return fuzz::encode_record(index_of(M::kMethod), {}, 0, req.SerializeAsString());
}

pb::Credentials root() {
  pb::Credentials c;
  return c;
}
pb::Credentials user(uint32_t uid) {
  pb::Credentials c;
  c.set_uid(uid);
  c.set_gid(uid);
  c.add_groups(uid + 1);
  return c;
}

void write_seeds(const std::string& dir) {
  using namespace pb;
  const uint64_t kRoot = pb::kRootIno;
  // Every method once, with a plausible body.
  {
    std::string all;
    RegisterTargetRequest rt;
    rt.set_target_id(9);
    rt.set_address("tcp://127.0.0.1:7109");
    rt.set_capacity_bytes(1 << 30);
    all += rec<MdsRegisterTarget>(rt);
    TargetHeartbeatRequest hb;
    hb.set_target_id(1);
    hb.set_free_bytes(1 << 20);
    all += rec<MdsTargetHeartbeat>(hb);
    all += rec<MdsGetClusterMap>(GetClusterMapRequest());
    SetTargetDrainRequest dr;
    dr.set_target_id(2);
    dr.set_draining(true);
    all += rec<MdsSetTargetDrain>(dr);
    OpenSessionRequest os;
    os.set_client_name("fuzz:1");
    all += rec<MdsOpenSession>(os);
    SessionHeartbeatRequest sh;
    sh.set_session_id(1);
    all += rec<MdsSessionHeartbeat>(sh);
    CloseSessionRequest cs;
    cs.set_session_id(1);
    all += rec<MdsCloseSession>(cs);
    fuzz::write_seed(dir, "cluster_and_sessions", all);
  }
  {
    std::string all;
    MkdirRequest mk;
    *mk.mutable_cred() = root();
    mk.set_parent(kRoot);
    mk.set_name("d");
    mk.set_mode(0777);
    all += rec<MdsMkdir>(mk);
    CreateRequest cr;
    *cr.mutable_cred() = user(1000);
    cr.set_parent(kRoot);
    cr.set_name("f");
    cr.set_mode(0644);
    cr.set_exclusive(true);
    cr.set_flags(2);
    all += rec<MdsCreate>(cr);
    LookupRequest lk;
    *lk.mutable_cred() = user(1000);
    lk.set_parent(kRoot);
    lk.set_name("f");
    all += rec<MdsLookup>(lk);
    GetAttrRequest ga;
    *ga.mutable_cred() = root();
    ga.set_ino(kRoot);
    all += rec<MdsGetAttr>(ga);
    SetAttrRequest sa;
    *sa.mutable_cred() = root();
    sa.set_ino(kRoot);
    sa.set_valid(SETATTR_MODE);
    sa.set_mode(0777);
    all += rec<MdsSetAttr>(sa);
    MknodRequest mn;
    *mn.mutable_cred() = root();
    mn.set_parent(kRoot);
    mn.set_name("fifo");
    mn.set_mode(010644);
    all += rec<MdsMknod>(mn);
    SymlinkRequest sl;
    *sl.mutable_cred() = root();
    sl.set_parent(kRoot);
    sl.set_name("s");
    sl.set_target("f");
    all += rec<MdsSymlink>(sl);
    RenameRequest rn;
    *rn.mutable_cred() = root();
    rn.set_old_parent(kRoot);
    rn.set_old_name("s");
    rn.set_new_parent(kRoot);
    rn.set_new_name("s2");
    all += rec<MdsRename>(rn);
    ReadDirRequest rd;
    *rd.mutable_cred() = root();
    rd.set_ino(kRoot);
    rd.set_max_entries(16);
    rd.set_plus(true);
    all += rec<MdsReadDir>(rd);
    StatFsRequest sf;
    all += rec<MdsStatFs>(sf);
    UnlinkRequest ul;
    *ul.mutable_cred() = root();
    ul.set_parent(kRoot);
    ul.set_name("fifo");
    all += rec<MdsUnlink>(ul);
    UnlinkRequest rm;
    *rm.mutable_cred() = root();
    rm.set_parent(kRoot);
    rm.set_name("d");
    all += rec<MdsRmdir>(rm);
    fuzz::write_seed(dir, "namespace", all);
  }
  {
    // Needs an inode number: the root's, and whatever the fuzzer guesses.
    std::string all;
    SetXattrRequest sx;
    *sx.mutable_cred() = root();
    sx.set_ino(kRoot);
    sx.set_name("user.k");
    sx.set_value("v");
    all += rec<MdsSetXattr>(sx);
    GetXattrRequest gx;
    *gx.mutable_cred() = root();
    gx.set_ino(kRoot);
    gx.set_name("user.k");
    gx.set_size(64);
    all += rec<MdsGetXattr>(gx);
    ListXattrRequest lx;
    *lx.mutable_cred() = root();
    lx.set_ino(kRoot);
    lx.set_size(64);
    all += rec<MdsListXattr>(lx);
    RemoveXattrRequest rx;
    *rx.mutable_cred() = root();
    rx.set_ino(kRoot);
    rx.set_name("user.k");
    all += rec<MdsRemoveXattr>(rx);
    SetLayoutRequest sl;
    *sl.mutable_cred() = root();
    sl.set_ino(kRoot);
    sl.mutable_layout()->set_stripe_size(1 << 20);
    sl.mutable_layout()->set_stripe_count(2);
    all += rec<MdsSetLayout>(sl);
    GetLayoutRequest gl;
    *gl.mutable_cred() = root();
    gl.set_ino(kRoot);
    all += rec<MdsGetLayout>(gl);
    CreateRequest cr;
    *cr.mutable_cred() = root();
    cr.set_parent(kRoot);
    cr.set_name("g");
    cr.set_mode(0600);
    all += rec<MdsCreate>(cr);
    ReportSizeRequest rs;
    *rs.mutable_cred() = root();
    rs.set_ino(2);
    rs.set_end(1 << 20);
    all += rec<MdsReportSize>(rs);
    OpenRequest op;
    *op.mutable_cred() = root();
    op.set_ino(2);
    op.set_flags(02);
    all += rec<MdsOpen>(op);
    CloseRequest cl;
    cl.set_ino(2);
    all += rec<MdsClose>(cl);
    CloseManyRequest cm;
    cm.add_inos(2);
    cm.add_inos(2);
    all += rec<MdsCloseMany>(cm);
    AccessRequest ac;
    *ac.mutable_cred() = user(1000);
    ac.set_ino(kRoot);
    ac.set_mask(7);
    all += rec<MdsAccess>(ac);
    ReadlinkRequest rl;
    *rl.mutable_cred() = root();
    rl.set_ino(2);
    all += rec<MdsReadlink>(rl);
    LinkRequest ln;
    *ln.mutable_cred() = root();
    ln.set_ino(2);
    ln.set_new_parent(kRoot);
    ln.set_new_name("h");
    all += rec<MdsLink>(ln);
    fuzz::write_seed(dir, "xattrs_layouts_opens", all);
  }
  // Directory leases: a session's mkdir, its create there, another
  // session's (the lease recalled and waited out), and one without any.
  {
    std::string all;
    OpenSessionRequest os;
    os.set_client_name("fuzz:holder");
    all += rec<MdsOpenSession>(os);
    os.set_client_name("fuzz:other");
    all += rec<MdsOpenSession>(os);
    MkdirRequest mk;
    *mk.mutable_cred() = root();
    mk.set_parent(kRoot);
    mk.set_name("leased");
    mk.set_mode(0777);
    mk.set_session_id(1);
    all += rec<MdsMkdir>(mk);
    CreateRequest cr;
    *cr.mutable_cred() = root();
    cr.set_parent(2);
    cr.set_name("mine");
    cr.set_mode(0644);
    cr.set_exclusive(true);
    cr.set_session_id(1);
    all += rec<MdsCreate>(cr);
    cr.set_name("theirs");
    cr.set_session_id(2);
    all += rec<MdsCreate>(cr);
    SymlinkRequest sl;
    *sl.mutable_cred() = root();
    sl.set_parent(2);
    sl.set_name("link");
    sl.set_target("mine");
    all += rec<MdsSymlink>(sl);
    fuzz::write_seed(dir, "dir_leases", all);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logs();
  set_up();
  fuzz::maybe_write_seeds(write_seeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::ByteReader in(data, size);
  // At most 64 requests per input: a long input is many requests, not one
  // slow one.
  for (int i = 0; i < 64 && fuzz::dispatch_one(in, *g->server, *g->pool, 1 << 20); ++i) {
  }
  return 0;
}
