#include "client/lib/size_reporter.h"

#include "client/lib/proto_convert.h"
#include "common/log.h"
#include "net/proto/mds_methods.h"

namespace surge::client {

namespace mds = proto::mds;

Status SizeReporter::report(InodeState& st, bool force) {
  std::lock_guard sl(st.size_mu);
  return report_locked(st, force);
}

Status SizeReporter::report_locked(InodeState& st, bool force) {
  writes_->drain(st);  // only bytes the data servers hold are reported
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

std::optional<uint64_t> SizeReporter::take_locked(InodeState& st) {
  writes_->drain(st);  // only bytes the data servers hold are reported
  std::lock_guard lk(st.mu);
  if (!st.dirty) return std::nullopt;
  st.dirty = false;
  return st.written_end;
}

void SizeReporter::settle_locked(InodeState& st, uint64_t end, bool ok, uint64_t mds_size) {
  std::lock_guard lk(st.mu);
  if (!ok) {
    st.dirty = true;  // try again next time
    return;
  }
  st.reported_end = std::max(st.reported_end, end);
  st.mds_size = mds_size;
}

void SizeReporter::report_dirty() {
  for (auto& st : inodes_->all()) {
    Status s = report(*st, false);
    if (!s.ok()) SLOG_WARN("client: periodic size report of inode {}: {}", st->ino, s.ToString());
  }
}

}  // namespace surge::client
