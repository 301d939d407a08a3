#include "mds/kv/etcd/etcd_kv_store.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <thread>
#include <utility>

#include "etcd_kv.grpc.pb.h"

namespace surge::mds {

namespace epb = ::etcdserverpb;

namespace {

const char* space_name(Space s) {
  switch (s) {
    case Space::kInodes: return "inodes";
    case Space::kDentries: return "dentries";
    case Space::kXattrs: return "xattrs";
    case Space::kSystem: return "system";
  }
  return "?";
}

const char* code_name(grpc::StatusCode c) {
  switch (c) {
    case grpc::StatusCode::UNAVAILABLE: return "Unavailable";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DeadlineExceeded";
    case grpc::StatusCode::INVALID_ARGUMENT: return "InvalidArgument";
    case grpc::StatusCode::OUT_OF_RANGE: return "OutOfRange";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "ResourceExhausted";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FailedPrecondition";
    case grpc::StatusCode::PERMISSION_DENIED: return "PermissionDenied";
    case grpc::StatusCode::UNAUTHENTICATED: return "Unauthenticated";
    case grpc::StatusCode::CANCELLED: return "Cancelled";
    default: return "gRPC error";
  }
}

// The errors worth another member: this one is down, partitioned or has lost
// its leader (etcd answers "no leader" and "request timed out" as
// Unavailable), or did not answer within the deadline.
bool try_next_endpoint(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

// A member was reached but could not commit the call: no leader (an
// election), no quorum, or no answer in time.
bool cannot_commit(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         (s.error_code() == grpc::StatusCode::UNAVAILABLE &&
          s.error_message().find("etcdserver") != std::string::npos);
}

std::string printable(std::string_view key) {
  std::string out;
  for (unsigned char c : key.substr(0, 64)) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (key.size() > 64) out += "...";
  return out;
}

}  // namespace

struct EtcdKvStore::Impl {
  EtcdKvOptions o;
  struct Member {
    std::string endpoint;
    std::unique_ptr<epb::KV::Stub> kv;
  };
  std::vector<Member> members;
  std::atomic<size_t> current{0};  // the member that answered last

  std::string space_prefix(Space s) const {
    std::string p = o.prefix;
    p.push_back(static_cast<char>(s));
    return p;
  }
  std::string full_key(Space s, std::string_view key) const {
    std::string k = space_prefix(s);
    k.append(key);
    return k;
  }
  // The first key after every key of the space.
  std::string space_end(Space s) const {
    std::string p = o.prefix;
    p.push_back(static_cast<char>(static_cast<uint8_t>(s) + 1));
    return p;
  }

  // Runs call(stub, context) against the current member, moving on to the
  // next one on Unavailable / DeadlineExceeded until every member has been
  // tried once; again, for up to election_wait, while some member was
  // reached but could not commit. The error names every member tried (in
  // the last round) and what was being done.
  template <typename Call>
  Status call(const std::string& what, Call&& fn) {
    const size_t n = members.size();
    struct Failure {
      std::string endpoint;
      grpc::Status status;
    };
    std::vector<Failure> failures;
    const auto give_up = std::chrono::steady_clock::now() + o.election_wait;
    for (;;) {
      const size_t first = current.load(std::memory_order_relaxed);
      failures.clear();
      for (size_t i = 0; i < n; i++) {
        const size_t idx = (first + i) % n;
        Member& m = members[idx];
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + o.deadline);
        grpc::Status s = fn(*m.kv, &ctx);
        if (s.ok()) {
          if (idx != first) current.store(idx, std::memory_order_relaxed);
          return Status::OK();
        }
        failures.push_back({m.endpoint, s});
        if (!try_next_endpoint(s)) break;
      }
      const bool electing = std::any_of(failures.begin(), failures.end(),
                                        [](const Failure& f) { return cannot_commit(f.status); });
      if (!electing || !try_next_endpoint(failures.back().status) ||
          std::chrono::steady_clock::now() >= give_up) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    // The error to lead with: a member that was reached but could not
    // commit (no leader, no quorum, deadline) says more than one that
    // refused the connection.
    const Failure* lead = &failures.back();
    for (const auto& f : failures) {
      if (cannot_commit(f.status)) {
        lead = &f;
        break;
      }
    }
    std::string msg = "etcd at " + lead->endpoint + ": ";
    Code code = Code::kIOError;
    switch (lead->status.error_code()) {
      case grpc::StatusCode::UNAVAILABLE:
        msg += "unreachable or no quorum";
        code = Code::kUnavailable;
        break;
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        msg += "no answer within " + std::to_string(o.deadline.count()) + " ms (no quorum?)";
        code = Code::kUnavailable;
        break;
      case grpc::StatusCode::INVALID_ARGUMENT:
        code = Code::kInvalidArgument;
        msg += "request refused";
        break;
      default:
        msg += "request failed";
        break;
    }
    msg += " (" + std::string(code_name(lead->status.error_code())) + ": " + lead->status.error_message() + ") " + what;
    if (failures.size() > 1) {
      msg += "; also tried";
      for (const auto& f : failures) {
        if (&f == lead) continue;
        msg += " " + f.endpoint + " (" + code_name(f.status.error_code()) + ")";
      }
    }
    return Status(code, msg);
  }
};

EtcdKvStore::EtcdKvStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EtcdKvStore::~EtcdKvStore() = default;

const EtcdKvOptions& EtcdKvStore::options() const {
  return impl_->o;
}

std::string EtcdKvStore::etcd_key(Space s, std::string_view key) const {
  return impl_->full_key(s, key);
}

Result<std::unique_ptr<EtcdKvStore>> EtcdKvStore::Open(const EtcdKvOptions& options) {
  if (options.endpoints.empty()) return Status::InvalidArgument("etcd backend: no etcd endpoints configured");
  if (options.deadline.count() <= 0) return Status::InvalidArgument("etcd backend: the call deadline must be positive");
  if (options.max_txn_ops == 0 || options.scan_page_keys == 0)
    return Status::InvalidArgument("etcd backend: max_txn_ops and scan_page_keys must be positive");
  auto impl = std::make_unique<Impl>();
  impl->o = options;
  for (const std::string& ep : options.endpoints) {
    if (ep.empty() || ep.find(':') == std::string::npos)
      return Status::InvalidArgument("etcd backend: endpoint '" + ep + "' is not host:port");
    grpc::ChannelArguments args;
    // Scan pages of big values (xattrs) may pass gRPC's 4 MiB default.
    args.SetMaxReceiveMessageSize(-1);
    // A killed member should be retried soon after it returns, not after
    // gRPC's reconnect backoff has grown to minutes.
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    auto ch = grpc::CreateCustomChannel(ep, grpc::InsecureChannelCredentials(), args);
    impl->members.push_back({ep, epb::KV::NewStub(ch)});
  }
  return std::unique_ptr<EtcdKvStore>(new EtcdKvStore(std::move(impl)));
}

Result<std::optional<std::string>> EtcdKvStore::get(Space s, std::string_view key) {
  epb::RangeRequest req;
  req.set_key(impl_->full_key(s, key));
  epb::RangeResponse resp;
  Status st = impl_->call("reading key '" + printable(key) + "' of space " + space_name(s),
                          [&](epb::KV::Stub& kv, grpc::ClientContext* ctx) {
                            return kv.Range(ctx, req, &resp);
                          });
  if (!st.ok()) return st;
  if (resp.kvs_size() == 0) return std::optional<std::string>();
  return std::optional<std::string>(std::move(*resp.mutable_kvs(0)->mutable_value()));
}

Status EtcdKvStore::scan(Space s, std::string_view begin, std::string_view end, const ScanFn& fn) {
  const std::string prefix = impl_->space_prefix(s);
  std::string from = prefix + std::string(begin);
  const std::string to = end.empty() ? impl_->space_end(s) : prefix + std::string(end);
  int64_t revision = 0;  // 0: the newest for the first page, then pinned
  while (from < to) {
    epb::RangeRequest req;
    req.set_key(from);
    req.set_range_end(to);
    req.set_limit(impl_->o.scan_page_keys);
    req.set_revision(revision);
    epb::RangeResponse resp;
    Status st = impl_->call("scanning space " + std::string(space_name(s)) + " from '" +
                                printable(std::string_view(from).substr(prefix.size())) + "'",
                            [&](epb::KV::Stub& kv, grpc::ClientContext* ctx) {
                              return kv.Range(ctx, req, &resp);
                            });
    if (!st.ok()) return st;
    // Every page reads the revision of the first, so a scan sees one state
    // of the store as RocksDB's iterator does.
    if (revision == 0) revision = resp.header().revision();
    for (const auto& kv : resp.kvs()) {
      std::string_view k(kv.key());
      if (k.size() < prefix.size() || k.compare(0, prefix.size(), prefix) != 0)
        return Status::Corruption("etcd backend: scan of space " + std::string(space_name(s)) +
                                  " returned key '" + printable(k) + "' outside its prefix");
      if (!fn(k.substr(prefix.size()), kv.value())) return Status::OK();
    }
    if (!resp.more() || resp.kvs_size() == 0) break;
    from = resp.kvs(resp.kvs_size() - 1).key();
    from.push_back('\0');  // the next key after the last one seen
  }
  return Status::OK();
}

Status EtcdKvStore::commit(const KvBatch& batch, bool /*durable*/) {
  const EtcdKvOptions& o = impl_->o;
  // etcd refuses a Txn that writes one key twice; a KvBatch applies its ops
  // in order, so only the last op on each key matters.
  std::map<std::string, const KvBatch::Op*> last;
  for (const auto& op : batch.ops()) last[impl_->full_key(op.space, op.key)] = &op;
  const size_t nops = last.size();
  const size_t nchecks = batch.checks().size();
  const std::string what = "committing batch of " + std::to_string(nops) + " ops and " +
                           std::to_string(nchecks) + " checks";
  if (nops > o.max_txn_ops || nchecks > o.max_txn_ops)
    return Status::InvalidArgument(
        "etcd backend: " + what + ": over etcd's max-txn-ops limit of " + std::to_string(o.max_txn_ops) +
        " per transaction (an atomic batch is never split; raise --max-txn-ops on every member and "
        "etcd_max_txn_ops)");
  epb::TxnRequest req;
  for (const auto& c : batch.checks()) {
    epb::Compare* cmp = req.add_compare();
    cmp->set_key(impl_->full_key(c.space, c.key));
    cmp->set_result(epb::Compare::EQUAL);
    if (c.expected) {
      // etcd fails a value compare on an absent key, as the check wants.
      cmp->set_target(epb::Compare::VALUE);
      cmp->set_value(*c.expected);
    } else {
      cmp->set_target(epb::Compare::VERSION);  // version 0: absent
      cmp->set_version(0);
    }
  }
  for (auto& [key, op] : last) {
    epb::RequestOp* r = req.add_success();
    if (op->value) {
      r->mutable_request_put()->set_key(key);
      r->mutable_request_put()->set_value(*op->value);
    } else {
      r->mutable_request_delete_range()->set_key(key);
    }
  }
  const size_t bytes = req.ByteSizeLong();
  if (bytes > o.max_request_bytes)
    return Status::InvalidArgument("etcd backend: " + what + ": " + std::to_string(bytes) +
                                   " bytes, over etcd's max-request-bytes limit of " +
                                   std::to_string(o.max_request_bytes) +
                                   " (an atomic batch is never split; raise --max-request-bytes on every "
                                   "member and etcd_max_request_bytes)");
  if (nops == 0 && nchecks == 0) return Status::OK();
  epb::TxnResponse resp;
  Status st = impl_->call(what, [&](epb::KV::Stub& kv, grpc::ClientContext* ctx) {
    return kv.Txn(ctx, req, &resp);
  });
  if (!st.ok()) return st;
  if (!resp.succeeded()) return Status::Busy("etcd backend: a check of the batch no longer holds (" + what + ")");
  return Status::OK();
}

Status EtcdKvStore::make_durable() {
  // Every commit was acknowledged after a quorum fsynced it (see the header).
  return Status::OK();
}

Result<uint64_t> EtcdKvStore::count_keys(Space s) {
  epb::RangeRequest req;
  req.set_key(impl_->space_prefix(s));
  req.set_range_end(impl_->space_end(s));
  req.set_count_only(true);
  epb::RangeResponse resp;
  Status st = impl_->call("counting the keys of space " + std::string(space_name(s)),
                          [&](epb::KV::Stub& kv, grpc::ClientContext* ctx) {
                            return kv.Range(ctx, req, &resp);
                          });
  if (!st.ok()) return st;
  return static_cast<uint64_t>(resp.count());
}

uint64_t EtcdKvStore::estimate_keys(Space s) {
  auto n = count_keys(s);
  return n.ok() ? *n : 0;  // statfs shows 0 files rather than failing
}

}  // namespace surge::mds
