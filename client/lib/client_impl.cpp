#include "client/lib/client_impl.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "client/lib/proto_convert.h"
#include "common/log.h"
#include "net/cluster_key.h"
#include "net/proto/mds_methods.h"

namespace surge::client {

namespace mds = proto::mds;

namespace {

// ClientOptions::io_attempt_timeout: 0 is half the io timeout, and an
// attempt never outlasts the IO.
std::chrono::milliseconds attempt_timeout(const ClientOptions& o) {
  const auto a = o.io_attempt_timeout.count() > 0 ? o.io_attempt_timeout : o.io_timeout / 2;
  return std::clamp(a, std::chrono::milliseconds(1), o.io_timeout);
}

std::string default_client_name() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + ":" + std::to_string(getpid());
}

}  // namespace

FileImpl::~FileImpl() {
  if (!closed.load() && owner != nullptr) {
    Status st = owner->close_handle(*this);
    if (!st.ok()) SLOG_WARN("client: implicit close of inode {}: {}", state->ino, st.ToString());
  }
}

// ---- lifecycle ------------------------------------------------------------------

ClientImpl::ClientImpl(const ClientOptions& options) : options_(options) {}

Result<std::unique_ptr<ClientImpl>> ClientImpl::Create(const ClientOptions& options) {
  if (options.mds_address.empty()) return Status::InvalidArgument("no MDS address given");
  std::unique_ptr<ClientImpl> c(new ClientImpl(options));
  SURGE_RETURN_IF_ERROR(c->start());
  return c;
}

uint64_t ClientImpl::next_op_id() {
  uint64_t id;
  do {
    id = op_seq_.fetch_add(1, std::memory_order_relaxed);
  } while (id == 0);
  return id;
}

Status ClientImpl::start() {
  {
    std::random_device rd;  // ids unique across clients with high probability
    op_seq_.store((uint64_t{rd()} << 32) ^ rd(), std::memory_order_relaxed);
  }
  key_ = options_.cluster_key;
  if (key_.empty()) {
    if (options_.cluster_key_file.empty()) {
      return Status::InvalidArgument("no cluster key or cluster key file given");
    }
    SURGE_ASSIGN_OR_RETURN(key_, net::load_cluster_key(options_.cluster_key_file));
  }
  if (options_.client_name.empty()) options_.client_name = default_client_name();

  net::BufferPoolOptions po;
  po.name = "client";
  po.classes = {{1u << 20, std::max<size_t>(options_.pool_buffers, 4)}};
  if (options_.request_buffers > 0) {
    if (options_.request_buffer_size <= (1u << 20)) {
      return Status::InvalidArgument("request_buffer_size " +
                                     std::to_string(options_.request_buffer_size) +
                                     " must exceed the 1 MiB pool class");
    }
    po.classes.push_back({options_.request_buffer_size, options_.request_buffers});
  }
  po.huge_pages = false;
  SURGE_ASSIGN_OR_RETURN(pool_, net::BufferPool::Create(po));

  net::ChannelOptions co;
  co.cluster_key = key_;
  co.connect_timeout = options_.connect_timeout;
  co.call_timeout = options_.mds_timeout;
  co.pool = pool_.get();
  SURGE_ASSIGN_OR_RETURN(auto mds_addresses, MdsLink::ParseAddresses(options_.mds_address));
  mds_ = std::make_unique<MdsLink>(std::move(mds_addresses), co, options_.mds_timeout);

  net::ChannelOptions oo = co;
  oo.call_timeout = options_.io_timeout;
  oo.connect_timeout = std::min(options_.connect_timeout, options_.io_timeout);
  ods_channels_ = std::make_unique<net::ChannelPool>(oo);

  map_ = std::make_unique<ClusterMapCache>(
      [this]() -> Result<mds::ClusterMap> {
        mds::GetClusterMapRequest req;
        mds::GetClusterMapReply resp;
        SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsGetClusterMap>(req, &resp));
        return resp.map();
      },
      options_.transport.empty() ? std::string("tcp") : options_.transport);
  data_ = std::make_unique<DataPath>(
      map_.get(), ods_channels_.get(),
      StripeIo::Options{options_.io_timeout, attempt_timeout(options_),
                        options_.max_inflight_bytes},
      [this](const mds::ReportTargetFailureRequest& req) -> Result<mds::ReportTargetFailureReply> {
        mds::ReportTargetFailureReply resp;
        SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsReportTargetFailure>(req, &resp));
        return resp;
      },
      options_.client_name);
  session_ = std::make_unique<MdsSession>(mds_.get(), &inodes_, map_.get(), options_.client_name);
  writes_ = std::make_unique<WriteBehind>(pool_.get(), data_.get(), options_.write_behind_bytes);
  sizes_ = std::make_unique<SizeReporter>(mds_.get(), writes_.get(), &inodes_);
  read_ahead_ = std::make_unique<ReadAhead>(pool_.get(), data_.get());
  closes_ = std::make_unique<CloseQueue>(mds_close_sender(mds_.get()));

  SURGE_RETURN_IF_ERROR(session_->open());
  SURGE_RETURN_IF_ERROR(map_->refresh());
  bg_ = std::thread([this] { background_loop(); });
  SLOG_DEBUG("client: connected to MDS at {} (session {}, map version {})", mds_->address(),
             session_->id(), map_->version());
  return Status::OK();
}

ClientImpl::~ClientImpl() {
  {
    std::lock_guard lk(bg_mu_);
    stopping_ = true;
  }
  bg_cv_.notify_all();
  if (bg_.joinable()) bg_.join();
  // Report what is still unreported; opens die with the session.
  if (sizes_) {
    for (auto& st : inodes_.all()) (void)sizes_->report(*st, false);
  }
  closes_.reset();  // sends the releases still queued, under their sessions
  if (session_) session_->close();
}

void ClientImpl::background_loop() {
  auto next_heartbeat = std::chrono::steady_clock::now() + session_->heartbeat_interval();
  auto tick = std::min(options_.size_report_interval, session_->heartbeat_interval());
  if (tick.count() <= 0) tick = std::chrono::milliseconds(1000);
  std::unique_lock lk(bg_mu_);
  while (!stopping_) {
    bg_cv_.wait_for(lk, tick, [this] { return stopping_; });
    if (stopping_) break;
    lk.unlock();
    sizes_->report_dirty();  // files being written, so other clients see them grow
    ahead_.expire();
    if (std::chrono::steady_clock::now() >= next_heartbeat) {
      next_heartbeat = std::chrono::steady_clock::now() + session_->heartbeat_interval();
      session_->heartbeat();
    }
    lk.lock();
  }
}

// ---- opening files --------------------------------------------------------------

FileRef ClientImpl::make_handle(const Attr& a, const mds::Attr& pa, int flags, const Caller& c) {
  auto f = std::make_shared<FileImpl>(inodes_.attach(a, file_layout_of(pa), flags, c), flags, c,
                                      options_.read_ahead_bytes);
  f->owner = this;
  {
    // Write failures before this open are not this handle's to report.
    std::lock_guard lk(f->state->mu);
    f->seen_error_seq = f->state->write_error_seq;
  }
  return f;
}

Result<FileRef> ClientImpl::open(Ino ino, int flags, const Caller& c, Attr* attr_out) {
  mds::OpenRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(ino);
  req.set_flags(static_cast<uint32_t>(flags));
  mds::EntryReply resp;
  for (int attempt = 0;; ++attempt) {
    uint64_t sid = session_->id();
    req.set_session_id(sid);
    Status st = mds_->call<mds::MdsOpen>(req, &resp);
    if (st.ok()) break;
    if (attempt > 0 || !session_->renew_after(st, sid)) return st;
  }
  Attr a = attr_from_proto(resp.attr());
  FileRef f = make_handle(a, resp.attr(), flags, c);
  if (attr_out != nullptr) *attr_out = a;
  return f;
}

Result<FileRef> ClientImpl::create(Ino parent, std::string_view name, uint32_t mode, int flags,
                                   const Caller& c, Attr* attr_out) {
  mds::CreateRequest req;
  req.set_op_id(next_op_id());  // a resend after a lost reply is not EEXIST
  *req.mutable_cred() = cred_to_proto(c);
  req.set_parent(parent);
  req.set_name(std::string(name));
  req.set_mode(mode & 07777);
  req.set_exclusive((flags & O_EXCL) != 0);
  req.set_flags(static_cast<uint32_t>(flags));  // checked (and O_TRUNC done) on an existing file
  mds::EntryReply resp;
  for (int attempt = 0;; ++attempt) {
    uint64_t sid = session_->id();
    req.set_session_id(sid);
    const auto sent = DirLeases::Clock::now();
    Status st = mds_->call<mds::MdsCreate>(req, &resp);
    if (st.ok()) {
      // A new name renews our lease on the parent; an opened one changes nothing.
      if (resp.created()) {
        leases_.added(parent, name, sid, /*renews=*/true, resp.parent_lease_ms(), sent);
      }
      break;
    }
    leases_.drop(parent);  // created or not: not known
    ahead_.name_changed(parent, name);
    // An unknown session fails a create before anything is created.
    if (attempt > 0 || !session_->renew_after(st, sid)) return st;
  }
  note_parent(resp);
  ahead_.name_changed(parent, name);  // new, or opened (and maybe truncated)
  // An existing file that came back was opened by the MDS with the
  // caller's rights for these flags, and truncated there for O_TRUNC,
  // exactly as open(2) without O_CREAT would be.
  Attr a = attr_from_proto(resp.attr());
  FileRef f = make_handle(a, resp.attr(), flags, c);
  if (attr_out != nullptr) *attr_out = inodes_.merge_local(a);
  return f;
}

}  // namespace surge::client

namespace surge {

Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  SURGE_ASSIGN_OR_RETURN(auto c, client::ClientImpl::Create(options));
  return std::unique_ptr<Client>(std::move(c));
}

}  // namespace surge
