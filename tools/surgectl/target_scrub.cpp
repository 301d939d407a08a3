// scrub_target: see target_scrub.h.
#include "tools/surgectl/target_scrub.h"

#include "net/proto/ods_methods.h"
#include "net/rpc_channel.h"
#include "tools/surgectl/cluster_admin.h"

namespace surge::tools {

namespace {
constexpr uint32_t kFanoutDirs = 65536;  // ObjectStore::kFanoutDirs
constexpr uint32_t kSliceDirs = 4096;    // the most one OdsScrub takes
}  // namespace

TargetScrubResult scrub_target(const proto::mds::TargetInfo& target, const std::string& cluster_key,
                               std::chrono::milliseconds slice_timeout) {
  TargetScrubResult r;
  r.target_id = target.target_id();
  r.address = target.address();
  r.state = state_name(target.state());
  const std::string who = "target " + std::to_string(r.target_id) + " at " + r.address;
  net::ChannelOptions o;
  o.cluster_key = cluster_key;
  o.connect_timeout = std::chrono::milliseconds(5000);
  o.call_timeout = slice_timeout;
  auto ch = net::RpcChannel::Connect(r.address, o);
  if (!ch.ok()) {
    r.error = "cannot connect to " + who + ": " + ch.status().ToString();
    return r;
  }
  uint32_t first = 0;
  while (first < kFanoutDirs) {
    proto::ods::ScrubRequest req;
    req.set_first_dir(first);
    req.set_dir_count(kSliceDirs);
    proto::ods::ScrubReply resp;
    Status st = (*ch)->call<proto::ods::OdsScrub>(req, &resp);
    if (!st.ok()) {
      r.error = "scrub of " + who + " failed at directory " + std::to_string(first) + ": " +
                st.ToString();
      return r;
    }
    r.objects_checked += resp.objects_checked();
    r.bytes_checked += resp.bytes_checked();
    for (const auto& b : resp.bad_blocks()) {
      r.bad_blocks.push_back({b.object_id(), b.offset(), b.chunk().chain_id(), b.chunk().ino(),
                              b.chunk().slot(), b.chunk().position()});
    }
    if (resp.next_dir() <= first) {
      r.error = who + " answered a scrub of directory " + std::to_string(first) +
                " with next directory " + std::to_string(resp.next_dir()) +
                ": it would never finish";
      return r;
    }
    first = resp.next_dir();
  }
  r.scrubbed = true;
  return r;
}

}  // namespace surge::tools
