// Fuzzes every data-server request a peer can send, through the real
// service: OdsService's handlers (protobuf decode, the checks on ids,
// offsets, lengths and bulk descriptors, admission, piece CRCs) over a real
// ObjectStore in a temp dir and a real buffer pool. The bulk regions, and
// how many pulled bytes the peer sends before it "disconnects", come from
// the input (fuzz_support.h, dispatch_one).
//
// The store's largest object is 16 MiB here (1 TiB in a daemon), so a
// scrub of a sparse object the fuzzer truncated up is quick; every other
// limit is the daemon's default.
#include <memory>
#include <vector>

#include "common/crc32c.h"
#include "net/proto/ods_methods.h"
#include "net/proto/ods_write_pieces.h"
#include "ods/service/ods_service.h"
#include "ods/store/object_store.h"
#include "tests/fuzz/fuzz_support.h"

using namespace surge;
namespace pb = surge::proto::ods;

namespace {

constexpr uint64_t kMaxObject = 16 << 20;

struct Ods {
  std::unique_ptr<net::BufferPool> pool;
  std::unique_ptr<ods::ObjectStore> store;
  std::unique_ptr<ods::OdsService> service;
  std::unique_ptr<fuzz::CapturingServer> server;
};
Ods* g = nullptr;

template <typename T>
T must(Result<T> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "ods_rpc_fuzzer: %s: %s\n", what, r.status().ToString().c_str());
    std::abort();
  }
  return std::move(*r);
}

void set_up() {
  g = new Ods;
  net::BufferPoolOptions po;
  po.name = "fuzz-ods";
  po.classes = {{4096, 32}, {64 * 1024, 16}, {1024 * 1024, 8}};
  po.huge_pages = false;
  po.lock_memory = false;
  g->pool = must(net::BufferPool::Create(po), "buffer pool");
  ods::ObjectStoreOptions so;
  so.data_dir = fuzz::make_temp_dir("surge-fuzz-ods");
  so.max_object_size = kMaxObject;
  so.max_open_objects = 64;
  g->store = must(ods::ObjectStore::Open(so), "object store");
  ods::OdsServiceOptions svc;
  // Single-threaded: a wait for buffers could only be a leak of them.
  svc.buffer_wait = std::chrono::milliseconds(1000);
  g->service = std::make_unique<ods::OdsService>(*g->store, *g->pool, svc);
  g->server = std::make_unique<fuzz::CapturingServer>(*g->pool);
  g->service->register_handlers(*g->server);
}

uint8_t index_of(uint16_t method) {
  const auto& hs = g->server->handlers();
  for (size_t i = 0; i < hs.size(); ++i) {
    if (hs[i].method == method) return static_cast<uint8_t>(i);
  }
  std::abort();
}

// The bytes FuzzBulk::pull produces for [0, len) of a region.
std::vector<std::byte> pulled(uint64_t len) {
  std::vector<std::byte> v(len);
  for (uint64_t i = 0; i < len; ++i) v[i] = std::byte(static_cast<uint8_t>(i * 131));
  return v;
}

net::BulkRegion region(net::BulkAccess a, uint64_t len) {
  net::BulkRegion r;
  r.access = a;
  r.length = len;
  return r;
}

template <typename M>
std::string rec(const typename M::Request& req, std::vector<net::BulkRegion> regions = {},
                uint32_t budget = 0) {
  return fuzz::encode_record(index_of(M::kMethod), regions, budget, req.SerializeAsString());
}

void write_seeds(const std::string& dir) {
  constexpr auto kPull = net::BulkAccess::kServerPull;
  constexpr auto kPush = net::BulkAccess::kServerPush;
  {
    std::string all;
    pb::WriteRequest w;
    w.set_object_id(5);
    w.set_offset(4096);
    w.set_length(10000);
    auto data = pulled(10000);
    w.set_crc32c(crc32c(data.data(), data.size()));
    all += rec<pb::OdsWrite>(w, {region(kPull, 10000)}, 10000);
    pb::ReadRequest r;
    r.set_object_id(5);
    r.set_offset(0);
    r.set_length(20000);
    all += rec<pb::OdsRead>(r, {region(kPush, 20000)});
    pb::StatRequest st;
    st.set_object_id(5);
    all += rec<pb::OdsStat>(st);
    fuzz::write_seed(dir, "write_read_stat", all);
  }
  {
    // A write in pieces (what libsurge sends for large writes), then one
    // whose peer goes away mid-payload.
    std::string all;
    pb::WriteRequest w;
    w.set_object_id(6);
    w.set_offset(1000);
    w.set_length(3 * 4096);
    auto data = pulled(3 * 4096);
    pb::set_piece_crcs(w, data.data(), data.size(), 4096);
    all += rec<pb::OdsWrite>(w, {region(kPull, 3 * 4096)}, 3 * 4096);
    all += rec<pb::OdsWrite>(w, {region(kPull, 3 * 4096)}, 5000);
    fuzz::write_seed(dir, "write_pieces_and_short_payload", all);
  }
  {
    std::string all;
    pb::TruncateRequest t;
    t.set_object_id(7);
    t.set_size(1 << 20);
    all += rec<pb::OdsTruncate>(t);
    pb::SyncRequest s;
    s.add_object_ids(7);
    s.add_object_ids(5);
    all += rec<pb::OdsSync>(s);
    all += rec<pb::OdsStatFs>(pb::StatFsRequest());
    pb::ScrubRequest sc;
    sc.set_first_dir(0);
    sc.set_dir_count(4096);
    all += rec<pb::OdsScrub>(sc);
    pb::RemoveRequest rm;
    rm.set_object_id(7);
    all += rec<pb::OdsRemove>(rm);
    fuzz::write_seed(dir, "truncate_sync_scrub_remove", all);
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
  // Regions up to 16 MiB: over the 8 MiB request limit, so it is tried.
  for (int i = 0; i < 16 && fuzz::dispatch_one(in, *g->server, *g->pool, 16 << 20); ++i) {
  }
  return 0;
}
