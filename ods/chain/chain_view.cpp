#include "ods/chain/chain_view.h"

#include "common/log.h"
#include "net/address_list.h"
#include "net/proto/mds_methods.h"

namespace surge::ods {

namespace mds = proto::mds;

namespace {

std::string ref_name(const proto::ods::ChunkRef& ref, const char* op) {
  return std::string(op) + " of chunk {ino " + std::to_string(ref.ino()) + ", slot " +
         std::to_string(ref.slot()) + ", position " + std::to_string(ref.position()) +
         "} of chain " + std::to_string(ref.chain_id()) + " (version " +
         std::to_string(ref.chain_version()) + ")";
}

bool in_write_chain(mds::ChainMemberState s) {
  return s == mds::MEMBER_SERVING || s == mds::MEMBER_SYNCING;
}

}  // namespace

ChainView::ChainView(ChainViewOptions options, std::function<uint32_t()> own_id)
    : options_(std::move(options)), own_id_(std::move(own_id)), channels_([&] {
        net::ChannelOptions o;
        o.cluster_key = options_.cluster_key;
        o.connect_timeout = std::chrono::milliseconds(2000);
        o.call_timeout = std::chrono::milliseconds(5000);
        return o;
      }()) {
  if (!options_.mds.empty()) {
    auto list = net::parse_address_list(options_.mds, "MDS address");
    if (list.ok()) {
      mds_ = std::move(*list);
    } else {
      SLOG_ERROR("chain view: {}", list.status().ToString());
    }
  }
}

template <typename M>
Status ChainView::call_mds(const typename M::Request& req, typename M::Response* resp,
                           const std::string& what) {
  if (mds_.empty()) return Status::Unavailable("no MDS configured: " + what);
  const size_t first = current_mds_.load();
  std::string errors;
  Status last;
  for (size_t i = 0; i < mds_.size(); ++i) {
    const size_t idx = (first + i) % mds_.size();
    const std::string& addr = mds_[idx];
    auto ch = channels_.get(addr);
    if (ch.ok()) {
      last = (*ch)->template call<M>(req, resp);
      if (last.ok()) {
        current_mds_.store(idx);
        return last;
      }
      if ((*ch)->connected()) return last.WithContext(what + " at the MDS at " + addr);
      channels_.drop(addr);
    } else {
      last = ch.status();
    }
    errors += (errors.empty() ? "" : "; ") + addr + ": " + last.ToString();
  }
  return Status(last.code(), what + ": no MDS could be reached (" + errors + ")");
}

uint64_t ChainView::map_version() const {
  std::lock_guard lk(mu_);
  return map_version_;
}

void ChainView::note_map_version(uint64_t version) {
  if (version <= map_version()) return;
  Status st = refresh();
  if (!st.ok()) SLOG_WARN("chain view: {}", st.ToString());
}

Status ChainView::refresh() {
  if (mds_.empty()) return Status::Unavailable("no MDS configured: no chain table");
  const uint64_t asked_after = fetches_begun_.load();
  std::lock_guard fl(fetch_mu_);
  if (last_ok_fetch_ > asked_after) return Status::OK();  // one begun after our call succeeded
  const uint64_t fetch = fetches_begun_.fetch_add(1) + 1;
  mds::GetClusterMapRequest req;
  req.set_known_version(map_version());
  mds::GetClusterMapReply resp;
  SURGE_RETURN_IF_ERROR(call_mds<mds::MdsGetClusterMap>(req, &resp, "fetching the chain table"));
  last_ok_fetch_ = fetch;
  std::unordered_map<uint32_t, mds::Chain> chains;
  for (const auto& c : resp.map().chains().chains()) chains[c.chain_id()] = c;
  std::unordered_map<uint32_t, std::string> addresses;
  for (const auto& t : resp.map().targets()) {
    std::string a = t.address();
    if (a.find("://") == std::string::npos) a = options_.scheme + "://" + a;
    addresses[t.target_id()] = std::move(a);
  }
  std::function<void()> notify;
  {
    std::lock_guard lk(mu_);
    if (resp.map().version() <= map_version_) return Status::OK();  // nothing new
    map_version_ = resp.map().version();
    chains_ = std::move(chains);
    addresses_ = std::move(addresses);
    notify = on_change_;
  }
  if (notify) notify();
  return Status::OK();
}

void ChainView::on_change(std::function<void()> fn) {
  std::lock_guard lk(mu_);
  on_change_ = std::move(fn);
}

Result<ChainPlace> ChainView::place(uint32_t chain_id) {
  std::lock_guard lk(mu_);
  return place_locked(chain_id, own_id_());
}

std::vector<ChainPlace> ChainView::places() {
  std::lock_guard lk(mu_);
  std::vector<ChainPlace> out;
  const uint32_t me = own_id_();
  for (const auto& [id, c] : chains_) {
    auto p = place_locked(id, me);
    if (p.ok()) out.push_back(*p);
  }
  return out;
}

Status ChainView::report_failure(uint32_t target_id, uint32_t chain_id, uint64_t chain_version,
                                 const Status& seen) {
  mds::ReportTargetFailureRequest req;
  req.set_target_id(target_id);
  req.set_chain_id(chain_id);
  req.set_chain_version(chain_version);
  req.set_code(static_cast<uint32_t>(seen.code()));
  req.set_message(seen.ToString());
  req.set_reporter("target " + std::to_string(own_id_()));
  mds::ReportTargetFailureReply resp;
  SURGE_RETURN_IF_ERROR(call_mds<mds::MdsReportTargetFailure>(
      req, &resp, "reporting target " + std::to_string(target_id) + " failed"));
  return refresh();
}

Result<mds::ReportChainSyncReply> ChainView::report_sync(const mds::ReportChainSyncRequest& req) {
  mds::ReportChainSyncReply resp;
  SURGE_RETURN_IF_ERROR(call_mds<mds::MdsReportChainSync>(
      req, &resp,
      "reporting the resync of chain " + std::to_string(req.chain_id()) + " to target " +
          std::to_string(req.target_id())));
  return resp;
}

Status ChainView::note_stand_in(const mds::NoteStandInRequest& req) {
  mds::NoteStandInReply resp;
  return call_mds<mds::MdsNoteStandIn>(
      req, &resp,
      "noting that target " + std::to_string(req.stand_in_target_id()) +
          " stands in for position " + std::to_string(req.position()) + " of chain " +
          std::to_string(req.chain_id()));
}

Result<ChainPlace> ChainView::place_locked(uint32_t chain_id, uint32_t me) const {
  auto it = chains_.find(chain_id);
  if (it == chains_.end()) {
    return Status::WrongTarget("chain " + std::to_string(chain_id) + " is not in the table (map " +
                               std::to_string(map_version_) + ") of target " + std::to_string(me));
  }
  const mds::Chain& c = it->second;
  ChainPlace p;
  p.chain_id = chain_id;
  p.version = c.version();
  int mine = -1, first = -1, last = -1, last_serving = -1;
  for (int i = 0; i < c.members_size(); ++i) {
    const auto& m = c.members(i);
    if (!in_write_chain(m.state())) continue;
    if (first < 0) first = i;
    last = i;
    if (m.state() == mds::MEMBER_SERVING) last_serving = i;
    if (m.target_id() == me) mine = i;
  }
  if (mine < 0) {
    return Status::WrongTarget("target " + std::to_string(me) +
                               " is not in the write chain of chain " + std::to_string(chain_id) +
                               " (version " + std::to_string(c.version()) + ")");
  }
  p.state = c.members(mine).state();
  for (int i = 0; i < mine; ++i) {
    if (in_write_chain(c.members(i).state())) ++p.position;
  }
  p.head = mine == first;
  p.tail = mine == last;
  p.last_serving = mine == last_serving;
  for (int i = mine + 1; i < c.members_size(); ++i) {
    if (!in_write_chain(c.members(i).state())) continue;
    p.successor = c.members(i).target_id();
    p.successor_syncing = c.members(i).state() == mds::MEMBER_SYNCING;
    auto a = addresses_.find(p.successor);
    if (a != addresses_.end()) p.successor_address = a->second;
    break;
  }
  if (c.scheme() == mds::SCHEME_EC) {
    p.ec = true;
    p.ec_data = c.ec_data();
    p.ec_parity = c.ec_parity();
    p.ec_position = static_cast<uint32_t>(mine);
    for (const auto& m : c.members()) {
      ChainPlace::EcMember e;
      e.target_id = m.target_id();
      e.state = m.state();
      auto a = addresses_.find(m.target_id());
      if (a != addresses_.end()) e.address = a->second;
      p.ec_members.push_back(std::move(e));
    }
  }
  return p;
}

Result<ChainPlace> ChainView::admit(const proto::ods::ChunkRef& ref, const char* op,
                                    bool* would_fetch) {
  const uint32_t me = own_id_();
  // A server that has an MDS but no id yet (it has not registered since it
  // started) is no target yet: it refuses, and the sender tries again. One
  // without an MDS cannot judge; neither can a sender that names no target.
  if (me == 0 && ref.target_id() != 0 && !options_.mds.empty()) {
    return Status::WrongTarget(
        ref_name(ref, op) + " is meant for target " + std::to_string(ref.target_id()) +
        "; this data server has not registered with the MDS at " + options_.mds + " yet");
  }
  if (me != 0 && ref.target_id() != 0 && ref.target_id() != me) {
    return Status::WrongTarget(ref_name(ref, op) + " is meant for target " +
                               std::to_string(ref.target_id()) + ", this is target " +
                               std::to_string(me));
  }
  if (ref.chain_id() == 0) return ChainPlace{};
  for (int attempt = 0;; ++attempt) {
    {
      std::lock_guard lk(mu_);
      auto it = chains_.find(ref.chain_id());
      if (it != chains_.end() && ref.chain_version() < it->second.version()) {
        return Status::StaleChain(ref_name(ref, op) + ": target " + std::to_string(me) +
                                  " holds chain version " + std::to_string(it->second.version()));
      }
      if (it != chains_.end() && ref.chain_version() == it->second.version()) {
        return place_locked(ref.chain_id(), me);
      }
      if (attempt > 0) {
        if (it == chains_.end()) return place_locked(ref.chain_id(), me);  // WrongTarget
        return Status::Unavailable(
            ref_name(ref, op) + ": target " + std::to_string(me) + " knows only chain version " +
            std::to_string(it->second.version()) + " (map " + std::to_string(map_version_) + ")");
      }
    }
    // Newer than ours, or a chain we do not know: ask the MDS, judge again.
    if (would_fetch != nullptr) {
      *would_fetch = true;
      return Status::Unavailable(ref_name(ref, op) + ": target " + std::to_string(me) +
                                 " must fetch the chain table first");
    }
    Status st = refresh();
    if (!st.ok()) return Status::Unavailable(ref_name(ref, op) + ": " + st.ToString());
  }
}

}  // namespace surge::ods
