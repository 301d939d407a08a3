// EtcdLeader: lease, keep-alive and campaign (see the header).
#include "mds/kv/etcd/etcd_leader.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/log.h"
#include "etcd_kv.grpc.pb.h"

namespace surge::mds {

namespace epb = ::etcdserverpb;
using Clock = std::chrono::steady_clock;

struct EtcdLeader::Impl {
  EtcdLeaderOptions o;
  std::string self;  // set by begin(), before the thread starts (read under mu elsewhere)
  struct Member {
    std::string endpoint;
    std::unique_ptr<epb::KV::Stub> kv;
    std::unique_ptr<epb::Lease::Stub> lease;
  };
  std::vector<Member> members;
  mutable std::atomic<size_t> current{0};  // the member that answered last
  int64_t lease_id = 0;                    // campaign thread only
  Clock::time_point lease_sure_until{};    // campaign thread only

  mutable std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  bool leading = false;
  Clock::time_point valid_until{};
  std::string leader;
  std::thread thread;

  std::chrono::milliseconds poll() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(o.ttl) / 3;
  }

  // Runs fn against each member in turn from the one that answered last,
  // until one answers; the last error otherwise.
  template <typename Fn>
  grpc::Status call_any(Fn&& fn) const {
    grpc::Status s;
    const size_t first = current.load();
    for (size_t i = 0; i < members.size(); ++i) {
      const size_t idx = (first + i) % members.size();
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + o.deadline);
      s = fn(members[idx], &ctx);
      if (s.ok()) {
        current.store(idx);
        return s;
      }
    }
    return s;
  }

  std::string member_key() const { return o.members_prefix + self; }

  void set_state(bool lead, std::string who) {
    std::lock_guard lk(mu);
    if (lead != leading) {
      if (lead) {
        SLOG_INFO(
            "MDS {} is now the leader (etcd lease {:x}): it runs failure detection, chain "
            "changes and orphan collection",
            self, lease_id);
      } else {
        SLOG_WARN("MDS {} is no longer the leader{}", self,
                  who.empty() ? std::string() : " (the leader is " + who + ")");
      }
    }
    leading = lead;
    valid_until = lead ? lease_sure_until - poll() : Clock::time_point{};
    leader = std::move(who);
  }

  // A lease of its own, granted or kept alive; false when etcd could not be
  // reached or the lease is gone.
  bool hold_lease() {
    const auto sent = Clock::now();
    if (lease_id == 0) {
      epb::LeaseGrantRequest req;
      req.set_ttl(o.ttl.count());
      epb::LeaseGrantResponse resp;
      grpc::Status s = call_any([&](const Member& m, grpc::ClientContext* ctx) {
        return m.lease->LeaseGrant(ctx, req, &resp);
      });
      if (!s.ok() || resp.id() == 0 || !resp.error().empty()) {
        SLOG_WARN("MDS {}: cannot get an etcd lease for the leader election: {}", self,
                  s.ok() ? resp.error() : s.error_message());
        return false;
      }
      lease_id = resp.id();
      lease_sure_until = sent + std::chrono::seconds(resp.ttl());
      return true;
    }
    epb::LeaseKeepAliveResponse resp;
    grpc::Status s = call_any([&](const Member& m, grpc::ClientContext* ctx) {
      auto stream = m.lease->LeaseKeepAlive(ctx);
      epb::LeaseKeepAliveRequest req;
      req.set_id(lease_id);
      if (!stream->Write(req) || !stream->Read(&resp)) {
        ctx->TryCancel();
        stream->Finish();
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "keep-alive stream broke");
      }
      stream->WritesDone();
      return stream->Finish();
    });
    if (!s.ok()) {
      SLOG_WARN("MDS {}: keeping etcd lease {:x} alive failed: {}", self, lease_id,
                s.error_message());
      return false;
    }
    if (resp.ttl() <= 0) {
      SLOG_WARN("MDS {}: etcd lease {:x} expired; taking a new one", self, lease_id);
      lease_id = 0;
      return false;
    }
    lease_sure_until = sent + std::chrono::seconds(resp.ttl());
    return true;
  }

  // Writes the leader key when it is absent; reads who holds it otherwise.
  // Either way (re)writes this MDS's member key under its lease.
  void campaign() {
    epb::TxnRequest req;
    epb::Compare* c = req.add_compare();
    c->set_key(o.key);
    c->set_target(epb::Compare::CREATE);
    c->set_result(epb::Compare::EQUAL);
    c->set_create_revision(0);
    epb::PutRequest* put = req.add_success()->mutable_request_put();
    put->set_key(o.key);
    put->set_value(self);
    put->set_lease(lease_id);
    req.add_failure()->mutable_request_range()->set_key(o.key);
    for (auto* branch : {req.add_success(), req.add_failure()}) {
      epb::PutRequest* member = branch->mutable_request_put();
      member->set_key(member_key());
      member->set_value(self);
      member->set_lease(lease_id);
    }
    epb::TxnResponse resp;
    grpc::Status s = call_any(
        [&](const Member& m, grpc::ClientContext* ctx) { return m.kv->Txn(ctx, req, &resp); });
    if (!s.ok()) {
      // A leader keeps leading while its lease is surely alive;
      // is_leader() ends it then.
      SLOG_WARN("MDS {}: leader election: etcd unreachable: {}", self, s.error_message());
      return;
    }
    if (resp.succeeded()) {
      set_state(true, self);
      return;
    }
    if (resp.responses_size() >= 1 && resp.responses(0).has_response_range() &&
        resp.responses(0).response_range().kvs_size() == 1) {
      const epb::KeyValue& kv = resp.responses(0).response_range().kvs(0);
      if (kv.lease() == lease_id) {
        set_state(true, self);  // ours from an earlier round
      } else {
        set_state(false, kv.value());
      }
      return;
    }
    set_state(false, "");  // deleted between the compare and the read
  }

  void revoke() {
    if (lease_id == 0) return;
    epb::LeaseRevokeRequest req;
    req.set_id(lease_id);
    epb::LeaseRevokeResponse resp;
    grpc::Status s = call_any([&](const Member& m, grpc::ClientContext* ctx) {
      return m.lease->LeaseRevoke(ctx, req, &resp);
    });
    if (!s.ok()) {
      SLOG_WARN("MDS {}: revoking etcd lease {:x}: {} (it expires in {} s)", self, lease_id,
                s.error_message(), o.ttl.count());
    }
    lease_id = 0;
  }

  void run() {
    std::unique_lock lk(mu);
    while (!stopping) {
      lk.unlock();
      if (hold_lease()) {
        campaign();
      } else if (lease_id == 0) {
        set_state(false, "");
      }
      lk.lock();
      cv.wait_for(lk, poll(), [&] { return stopping; });
    }
    leading = false;
    lk.unlock();
    revoke();
  }
};

EtcdLeader::EtcdLeader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

EtcdLeader::~EtcdLeader() {
  stop();
}

Result<std::unique_ptr<EtcdLeader>> EtcdLeader::Create(EtcdLeaderOptions options) {
  if (options.endpoints.empty())
    return Status::InvalidArgument("leader election: no etcd endpoints");
  if (options.members_prefix.empty() || options.members_prefix.back() != '/') {
    return Status::InvalidArgument("leader election: the member key prefix '" +
                                   options.members_prefix + "' must end in '/'");
  }
  if (options.ttl.count() < 2) {
    return Status::InvalidArgument("leader election: the lease must last at least 2 s, not " +
                                   std::to_string(options.ttl.count()));
  }
  auto impl = std::make_unique<Impl>();
  impl->o = std::move(options);
  for (const std::string& ep : impl->o.endpoints) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    auto ch = grpc::CreateCustomChannel(ep, grpc::InsecureChannelCredentials(), args);
    impl->members.push_back({ep, epb::KV::NewStub(ch), epb::Lease::NewStub(ch)});
  }
  return std::unique_ptr<EtcdLeader>(new EtcdLeader(std::move(impl)));
}

void EtcdLeader::begin(const std::string& self) {
  if (impl_->thread.joinable()) return;
  {
    std::lock_guard lk(impl_->mu);
    impl_->self = self;
  }
  Impl* raw = impl_.get();
  raw->thread = std::thread([raw] { raw->run(); });
}

void EtcdLeader::stop() {
  {
    std::lock_guard lk(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

bool EtcdLeader::is_leader() const {
  std::lock_guard lk(impl_->mu);
  return impl_->leading && Clock::now() < impl_->valid_until;
}

std::string EtcdLeader::leader() const {
  std::lock_guard lk(impl_->mu);
  return impl_->leader;
}

std::string EtcdLeader::self() const {
  std::lock_guard lk(impl_->mu);
  return impl_->self;
}

Result<std::vector<std::string>> EtcdLeader::members() const {
  epb::RangeRequest req;
  req.set_key(impl_->o.members_prefix);
  std::string end = impl_->o.members_prefix;
  end.back() = static_cast<char>(end.back() + 1);  // the prefix ends in '/'
  req.set_range_end(end);
  epb::RangeResponse resp;
  grpc::Status s = impl_->call_any([&](const Impl::Member& m, grpc::ClientContext* ctx) {
    return m.kv->Range(ctx, req, &resp);
  });
  if (!s.ok()) {
    return Status::Unavailable("listing the MDS members in etcd (" + impl_->o.endpoints.front() +
                               ", ...): " + s.error_message());
  }
  std::vector<std::string> out;
  for (const auto& kv : resp.kvs()) out.push_back(kv.value());
  return out;
}

}  // namespace surge::mds
