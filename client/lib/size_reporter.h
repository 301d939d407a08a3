// SizeReporter: tells the MDS the end of what this client wrote to an
// inode, which the MDS max-merges into the file size. Only bytes the data
// servers hold are reported (writes in flight are drained first). Reports
// happen on flush, fsync and close, and periodically (report_dirty) while a
// file is being written, so other clients see it grow. A report and a
// truncate of one inode never overlap at the MDS (InodeState::size_mu), so
// a report taken before a truncate cannot grow the file back after it.
#pragma once

#include <cstdint>
#include <optional>

#include "client/lib/inode_table.h"
#include "client/lib/mds_link.h"
#include "client/lib/open_file.h"
#include "client/lib/write_behind.h"
#include "common/status.h"

namespace surge::client {

class SizeReporter {
 public:
  SizeReporter(MdsLink* mds, WriteBehind* writes, InodeTable* inodes)
      : mds_(mds), writes_(writes), inodes_(inodes) {}

  // Reports st's end when it changed since the last report (or always, with
  // force).
  Status report(InodeState& st, bool force);
  // The same with st.size_mu already held (by a truncate).
  Status report_locked(InodeState& st, bool force);
  // Reports every open inode written since its last report; failures are
  // logged and retried next time.
  void report_dirty();

  // For a setattr that carries the report with it (SetAttrRequest
  // report_size, one MDS call and one sync where there were two): with
  // st.size_mu held, the end to report when there is one (writes in flight
  // drained, dirty cleared), else nullopt; then settle_locked with what the
  // MDS answered (a failure leaves the end to be reported again).
  std::optional<uint64_t> take_locked(InodeState& st);
  void settle_locked(InodeState& st, uint64_t end, bool ok, uint64_t mds_size);

 private:
  MdsLink* mds_;
  WriteBehind* writes_;
  InodeTable* inodes_;
};

}  // namespace surge::client
