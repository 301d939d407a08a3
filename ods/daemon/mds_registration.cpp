// MdsRegistration: register, heartbeat, register again (see the header).
#include "ods/daemon/mds_registration.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>

#include "common/log.h"
#include "net/address_list.h"
#include "net/proto/mds_methods.h"

namespace surge::ods {
namespace {
namespace pb = surge::proto::mds;
constexpr std::chrono::milliseconds kCallTimeout{3000};
}  // namespace

MdsRegistration::MdsRegistration(MdsRegistrationOptions options, ObjectStore& store,
                                 std::function<uint64_t()> load)
    : options_(std::move(options)),
      store_(store),
      load_(std::move(load)),
      channels_([&] {
        net::ChannelOptions o;
        o.cluster_key = options_.cluster_key;
        o.connect_timeout = kCallTimeout;
        o.call_timeout = kCallTimeout;
        return o;
      }()) {}

MdsRegistration::~MdsRegistration() { stop(); }

Status MdsRegistration::start() {
  std::ifstream in(id_path());
  if (in) {
    uint64_t id = 0;
    if (!(in >> id) || id == 0 || id > UINT32_MAX) {
      return Status::Corruption("data server target id file " + id_path() + " is unreadable");
    }
    target_id_ = static_cast<uint32_t>(id);
  }
  SURGE_ASSIGN_OR_RETURN(auto addresses, net::parse_address_list(options_.mds, "MDS address"));
  for (auto& a : addresses) peers_.push_back({std::move(a), false, std::thread()});
  for (Peer& p : peers_) {
    Status st = register_once(p);
    if (!st.ok()) {
      SLOG_WARN("cannot register with the MDS at {} yet ({}); serving anyway, retrying", p.address,
                st.ToString());
    }
  }
  for (Peer& p : peers_) p.thread = std::thread([this, &p] { run(p); });
  return Status::OK();
}

void MdsRegistration::stop() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (Peer& p : peers_) {
    if (p.thread.joinable()) p.thread.join();
  }
}

Status MdsRegistration::save_target_id(uint32_t id) {
  std::string tmp = id_path() + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(errno, "create " + tmp);
  std::string text = std::to_string(id) + "\n";
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  int err = errno;
  ::close(fd);
  if (!ok) return Status::FromErrno(err, "write " + tmp);
  if (::rename(tmp.c_str(), id_path().c_str()) != 0) return Status::FromErrno(errno, "rename " + tmp);
  int dfd = ::open(options_.data_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::OK();
}

Status MdsRegistration::register_once(Peer& peer) {
  const std::string& mds = peer.address;
  std::lock_guard turn(register_mu_);
  SURGE_ASSIGN_OR_RETURN(auto ch, channels_.get(mds));
  SURGE_ASSIGN_OR_RETURN(StoreStats s, store_.statfs());
  pb::RegisterTargetRequest req;
  req.set_target_id(target_id_.load());
  req.set_address(options_.advertise);
  req.set_capacity_bytes(s.capacity_bytes);
  req.set_free_bytes(s.free_bytes);
  req.set_filesystem_id(s.filesystem_id);
  pb::RegisterTargetReply resp;
  Status st = ch->call<pb::MdsRegisterTarget>(req, &resp);
  if (!st.ok()) {
    if (!ch->connected()) channels_.drop(mds);
    return st.WithContext("register with the MDS at " + mds);
  }
  if (resp.target_id() == 0)
    return Status::ProtocolError("MDS at " + mds + " assigned target id 0");
  if (resp.target_id() != target_id_.load()) {
    if (target_id_.load() != 0) {
      SLOG_WARN("MDS at {} gave target id {} to the data server that was target {}", mds,
                resp.target_id(), target_id_.load());
    }
    SURGE_RETURN_IF_ERROR(save_target_id(resp.target_id()));
    target_id_ = resp.target_id();
  }
  interval_ms_ = options_.heartbeat_interval_ms != 0   ? options_.heartbeat_interval_ms
                 : resp.heartbeat_interval_ms() != 0 ? resp.heartbeat_interval_ms()
                                                       : 1000;
  peer.registered = true;
  SLOG_INFO("registered with the MDS at {} as target {} ({}), heartbeat every {} ms", mds,
            target_id_.load(), options_.advertise, interval_ms_.load());
  return Status::OK();
}

Status MdsRegistration::heartbeat_once(Peer& peer) {
  SURGE_ASSIGN_OR_RETURN(auto ch, channels_.get(peer.address));
  SURGE_ASSIGN_OR_RETURN(StoreStats s, store_.statfs());
  pb::TargetHeartbeatRequest req;
  req.set_target_id(target_id_.load());
  req.set_address(options_.advertise);
  req.set_capacity_bytes(s.capacity_bytes);
  req.set_free_bytes(s.free_bytes);
  req.set_filesystem_id(s.filesystem_id);
  req.set_load(load_ ? load_() : 0);
  pb::TargetHeartbeatReply resp;
  Status st = ch->call<pb::MdsTargetHeartbeat>(req, &resp);
  if (!st.ok() && !ch->connected()) channels_.drop(peer.address);
  if (st.ok() && options_.on_map_version) options_.on_map_version(resp.map_version());
  return st;
}

void MdsRegistration::tend(Peer& peer) {
  if (!peer.registered) {
    Status st = register_once(peer);
    if (!st.ok()) SLOG_DEBUG("{}", st.ToString());
    return;
  }
  Status st = heartbeat_once(peer);
  if (st.code() == Code::kNotFound) {
    SLOG_INFO("MDS at {} does not know target {}: registering again", peer.address,
              target_id_.load());
    peer.registered = false;
    Status rs = register_once(peer);
    if (!rs.ok()) SLOG_WARN("{}", rs.ToString());
  } else if (!st.ok()) {
    // The MDS may be restarting; when it is back, register again (it may
    // have lost us) rather than assume it remembers.
    SLOG_WARN("heartbeat to the MDS at {} failed: {}; will register again", peer.address,
              st.ToString());
    peer.registered = false;
  }
}

void MdsRegistration::run(Peer& peer) {
  std::unique_lock lk(mu_);
  while (!stopping_) {
    const uint32_t interval = interval_ms_.load();
    const uint32_t wait_ms = peer.registered ? interval : std::min(interval, options_.retry_ms);
    cv_.wait_for(lk, std::chrono::milliseconds(wait_ms), [&] { return stopping_; });
    if (stopping_) break;
    lk.unlock();
    tend(peer);
    lk.lock();
  }
}

}  // namespace surge::ods
