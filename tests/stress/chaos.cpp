#include "tests/stress/chaos.h"

#include <chrono>
#include <cstdio>
#include <thread>

#include "tests/client/chain_state.h"

namespace surge::stress {

using namespace std::chrono_literals;

Chaos::Chaos(test::LocalCluster* cluster, std::mutex* cluster_mu, ChaosOptions opt, uint64_t seed,
             double (*now)())
    : cluster_(cluster), mu_(cluster_mu), opt_(opt), rng_(seed), now_(now) {}

Status Chaos::init(int ods_count) {
  for (int i = 0; i < ods_count; ++i) {
    const uint32_t id = test::target_id_of(*cluster_, i);
    if (id == 0) {
      return Status::NotFound("no target id for data server " + std::to_string(i) + " at " +
                              cluster_->ods_address(i));
    }
    target_.push_back(id);
  }
  return Status::OK();
}

void Chaos::event(const std::string& what) {
  char t[32];
  std::snprintf(t, sizeof(t), "t=%6.1fs ", now_());
  std::lock_guard<std::mutex> l(state_mu_);
  events_.push_back(t + what);
  std::printf("%s%s\n", t, what.c_str());
  std::fflush(stdout);
}

bool Chaos::killed(pid_t pid) {
  std::lock_guard<std::mutex> l(state_mu_);
  return killed_.count(pid) != 0;
}

std::string Chaos::error() {
  std::lock_guard<std::mutex> l(state_mu_);
  return error_;
}

bool Chaos::chain_state(std::set<uint32_t>* away, std::set<uint32_t>* syncing) {
  std::string out;
  if (test::run_surgectl(*cluster_, "--json chains", &out) != 0) return false;
  for (const auto& c : test::parse_chains(out)) {
    for (const auto& m : c.members) {
      if (m.state != "serving") away->insert(m.target);
      if (m.state == "syncing") syncing->insert(m.target);
    }
  }
  return true;
}

bool Chaos::kill_one_ods(bool prefer_syncing, bool only_syncing) {
  std::set<uint32_t> away, syncing;
  if (!chain_state(&away, &syncing)) return false;  // MDS not answering: no judgement
  for (int i : down_) away.insert(target_[static_cast<size_t>(i)]);
  std::vector<int> allowed, resyncing;
  for (int i = 0; i < static_cast<int>(target_.size()); ++i) {
    if (down_.count(i) != 0) continue;
    const uint32_t t = target_[static_cast<size_t>(i)];
    std::set<uint32_t> after = away;
    after.insert(t);
    if (static_cast<int>(after.size()) > opt_.max_down) continue;
    allowed.push_back(i);
    if (syncing.count(t) != 0) resyncing.push_back(i);
  }
  if (allowed.empty() || (only_syncing && resyncing.empty())) return false;
  const bool again = prefer_syncing && !resyncing.empty();
  const int victim = again ? resyncing[rng_() % resyncing.size()] : allowed[rng_() % allowed.size()];
  const pid_t pid = cluster_->ods_pid(victim);
  {
    std::lock_guard<std::mutex> l(state_mu_);
    killed_.insert(pid);
  }
  (void)cluster_->kill_ods(victim);
  down_.insert(victim);
  ++ods_kills_;
  resync_kills_ += again;
  event("SIGKILL ods" + std::to_string(victim) + " (target " +
        std::to_string(target_[static_cast<size_t>(victim)]) + ", pid " + std::to_string(pid) +
        (again ? ", during its own resync" : "") + ")");
  return true;
}

void Chaos::tick() {
  std::lock_guard<std::mutex> l(*mu_);
  const int r = static_cast<int>(rng_() % 100);
  if (r < opt_.mds_kill_percent) {
    const pid_t pid = cluster_->mds_pid();
    {
      std::lock_guard<std::mutex> sl(state_mu_);
      killed_.insert(pid);
    }
    // With a data server at the same moment: judge the kill while the MDS
    // can still answer.
    const bool with_ods = opt_.kill_ods && rng_() % 2 == 0 && kill_one_ods(false, false);
    (void)cluster_->kill_mds();
    ++mds_kills_;
    event(std::string("SIGKILL mds (pid ") + std::to_string(pid) + ")" +
          (with_ods ? " right after the data server" : ""));
    std::this_thread::sleep_for(std::chrono::milliseconds(200 + rng_() % 1800));
    Status st = cluster_->start_mds();
    if (!st.ok()) {
      std::lock_guard<std::mutex> sl(state_mu_);
      error_ = "restart of the MDS: " + st.ToString();
      return;
    }
    event("restarted mds (pid " + std::to_string(cluster_->mds_pid()) + ")");
    return;
  }
  // Right after a restart, now and then: the victim again while it
  // resyncs (when it still does).
  if (quick_) {
    quick_ = false;
    if (opt_.kill_ods && kill_one_ods(true, true)) return;
  }
  if (!down_.empty() && (r < 60 || !opt_.kill_ods || !kill_one_ods(false, false))) {
    auto it = down_.begin();
    std::advance(it, static_cast<long>(rng_() % down_.size()));
    const int i = *it;
    Status st = cluster_->start_ods(i);
    if (!st.ok()) {
      std::lock_guard<std::mutex> sl(state_mu_);
      error_ = "restart of data server " + std::to_string(i) + ": " + st.ToString();
      return;
    }
    down_.erase(it);
    event("restarted ods" + std::to_string(i) + " (pid " + std::to_string(cluster_->ods_pid(i)) + ")");
    quick_ = rng_() % 100 < 40;
    return;
  }
  if (opt_.kill_ods && down_.empty()) (void)kill_one_ods(false, false);
}

void Chaos::run(const std::atomic<bool>& stop) {
  while (!stop.load() && error().empty()) {
    const double wait_s =
        quick_ ? 0.2 + static_cast<double>(rng_() % 800) / 1000.0
               : opt_.kill_interval_s * (0.5 + static_cast<double>(rng_() % 1000) / 1000.0);
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
    while (!stop.load() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(50ms);
    if (stop.load()) break;
    tick();
  }
  stopped_ = true;
}

Status Chaos::heal(double timeout_s) {
  {
    std::lock_guard<std::mutex> l(*mu_);
    if (cluster_->mds_pid() <= 0) SURGE_RETURN_IF_ERROR(cluster_->start_mds());
    for (int i : down_) {
      SURGE_RETURN_IF_ERROR(cluster_->start_ods(i));
      event("restarted ods" + std::to_string(i) + " for the final check");
    }
    down_.clear();
  }
  SURGE_RETURN_IF_ERROR(cluster_->wait_targets_up(static_cast<int>(target_.size()), 60000));
  const std::string settled = "\"degraded\":0,\"resyncing\":0,\"rebuilding\":0,\"unavailable\":0}";
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::string out;
  for (;;) {
    if (test::run_surgectl(*cluster_, "--json status", &out) == 0 &&
        out.find(settled) != std::string::npos) {
      event("every chain healthy");
      return Status::OK();
    }
    if (std::chrono::steady_clock::now() > give_up) {
      return Status::TimedOut("the chains were not all healthy " + std::to_string(timeout_s) +
                              " s after every daemon was back: " + out);
    }
    std::this_thread::sleep_for(250ms);
  }
}

}  // namespace surge::stress
