#include "client/lib/client_impl.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "common/log.h"
#include "net/cluster_key.h"

namespace surge::client {

namespace mds = proto::mds;

// ---- conversions -------------------------------------------------------------

namespace {

TimeSpec ts_from_ns(uint64_t ns) {
  return TimeSpec{static_cast<int64_t>(ns / 1000000000ull), static_cast<uint32_t>(ns % 1000000000ull)};
}
uint64_t ns_from_ts(const TimeSpec& t) {
  return static_cast<uint64_t>(t.sec) * 1000000000ull + t.nsec;
}

std::string default_client_name() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + ":" + std::to_string(getpid());
}

}  // namespace

Attr attr_from_proto(const mds::Attr& a) {
  Attr r;
  r.ino = a.ino();
  r.mode = a.mode();
  r.nlink = a.nlink();
  r.uid = a.uid();
  r.gid = a.gid();
  r.size = a.size();
  r.rdev = a.rdev();
  r.atime = ts_from_ns(a.atime_ns());
  r.mtime = ts_from_ns(a.mtime_ns());
  r.ctime = ts_from_ns(a.ctime_ns());
  r.generation = a.generation();
  return r;
}

StripeLayout layout_from_proto(const mds::Layout& l) {
  StripeLayout r;
  r.stripe_size = l.stripe_size();
  r.stripe_count = l.stripe_count();
  r.targets.assign(l.targets().begin(), l.targets().end());
  return r;
}

mds::Credentials cred_to_proto(const Caller& c) {
  mds::Credentials p;
  p.set_uid(c.uid);
  p.set_gid(c.gid);
  for (uint32_t g : c.groups) p.add_groups(g);
  return p;
}

// ---- file handles -------------------------------------------------------------

FileImpl::~FileImpl() {
  if (!closed.load() && owner != nullptr) {
    Status st = owner->close_handle(*this);
    if (!st.ok()) SLOG_WARN("client: implicit close of inode {}: {}", state->ino, st.ToString());
  }
}

namespace {

class PoolRegisteredBuffer : public RegisteredBuffer {
 public:
  explicit PoolRegisteredBuffer(net::PoolBuffer b, size_t size) : buf_(std::move(b)), size_(size) {}
  std::byte* data() override { return buf_.data(); }
  size_t size() const override { return size_; }

 private:
  net::PoolBuffer buf_;
  size_t size_;
};

// Larger than the pool's biggest class: plain page-aligned memory, which the
// transport bounces through its pool over RDMA.
class HeapRegisteredBuffer : public RegisteredBuffer {
 public:
  explicit HeapRegisteredBuffer(size_t size) : size_(size) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, size) != 0) p = nullptr;
    data_ = static_cast<std::byte*>(p);
  }
  ~HeapRegisteredBuffer() override { free(data_); }
  std::byte* data() override { return data_; }
  size_t size() const override { return size_; }
  bool ok() const { return data_ != nullptr; }

 private:
  std::byte* data_ = nullptr;
  size_t size_;
};

}  // namespace

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
  mds_ = std::make_unique<MdsLink>(options_.mds_address, co, options_.mds_timeout);

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
  io_ = std::make_unique<StripeIo>(
      map_.get(), ods_channels_.get(),
      StripeIo::Options{options_.io_timeout, options_.max_inflight_bytes});

  SURGE_RETURN_IF_ERROR(reopen_session());
  SURGE_RETURN_IF_ERROR(map_->refresh());
  bg_ = std::thread([this] { background_loop(); });
  SLOG_DEBUG("client: connected to MDS at {} (session {}, map version {})", options_.mds_address,
            session(), map_->version());
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
  std::vector<std::shared_ptr<InodeState>> open;
  {
    std::lock_guard lk(inodes_mu_);
    for (auto& [ino, st] : inodes_) open.push_back(st);
  }
  for (auto& st : open) (void)report_size(*st, false);
  if (session() != 0 && mds_) {
    mds::CloseSessionRequest req;
    req.set_session_id(session());
    mds::CloseSessionReply resp;
    (void)mds_->call<mds::MdsCloseSession>(req, &resp);
  }
}

Status ClientImpl::reopen_session() {
  mds::OpenSessionRequest req;
  req.set_client_name(options_.client_name);
  mds::OpenSessionReply resp;
  SURGE_RETURN_IF_ERROR_CTX(mds_->call<mds::MdsOpenSession>(req, &resp),
                            "opening a session with the MDS at " + options_.mds_address);
  session_id_ = resp.session_id();
  if (resp.heartbeat_interval_ms() > 0) {
    heartbeat_interval_ = std::chrono::milliseconds(resp.heartbeat_interval_ms());
  }
  // Re-record the opens this client holds (after an MDS restart).
  std::vector<std::shared_ptr<InodeState>> open;
  {
    std::lock_guard lk(inodes_mu_);
    for (auto& [ino, st] : inodes_) open.push_back(st);
  }
  for (auto& st : open) {
    mds::OpenRequest oreq;
    {
      std::lock_guard lk(st->mu);
      *oreq.mutable_cred() = cred_to_proto(st->last_caller);
      oreq.set_flags(static_cast<uint32_t>(st->last_flags & ~(O_TRUNC | O_CREAT | O_EXCL)));
    }
    oreq.set_session_id(session());
    oreq.set_ino(st->ino);
    mds::EntryReply oresp;
    Status s = mds_->call<mds::MdsOpen>(oreq, &oresp);
    if (!s.ok()) SLOG_WARN("client: re-recording open of inode {}: {}", st->ino, s.ToString());
  }
  return Status::OK();
}

bool ClientImpl::renew_session_after(const Status& failed, uint64_t used) {
  const std::string& m = failed.message();
  if (failed.code() != Code::kNotFound || m.rfind("session ", 0) != 0 ||
      m.find("unknown") == std::string::npos) {
    return false;
  }
  std::lock_guard lk(session_mu_);
  if (session() != used) return true;  // another thread renewed it already
  SLOG_WARN("client: MDS does not know session {} (restarted?); opening a new one", used);
  Status st = reopen_session();
  if (!st.ok()) SLOG_WARN("client: {}", st.ToString());
  return st.ok();
}

void ClientImpl::background_loop() {
  auto next_heartbeat = std::chrono::steady_clock::now() + heartbeat_interval_;
  auto tick = std::min(options_.size_report_interval, heartbeat_interval_);
  if (tick.count() <= 0) tick = std::chrono::milliseconds(1000);
  std::unique_lock lk(bg_mu_);
  while (!stopping_) {
    bg_cv_.wait_for(lk, tick, [this] { return stopping_; });
    if (stopping_) break;
    lk.unlock();
    // Sizes of files being written, so other clients see them grow.
    std::vector<std::shared_ptr<InodeState>> open;
    {
      std::lock_guard ilk(inodes_mu_);
      for (auto& [ino, st] : inodes_) open.push_back(st);
    }
    for (auto& st : open) {
      Status s = report_size(*st, false);
      if (!s.ok()) SLOG_WARN("client: periodic size report of inode {}: {}", st->ino, s.ToString());
    }
    if (std::chrono::steady_clock::now() >= next_heartbeat) {
      next_heartbeat = std::chrono::steady_clock::now() + heartbeat_interval_;
      mds::SessionHeartbeatRequest req;
      req.set_session_id(session());
      mds::SessionHeartbeatReply resp;
      Status s = mds_->call<mds::MdsSessionHeartbeat>(req, &resp);
      if (s.ok()) {
        map_->note_version(resp.map_version());
      } else if (s.code() == Code::kNotFound) {
        (void)renew_session_after(s, req.session_id());
        map_->mark_stale();
      } else {
        SLOG_WARN("client: session heartbeat: {}", s.ToString());
      }
    }
    lk.lock();
  }
}

// ---- namespace -------------------------------------------------------------------

Attr ClientImpl::merge_local(Attr a) {
  std::shared_ptr<InodeState> st;
  {
    std::lock_guard lk(inodes_mu_);
    auto it = inodes_.find(a.ino);
    if (it == inodes_.end()) return a;
    st = it->second;
  }
  std::lock_guard lk(st->mu);
  st->mds_size = a.size;
  if (st->written_end > a.size) a.size = st->written_end;
  return a;
}

Result<Attr> ClientImpl::lookup(Ino parent, std::string_view name, const Caller& c) {
  mds::LookupRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_parent(parent);
  req.set_name(std::string(name));
  mds::EntryReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsLookup>(req, &resp));
  return merge_local(attr_from_proto(resp.attr()));
}

Result<Attr> ClientImpl::getattr(Ino ino, const Caller& c) {
  mds::GetAttrRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(ino);
  mds::EntryReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsGetAttr>(req, &resp));
  return merge_local(attr_from_proto(resp.attr()));
}

Status ClientImpl::access(Ino ino, uint32_t mask, const Caller& c) {
  mds::AccessRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(ino);
  req.set_mask(mask);
  mds::AccessReply resp;
  return mds_->call<mds::MdsAccess>(req, &resp);
}

Result<Attr> ClientImpl::setattr(Ino ino, const SetAttr& sa, const Caller& c) {
  std::shared_ptr<InodeState> st;
  {
    std::lock_guard lk(inodes_mu_);
    auto it = inodes_.find(ino);
    if (it != inodes_.end()) st = it->second;
  }
  // Our own unreported writes first, so a truncate or a time set is ordered
  // after them, and no report of this inode runs until the change is done: a
  // report arriving later would grow a truncated file back or move the
  // times a utimens just set (tar -x, cp -p) to the time of the report.
  std::unique_lock<std::mutex> size_lock;
  if (st) {
    size_lock = std::unique_lock(st->size_mu);
    SURGE_RETURN_IF_ERROR(report_size_locked(*st, false));
  }
  if (st) drain_writes(*st);
  if (st) st->data_gen.fetch_add(1, std::memory_order_acq_rel);
  mds::SetAttrRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(ino);
  uint32_t v = 0;
  if (sa.mask & kSetMode) v |= mds::SETATTR_MODE;
  if (sa.mask & kSetUid) v |= mds::SETATTR_UID;
  if (sa.mask & kSetGid) v |= mds::SETATTR_GID;
  if (sa.mask & kSetSize) v |= mds::SETATTR_SIZE;
  if (sa.mask & kSetAtime) v |= mds::SETATTR_ATIME;
  if (sa.mask & kSetMtime) v |= mds::SETATTR_MTIME;
  if (sa.mask & kSetCtime) v |= mds::SETATTR_CTIME;
  if (sa.mask & kSetAtimeNow) v |= mds::SETATTR_ATIME_NOW;
  if (sa.mask & kSetMtimeNow) v |= mds::SETATTR_MTIME_NOW;
  req.set_valid(v);
  req.set_mode(sa.mode & 07777);
  req.set_uid(sa.uid);
  req.set_gid(sa.gid);
  req.set_size(sa.size);
  req.set_atime_ns(ns_from_ts(sa.atime));
  req.set_mtime_ns(ns_from_ts(sa.mtime));
  req.set_ctime_ns(ns_from_ts(sa.ctime));
  mds::EntryReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsSetAttr>(req, &resp));
  if (st && (sa.mask & kSetSize)) {
    std::lock_guard lk(st->mu);
    st->mds_size = resp.attr().size();
    st->written_end = std::min(st->written_end, sa.size);
    st->reported_end = std::min(st->reported_end, sa.size);
    st->data_gen.fetch_add(1, std::memory_order_acq_rel);  // and what was read meanwhile
  }
  return merge_local(attr_from_proto(resp.attr()));
}

Result<Attr> ClientImpl::mkdir(Ino parent, std::string_view name, uint32_t mode,
                               const Caller& c) {
  mds::MkdirRequest req;
  req.set_op_id(next_op_id());  // a resend after a lost reply is not EEXIST
  *req.mutable_cred() = cred_to_proto(c);
  req.set_parent(parent);
  req.set_name(std::string(name));
  req.set_mode(mode);
  mds::EntryReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsMkdir>(req, &resp));
  return attr_from_proto(resp.attr());
}

Result<Attr> ClientImpl::mknod(Ino parent, std::string_view name, uint32_t mode, uint64_t rdev,
                               const Caller& c) {
  mds::MknodRequest req;
  req.set_op_id(next_op_id());  // a resend after a lost reply is not EEXIST
  *req.mutable_cred() = cred_to_proto(c);
  req.set_parent(parent);
  req.set_name(std::string(name));
  req.set_mode(mode);
  req.set_rdev(rdev);
  mds::EntryReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsMknod>(req, &resp));
  return attr_from_proto(resp.attr());
}

Result<Attr> ClientImpl::symlink(Ino parent, std::string_view name, std::string_view target,
                                 const Caller& c) {
  mds::SymlinkRequest req;
  req.set_op_id(next_op_id());  // a resend after a lost reply is not EEXIST
  *req.mutable_cred() = cred_to_proto(c);
  req.set_parent(parent);
  req.set_name(std::string(name));
  req.set_target(std::string(target));
  mds::EntryReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsSymlink>(req, &resp));
  return attr_from_proto(resp.attr());
}

Result<std::string> ClientImpl::readlink(Ino ino) {
  mds::ReadlinkRequest req;
  *req.mutable_cred() = cred_to_proto(Caller{});
  req.set_ino(ino);
  mds::ReadlinkReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsReadlink>(req, &resp));
  return resp.target();
}

Result<Attr> ClientImpl::link(Ino ino, Ino new_parent, std::string_view new_name,
                              const Caller& c) {
  mds::LinkRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(ino);
  req.set_new_parent(new_parent);
  req.set_new_name(std::string(new_name));
  req.set_op_id(next_op_id());  // a resend after a lost reply is not EEXIST
  mds::EntryReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsLink>(req, &resp));
  return merge_local(attr_from_proto(resp.attr()));
}

Status ClientImpl::unlink(Ino parent, std::string_view name, const Caller& c) {
  mds::UnlinkRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_parent(parent);
  req.set_name(std::string(name));
  req.set_op_id(next_op_id());  // a resend after a lost reply is not ENOENT
  mds::UnlinkReply resp;
  return mds_->call<mds::MdsUnlink>(req, &resp);
}

Status ClientImpl::rmdir(Ino parent, std::string_view name, const Caller& c) {
  mds::UnlinkRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_parent(parent);
  req.set_name(std::string(name));
  req.set_op_id(next_op_id());  // a resend after a lost reply is not ENOENT
  mds::UnlinkReply resp;
  return mds_->call<mds::MdsRmdir>(req, &resp);
}

Status ClientImpl::rename(Ino parent, std::string_view name, Ino new_parent,
                          std::string_view new_name, uint32_t flags, const Caller& c) {
  mds::RenameRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_old_parent(parent);
  req.set_old_name(std::string(name));
  req.set_new_parent(new_parent);
  req.set_new_name(std::string(new_name));
  req.set_flags(flags);
  req.set_op_id(next_op_id());  // a resend after a lost reply is not ENOENT
  mds::RenameReply resp;
  return mds_->call<mds::MdsRename>(req, &resp);
}

Result<DirPage> ClientImpl::readdir(Ino dir, uint64_t cookie, size_t max_entries,
                                    const Caller& c) {
  mds::ReadDirRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(dir);
  req.set_cookie(cookie);
  req.set_max_entries(static_cast<uint32_t>(max_entries));
  req.set_plus(true);
  mds::ReadDirReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsReadDir>(req, &resp));
  DirPage page;
  page.eof = resp.eof();
  page.entries.reserve(resp.entries_size());
  for (const auto& e : resp.entries()) {
    DirEntry d;
    d.name = e.name();
    d.cookie = e.cookie();
    if (e.has_attr()) {
      d.attr = merge_local(attr_from_proto(e.attr()));
    } else {
      d.attr.ino = e.ino();
      d.attr.mode = e.type();
    }
    page.entries.push_back(std::move(d));
  }
  return page;
}

Result<std::string> ClientImpl::getxattr(Ino ino, std::string_view name, const Caller& c) {
  mds::GetXattrRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(ino);
  req.set_name(std::string(name));
  req.set_size(1u << 20);  // larger than any value (64 KiB limit)
  mds::GetXattrReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsGetXattr>(req, &resp));
  return resp.value();
}

Status ClientImpl::setxattr(Ino ino, std::string_view name, std::string_view value,
                            uint32_t flags, const Caller& c) {
  mds::SetXattrRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(ino);
  req.set_name(std::string(name));
  req.set_value(std::string(value));
  req.set_flags(flags);
  mds::SetXattrReply resp;
  return mds_->call<mds::MdsSetXattr>(req, &resp);
}

Result<std::vector<std::string>> ClientImpl::listxattr(Ino ino, const Caller& c) {
  mds::ListXattrRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(ino);
  req.set_size(1u << 24);
  mds::ListXattrReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsListXattr>(req, &resp));
  return std::vector<std::string>(resp.names().begin(), resp.names().end());
}

Status ClientImpl::removexattr(Ino ino, std::string_view name, const Caller& c) {
  mds::RemoveXattrRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(ino);
  req.set_name(std::string(name));
  mds::RemoveXattrReply resp;
  return mds_->call<mds::MdsRemoveXattr>(req, &resp);
}

Result<FsStat> ClientImpl::statfs() {
  mds::StatFsRequest req;
  *req.mutable_cred() = cred_to_proto(Caller{});
  mds::StatFsReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsStatFs>(req, &resp));
  FsStat s;
  s.block_size = resp.block_size() ? resp.block_size() : 4096;
  s.total_bytes = resp.capacity_bytes();
  s.free_bytes = resp.free_bytes();
  s.total_inodes = resp.inodes_used() + resp.inodes_free();
  s.free_inodes = resp.inodes_free();
  s.max_name = resp.name_max() ? resp.name_max() : 255;
  return s;
}

Result<ClusterStatus> ClientImpl::cluster_status() {
  SURGE_RETURN_IF_ERROR(map_->refresh());
  mds::ClusterMap m = map_->snapshot();
  ClusterStatus cs;
  cs.map_version = m.version();
  cs.fs_id = m.fs_id();
  cs.mds_address = options_.mds_address;
  for (const auto& t : m.targets()) {
    TargetStatus ts;
    ts.id = t.target_id();
    ts.address = t.address();
    switch (t.state()) {
      case mds::TARGET_UP: ts.state = "up"; break;
      case mds::TARGET_DOWN: ts.state = "down"; break;
      case mds::TARGET_DRAINING: ts.state = "draining"; break;
      default: ts.state = "unknown"; break;
    }
    ts.capacity_bytes = t.capacity_bytes();
    ts.free_bytes = t.free_bytes();
    ts.last_heartbeat_ms = t.last_heartbeat_ms();
    cs.targets.push_back(std::move(ts));
  }
  return cs;
}

Result<StripeLayout> ClientImpl::get_layout(Ino ino, const Caller& c) {
  mds::GetLayoutRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(ino);
  mds::GetLayoutReply resp;
  SURGE_RETURN_IF_ERROR(mds_->call<mds::MdsGetLayout>(req, &resp));
  return layout_from_proto(resp.layout());
}

Status ClientImpl::set_dir_layout(Ino dir, uint32_t stripe_size, uint32_t stripe_count,
                                  const Caller& c) {
  mds::SetLayoutRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(dir);
  req.mutable_layout()->set_stripe_size(stripe_size);
  req.mutable_layout()->set_stripe_count(stripe_count);
  mds::SetLayoutReply resp;
  return mds_->call<mds::MdsSetLayout>(req, &resp);
}

// ---- open files -----------------------------------------------------------------

std::shared_ptr<InodeState> ClientImpl::attach(const Attr& a, const mds::Attr& pa, int flags,
                                               const Caller& c) {
  std::shared_ptr<InodeState> st;
  {
    std::lock_guard lk(inodes_mu_);
    auto& slot = inodes_[a.ino];
    if (!slot) {
      slot = std::make_shared<InodeState>();
      slot->ino = a.ino;
    }
    st = slot;
    // Counted while inodes_mu_ is held: a last close of another handle
    // (surge-fuse's release is asynchronous, so it can meet this open)
    // drops the state from the map only when it has no opens, and must not
    // drop it between our finding it and counting this open.
    std::lock_guard slk(st->mu);
    st->opens++;
  }
  std::lock_guard lk(st->mu);
  st->layout = layout_from_proto(pa.layout());
  st->mds_size = a.size;
  if (flags & O_TRUNC) {
    st->written_end = 0;
    st->reported_end = 0;
  }
  st->last_caller = c;
  st->last_flags = flags;
  return st;
}

Result<FileRef> ClientImpl::open(Ino ino, int flags, const Caller& c, Attr* attr_out) {
  mds::OpenRequest req;
  *req.mutable_cred() = cred_to_proto(c);
  req.set_ino(ino);
  req.set_flags(static_cast<uint32_t>(flags));
  mds::EntryReply resp;
  for (int attempt = 0;; ++attempt) {
    uint64_t sid = session();
    req.set_session_id(sid);
    Status st = mds_->call<mds::MdsOpen>(req, &resp);
    if (st.ok()) break;
    if (attempt > 0 || !renew_session_after(st, sid)) return st;
  }
  Attr a = attr_from_proto(resp.attr());
  auto f = std::make_shared<FileImpl>(attach(a, resp.attr(), flags, c), flags, c,
                                      options_.read_ahead_bytes);
  f->owner = this;
  if (attr_out != nullptr) *attr_out = a;
  return FileRef(f);
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
  mds::EntryReply resp;
  for (int attempt = 0;; ++attempt) {
    uint64_t sid = session();
    req.set_session_id(sid);
    Status st = mds_->call<mds::MdsCreate>(req, &resp);
    if (st.ok()) break;
    // An unknown session fails a create before anything is created.
    if (attempt > 0 || !renew_session_after(st, sid)) return st;
  }
  Attr a = attr_from_proto(resp.attr());
  if (!resp.created()) {
    // An existing file came back: it is opened with the caller's rights,
    // exactly as open(2) without O_CREAT would be.
    uint32_t mask = 0;
    int acc = flags & O_ACCMODE;
    if (acc == O_RDONLY || acc == O_RDWR) mask |= R_OK;
    if (acc == O_WRONLY || acc == O_RDWR || (flags & O_TRUNC)) mask |= W_OK;
    Status ok = access(a.ino, mask, c);
    if (!ok.ok()) {
      mds::CloseRequest creq;
      creq.set_session_id(session());
      creq.set_ino(a.ino);
      mds::CloseReply cresp;
      (void)mds_->call<mds::MdsClose>(creq, &cresp);
      return ok;
    }
  }
  if (!resp.created() && (flags & O_TRUNC) && a.size > 0) {
    // An existing file opened with O_CREAT|O_TRUNC: truncate it now.
    SetAttr sa;
    sa.mask = kSetSize;
    sa.size = 0;
    auto t = setattr(a.ino, sa, c);
    if (!t.ok()) {
      mds::CloseRequest creq;
      creq.set_session_id(session());
      creq.set_ino(a.ino);
      mds::CloseReply cresp;
      (void)mds_->call<mds::MdsClose>(creq, &cresp);
      return t.status();
    }
    a.size = 0;
  }
  auto f = std::make_shared<FileImpl>(attach(a, resp.attr(), flags, c), flags, c,
                                      options_.read_ahead_bytes);
  f->owner = this;
  if (attr_out != nullptr) *attr_out = merge_local(a);
  return FileRef(f);
}

void ClientImpl::retire_oldest_locked(InodeState& st, std::unique_lock<std::mutex>& wl) {
  // The oldest may still be being sent by its writer (wb_mu released).
  st.wb_cv.wait(wl, [&] { return st.inflight.empty() || st.inflight.front().batch != nullptr; });
  if (st.inflight.empty()) return;  // another thread retired it meanwhile
  InodeState::PendingWrite w = std::move(st.inflight.front());
  st.inflight.pop_front();
  st.inflight_bytes -= w.length;
  Status s = w.batch->wait();
  // Read ahead fetched while these bytes travelled may hold the old ones.
  st.data_gen.fetch_add(1, std::memory_order_acq_rel);
  if (!s.ok()) {
    std::lock_guard lk(st.mu);
    if (st.write_error.ok()) st.write_error = s;
  }
}

void ClientImpl::drain_writes(InodeState& st) {
  std::unique_lock wl(st.wb_mu);
  while (!st.inflight.empty()) retire_oldest_locked(st, wl);
}

Status ClientImpl::take_write_error(InodeState& st) {
  std::lock_guard lk(st.mu);
  Status e = st.write_error;
  st.write_error = Status::OK();
  return e;
}

Status ClientImpl::report_size(InodeState& st, bool force) {
  std::lock_guard sl(st.size_mu);
  return report_size_locked(st, force);
}

Status ClientImpl::report_size_locked(InodeState& st, bool force) {
  // Only bytes the data servers hold are reported.
  drain_writes(st);
  uint64_t end;
  {
    std::lock_guard lk(st.mu);
    if (!st.dirty && !force) return Status::OK();
    end = st.written_end;
    st.dirty = false;
  }
  mds::ReportSizeRequest req;
  *req.mutable_cred() = cred_to_proto(Caller{});
  req.set_ino(st.ino);
  req.set_end(end);
  req.set_mtime_ns(0);
  mds::EntryReply resp;
  Status s = mds_->call<mds::MdsReportSize>(req, &resp);
  std::lock_guard lk(st.mu);
  if (!s.ok()) {
    st.dirty = true;  // try again next time
    return s.WithContext("reporting the size of inode " + std::to_string(st.ino));
  }
  st.reported_end = std::max(st.reported_end, end);
  st.mds_size = resp.attr().size();
  return Status::OK();
}

Result<size_t> ClientImpl::pread(File& file, void* buf, size_t len, uint64_t offset) {
  // What is not in read-ahead windows is read straight into buf (the piece
  // handed over then lies there already); the windows' pieces are copied.
  auto* dst = static_cast<std::byte*>(buf);
  std::byte* at = dst;
  return read_impl(static_cast<FileImpl&>(file), len, offset, dst,
                   [&at](std::span<const iovec> pieces) {
                     for (const iovec& p : pieces) {
                       if (p.iov_base != at) std::memcpy(at, p.iov_base, p.iov_len);
                       at += p.iov_len;
                     }
                   });
}

Result<size_t> ClientImpl::pread_to(File& file, size_t len, uint64_t offset,
                                    const ReadSink& sink) {
  return read_impl(static_cast<FileImpl&>(file), len, offset, nullptr, sink);
}

std::pair<uint64_t, StripeLayout> ClientImpl::read_extent(FileImpl& f) {
  std::lock_guard lk(f.state->mu);
  return {std::max(f.state->mds_size, f.state->written_end), f.state->layout};
}

Result<size_t> ClientImpl::read_impl(FileImpl& f, size_t len, uint64_t offset, std::byte* dst,
                                     const ReadSink& sink) {
  if ((f.flags() & O_ACCMODE) == O_WRONLY) {
    return Status(Code::kBadFile, "inode " + std::to_string(f.ino()) + " is open write-only");
  }
  auto [size, layout] = read_extent(f);
  if (offset >= size || len == 0) {
    sink({});
    return size_t{0};
  }
  drain_writes(*f.state);  // our own writes in flight first
  size_t n = static_cast<size_t>(std::min<uint64_t>(len, size - offset));
  if (size_t ra = f.read_ahead.load(std::memory_order_relaxed); ra > 0) {
    SURGE_RETURN_IF_ERROR(read_with_read_ahead(f, layout, size, ra, n, offset, dst, sink));
    return n;
  }
  std::unique_ptr<RegisteredBuffer> own;
  if (dst == nullptr) {
    SURGE_ASSIGN_OR_RETURN(own, register_buffer(n));
    dst = own->data();
  }
  SURGE_RETURN_IF_ERROR(io_->read(f.ino(), layout, dst, n, offset));
  const iovec piece{dst, n};
  sink({&piece, 1});
  return n;
}

void ClientImpl::set_read_ahead(File& file, size_t bytes) {
  static_cast<FileImpl&>(file).read_ahead.store(bytes, std::memory_order_relaxed);
}

void ClientImpl::drop_read_ahead(FileImpl& f) {
  std::lock_guard lk(f.ra_mu);
  f.ra_windows.clear();  // each waits for its batch before its buffer goes
}

Status ClientImpl::read_with_read_ahead(FileImpl& f, const StripeLayout& layout, uint64_t size,
                                        size_t read_ahead, size_t n, uint64_t offset,
                                        std::byte* dst, const ReadSink& sink) {
  constexpr uint64_t kWindow = 1u << 20;
  InodeState& st = *f.state;
  std::lock_guard lk(f.ra_mu);
  if (const uint64_t gen = st.data_gen.load(std::memory_order_acquire); gen != f.ra_gen) {
    f.ra_windows.clear();  // fetched before a write or truncate of this client
    f.ra_gen = gen;
  }
  const bool sequential = offset == f.ra_next;
  f.ra_next = offset + n;
  if (!f.ra_windows.empty() && (offset < f.ra_windows.front().offset ||
                                offset >= f.ra_windows.front().offset +
                                              f.ra_windows.front().length)) {
    f.ra_windows.clear();  // not where this read is: a jump
  }
  // The pieces point into the windows, which therefore stay until sink has
  // run: only then are the ones used up (or failed) dropped.
  std::vector<iovec> pieces;
  uint64_t pos = offset;
  size_t done = 0, used_up = 0;
  bool failed = false;
  for (size_t i = 0; done < n && i < f.ra_windows.size(); ++i) {
    FileImpl::Window& w = f.ra_windows[i];  // contiguous: w.offset == pos
    if (!w.landed) {
      w.status = w.batch->wait();
      w.landed = true;
    }
    if (!w.status.ok()) {
      failed = true;  // read it again directly below: a lasting error is reported from there
      break;
    }
    size_t k = static_cast<size_t>(std::min<uint64_t>(n - done, w.offset + w.length - pos));
    pieces.push_back({w.buf.data() + (pos - w.offset), k});
    done += k;
    pos += k;
    if (pos == w.offset + w.length) used_up = i + 1;
  }
  std::unique_ptr<RegisteredBuffer> rest;
  if (done < n) {
    std::byte* into = dst != nullptr ? dst + done : nullptr;
    if (into == nullptr) {
      SURGE_ASSIGN_OR_RETURN(rest, register_buffer(n - done));
      into = rest->data();
    }
    SURGE_RETURN_IF_ERROR(io_->read(st.ino, layout, into, n - done, pos));
    pieces.push_back({into, n - done});
  }
  sink(pieces);
  if (failed) {
    f.ra_windows.clear();
  } else {
    f.ra_windows.erase(f.ra_windows.begin(),
                       f.ra_windows.begin() + static_cast<std::ptrdiff_t>(used_up));
  }
  if (!sequential) return Status::OK();
  uint64_t from = f.ra_windows.empty()
                      ? offset + n
                      : f.ra_windows.back().offset + f.ra_windows.back().length;
  const uint64_t until = std::min(size, offset + n + read_ahead);
  while (from < until) {
    const uint64_t end = std::min(until, (from / kWindow + 1) * kWindow);
    auto pb = pool_->try_acquire(end - from);
    if (!pb.ok()) break;  // the pool is busy (write behind): read ahead less
    FileImpl::Window w;
    w.offset = from;
    w.length = end - from;
    w.buf = std::move(*pb);
    w.batch = io_->start_read(st.ino, layout, w.buf.data(), w.length, from);
    f.ra_windows.push_back(std::move(w));
    from = end;
  }
  return Status::OK();
}

Result<size_t> ClientImpl::pwrite(File& file, const void* buf, size_t len, uint64_t offset) {
  return write_impl(file, static_cast<const std::byte*>(buf), len, offset, nullptr, nullptr);
}

Result<size_t> ClientImpl::pwrite_from(File& file, std::unique_ptr<RegisteredBuffer> buf,
                                       const std::byte* data, size_t len, uint64_t offset,
                                       const std::function<void()>& on_accepted) {
  if (!buf || data < buf->data() || len > buf->size() ||
      static_cast<size_t>(data - buf->data()) > buf->size() - len) {
    return Status::InvalidArgument("pwrite_from: the data does not lie inside the buffer given");
  }
  return write_impl(file, data, len, offset, &buf, &on_accepted);
}

Result<size_t> ClientImpl::write_impl(File& file, const std::byte* buf, size_t len,
                                      uint64_t offset, std::unique_ptr<RegisteredBuffer>* owned,
                                      const std::function<void()>* on_accepted) {
  auto& f = static_cast<FileImpl&>(file);
  if ((f.flags() & O_ACCMODE) == O_RDONLY) {
    return Status(Code::kBadFile, "inode " + std::to_string(f.ino()) + " is open read-only");
  }
  auto accepted = [&] {
    if (on_accepted != nullptr && *on_accepted) (*on_accepted)();
  };
  if (len == 0) {
    accepted();
    return size_t{0};
  }
  InodeState& st = *f.state;
  SURGE_RETURN_IF_ERROR(take_write_error(st));  // an earlier write-behind failure
  st.data_gen.fetch_add(1, std::memory_order_acq_rel);  // every handle's windows may be stale
  if (f.flags() & O_APPEND) {
    drain_writes(st);
    SURGE_RETURN_IF_ERROR(take_write_error(st));
    SURGE_ASSIGN_OR_RETURN(Attr a, getattr(f.ino(), f.caller));
    offset = a.size;
  }
  StripeLayout layout;
  {
    std::lock_guard lk(st.mu);
    layout = st.layout;
  }
  auto note_written = [&] {
    std::lock_guard lk(st.mu);
    st.written_end = std::max(st.written_end, offset + len);
    st.dirty = true;
  };
  const size_t limit = options_.write_behind_bytes;
  if (limit > 0 && len <= limit) {
    std::unique_lock wl(st.wb_mu);
    auto overlaps = [&] {
      for (const auto& w : st.inflight) {
        if (offset < w.offset + w.length && w.offset < offset + len) return true;
      }
      return false;
    };
    while (!st.inflight.empty() && (st.inflight_bytes + len > limit || overlaps())) {
      retire_oldest_locked(st, wl);
    }
    InodeState::PendingWrite w;
    w.offset = offset;
    w.length = len;
    const std::byte* src = nullptr;  // what the data servers read, kept until done
    if (owned != nullptr) {
      w.owned = std::move(*owned);
      src = buf;
    } else if (len <= pool_->max_buffer_size()) {
      auto pb = pool_->try_acquire(len);
      if (pb.ok()) {
        w.pool_copy = std::move(*pb);
        std::memcpy(w.pool_copy.data(), buf, len);
        src = w.pool_copy.data();
      }
    } else {
      w.heap_copy.reset(new (std::nothrow) std::byte[len]);
      if (w.heap_copy) {
        std::memcpy(w.heap_copy.get(), buf, len);
        src = w.heap_copy.get();
      }
    }
    if (src != nullptr) {
      // Ordered now: the write is in the in-flight list before wb_mu is let
      // go, so no later overlapping write can pass it (it waits to retire
      // this one, which waits for the send below). The caller may
      // acknowledge before the bytes leave. References to deque elements
      // survive pushes and pops of others, and this one is popped only
      // after its batch is attached.
      st.inflight_bytes += len;
      InodeState::PendingWrite& mine = st.inflight.emplace_back(std::move(w));
      note_written();
      accepted();
      wl.unlock();
      std::unique_ptr<WriteBatch> batch = io_->start_write(f.ino(), layout, src, len, offset);
      wl.lock();
      mine.batch = std::move(batch);
      // Notified under the lock: once it is let go, a close waiting for this
      // batch may finish and free st (the caller was answered above, so the
      // kernel may already have released the file), and nothing of st may
      // be touched after that.
      st.wb_cv.notify_all();
      return len;
    }
    while (!st.inflight.empty()) retire_oldest_locked(st, wl);  // no memory: write through
  } else {
    drain_writes(st);
  }
  SURGE_RETURN_IF_ERROR(io_->write(f.ino(), layout, buf, len, offset));
  note_written();
  accepted();
  return len;
}

Status ClientImpl::fsync(File& file, bool data_only) {
  auto& f = static_cast<FileImpl&>(file);
  StripeLayout layout;
  {
    std::lock_guard lk(f.state->mu);
    layout = f.state->layout;
  }
  drain_writes(*f.state);
  SURGE_RETURN_IF_ERROR(take_write_error(*f.state));
  if (layout.stripe_count > 0) SURGE_RETURN_IF_ERROR(io_->sync(f.ino(), layout));
  return report_size(*f.state, false);
}

Status ClientImpl::flush(File& file) {
  auto& f = static_cast<FileImpl&>(file);
  drain_writes(*f.state);
  SURGE_RETURN_IF_ERROR(take_write_error(*f.state));
  return report_size(*f.state, false);
}

Status ClientImpl::close_handle(FileImpl& f) {
  if (f.closed.exchange(true)) return Status::OK();
  drain_writes(*f.state);
  Status first = take_write_error(*f.state);
  Status rs = report_size(*f.state, false);
  if (first.ok()) first = rs;
  bool last;
  {
    std::lock_guard lk(f.state->mu);
    last = --f.state->opens == 0;
  }
  drop_read_ahead(f);  // its pool buffers serve others now
  if (last) {
    std::lock_guard lk(inodes_mu_);
    auto it = inodes_.find(f.ino());
    if (it != inodes_.end() && it->second == f.state) {
      std::lock_guard slk(f.state->mu);
      if (f.state->opens == 0) inodes_.erase(it);
    }
  }
  mds::CloseRequest req;
  req.set_session_id(session());
  req.set_ino(f.ino());
  mds::CloseReply resp;
  Status s = mds_->call<mds::MdsClose>(req, &resp);
  // A session the MDS forgot holds no opens to release.
  if (!s.ok() && first.ok() && s.code() != Code::kNotFound) {
    first = s.WithContext("closing inode " + std::to_string(f.ino()));
  }
  return first;
}

Status ClientImpl::close(FileRef f) {
  if (!f) return Status::InvalidArgument("close of a null file");
  return close_handle(static_cast<FileImpl&>(*f));
}

Result<std::unique_ptr<RegisteredBuffer>> ClientImpl::try_pool_buffer(size_t size) {
  SURGE_ASSIGN_OR_RETURN(net::PoolBuffer b, pool_->try_acquire(size));
  return std::unique_ptr<RegisteredBuffer>(new PoolRegisteredBuffer(std::move(b), size));
}

Result<std::unique_ptr<RegisteredBuffer>> ClientImpl::register_buffer(size_t size) {
  // Never wait: write behind holds pool buffers for a while, and a reader
  // is better served by plain memory (bounced over RDMA) than by a stall.
  if (auto b = try_pool_buffer(size); b.ok()) return b;
  auto h = std::make_unique<HeapRegisteredBuffer>(size);
  if (!h->ok()) return Status::ResourceExhausted("cannot allocate a " + std::to_string(size) +
                                                 "-byte buffer");
  return std::unique_ptr<RegisteredBuffer>(std::move(h));
}

}  // namespace surge::client

namespace surge {

Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  SURGE_ASSIGN_OR_RETURN(auto c, client::ClientImpl::Create(options));
  return std::unique_ptr<Client>(std::move(c));
}

}  // namespace surge
