#include "client/lib/mds_session.h"

#include <fcntl.h>

#include "client/lib/proto_convert.h"
#include "common/log.h"
#include "net/proto/mds_methods.h"

namespace surge::client {

namespace mds = proto::mds;

Status MdsSession::open() {
  mds::OpenSessionRequest req;
  req.set_client_name(client_name_);
  mds::OpenSessionReply resp;
  SURGE_RETURN_IF_ERROR_CTX(mds_->call<mds::MdsOpenSession>(req, &resp),
                            "opening a session with the MDS at " + mds_->address());
  id_ = resp.session_id();
  if (resp.heartbeat_interval_ms() > 0) heartbeat_interval_ms_ = resp.heartbeat_interval_ms();
  setattr_reports_size_ = resp.setattr_reports_size();
  // Re-record the opens this client holds (after an MDS restart).
  for (auto& st : inodes_->all()) {
    mds::OpenRequest oreq;
    {
      std::lock_guard lk(st->mu);
      *oreq.mutable_cred() = cred_to_proto(st->last_caller);
      oreq.set_flags(static_cast<uint32_t>(st->last_flags & ~(O_TRUNC | O_CREAT | O_EXCL)));
    }
    oreq.set_session_id(id());
    oreq.set_ino(st->ino);
    mds::EntryReply oresp;
    Status s = mds_->call<mds::MdsOpen>(oreq, &oresp);
    if (!s.ok()) SLOG_WARN("client: re-recording open of inode {}: {}", st->ino, s.ToString());
  }
  return Status::OK();
}

bool MdsSession::renew_after(const Status& failed, uint64_t used) {
  const std::string& m = failed.message();
  if (failed.code() != Code::kNotFound || m.rfind("session ", 0) != 0 ||
      m.find("unknown") == std::string::npos) {
    return false;
  }
  std::lock_guard lk(renew_mu_);
  if (id() != used) return true;  // another thread renewed it already
  SLOG_WARN("client: MDS does not know session {} (restarted?); opening a new one", used);
  Status st = open();
  if (!st.ok()) SLOG_WARN("client: {}", st.ToString());
  return st.ok();
}

void MdsSession::heartbeat() {
  mds::SessionHeartbeatRequest req;
  req.set_session_id(id());
  mds::SessionHeartbeatReply resp;
  Status s = mds_->call<mds::MdsSessionHeartbeat>(req, &resp);
  if (s.ok()) {
    map_->note_version(resp.map_version());
  } else if (s.code() == Code::kNotFound) {
    (void)renew_after(s, req.session_id());
    map_->mark_stale();
  } else {
    SLOG_WARN("client: session heartbeat: {}", s.ToString());
  }
}

void MdsSession::close() {
  if (id() == 0) return;
  mds::CloseSessionRequest req;
  req.set_session_id(id());
  mds::CloseSessionReply resp;
  (void)mds_->call<mds::MdsCloseSession>(req, &resp);
}

}  // namespace surge::client
