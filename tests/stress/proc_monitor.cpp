#include "tests/stress/proc_monitor.h"

#include <dirent.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace surge::stress {

bool read_proc(pid_t pid, uint64_t* rss_kib, int* fds) {
  const std::string base = "/proc/" + std::to_string(pid);
  std::ifstream in(base + "/status");
  if (!in) return false;
  std::string line;
  *rss_kib = 0;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) *rss_kib = std::stoull(line.substr(6));
  }
  *fds = 0;
  DIR* d = opendir((base + "/fd").c_str());
  if (d == nullptr) return false;
  while (dirent* e = readdir(d)) *fds += e->d_name[0] != '.';
  closedir(d);
  return true;
}

bool exited(pid_t pid) {
  siginfo_t info{};
  if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return true;
  return info.si_pid == pid;
}

std::vector<std::string> ProcMonitor::sample(double t, const std::map<std::string, pid_t>& daemons) {
  std::vector<std::string> dead;
  for (const auto& [name, pid] : daemons) {
    if (pid <= 0) continue;
    if (exited(pid)) {
      dead.push_back(name + " (pid " + std::to_string(pid) + ")");
      continue;
    }
    auto it = current_.find(name);
    if (it == current_.end() || all_[it->second].pid != pid) {
      all_.push_back(Incarnation{name, pid, {}});
      current_[name] = all_.size() - 1;
      it = current_.find(name);
    }
    Sample s;
    s.t = t;
    if (read_proc(pid, &s.rss_kib, &s.fds)) all_[it->second].samples.push_back(s);
  }
  return dead;
}

namespace {
std::string mib(uint64_t kib) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f", static_cast<double>(kib) / 1024.0);
  return b;
}
}  // namespace

std::string ProcMonitor::table(int points) const {
  std::ostringstream o;
  o << "daemon  pid      life(s)  RSS MiB first/min/max/last    fds first/min/max/last   RSS MiB over its life\n";
  for (const auto& inc : all_) {
    if (inc.samples.empty()) continue;
    const auto& s = inc.samples;
    uint64_t rmin = s[0].rss_kib, rmax = s[0].rss_kib;
    int fmin = s[0].fds, fmax = s[0].fds;
    for (const auto& x : s) {
      rmin = std::min(rmin, x.rss_kib);
      rmax = std::max(rmax, x.rss_kib);
      fmin = std::min(fmin, x.fds);
      fmax = std::max(fmax, x.fds);
    }
    char head[160];
    std::snprintf(head, sizeof(head), "%-7s %-8d %7.0f  %6s/%6s/%6s/%6s  %4d/%4d/%4d/%4d   ",
                  inc.name.c_str(), inc.pid, s.back().t - s.front().t, mib(s[0].rss_kib).c_str(),
                  mib(rmin).c_str(), mib(rmax).c_str(), mib(s.back().rss_kib).c_str(), s[0].fds,
                  fmin, fmax, s.back().fds);
    o << head;
    const size_t n = std::min<size_t>(static_cast<size_t>(points), s.size());
    for (size_t i = 0; i < n; ++i) {
      const size_t at = n == 1 ? 0 : i * (s.size() - 1) / (n - 1);
      o << (i ? " " : "") << mib(s[at].rss_kib);
    }
    o << "\n";
  }
  return o.str();
}

std::string ProcMonitor::fd_growth(int slack) const {
  return descriptor_growth(all_, slack);
}

std::string descriptor_growth(const std::vector<Incarnation>& all, int slack) {
  // A daemon's first seconds are its clients and peers connecting (a data
  // server restarted mid-run goes from 30 descriptors to its 200-odd
  // steady state as every client and chain lane reconnects): not growth.
  constexpr double kWarmupS = 10;
  // Only incarnations that outlived the run are judged: their last sample
  // is the final one, taken once IO stopped and the cluster healed. One
  // killed mid-run may be cut off in a transient: on 7 Dec 2026 a data
  // server SIGKILLed 10 s after another's restart and 6 s after the
  // MDS's had 514-727 descriptors in its last third (386 in its first),
  // as its peers had at the same moments; theirs fell back to 163-175 by
  // the end.
  double end = 0;
  for (const auto& inc : all) {
    if (!inc.samples.empty()) end = std::max(end, inc.samples.back().t);
  }
  std::string out;
  for (const auto& inc : all) {
    if (inc.samples.empty() || inc.samples.back().t < end) continue;
    std::vector<Sample> s;
    for (const Sample& x : inc.samples) {
      if (x.t - inc.samples.front().t >= kWarmupS) s.push_back(x);
    }
    if (s.size() < 6) continue;
    const size_t third = s.size() / 3;
    int first_max = 0, last_min = s.back().fds;
    for (size_t i = 0; i < third; ++i) first_max = std::max(first_max, s[i].fds);
    for (size_t i = s.size() - third; i < s.size(); ++i) last_min = std::min(last_min, s[i].fds);
    if (last_min > first_max + slack) {
      out += inc.name + " (pid " + std::to_string(inc.pid) + "): at most " +
             std::to_string(first_max) + " descriptors open in the first third of its life, " +
             "at least " + std::to_string(last_min) + " in the last; ";
    }
  }
  return out;
}

std::string ProcMonitor::csv() const {
  std::ostringstream o;
  o << "name,pid,t,rss_kib,fds\n";
  for (const auto& inc : all_) {
    for (const auto& s : inc.samples) {
      o << inc.name << "," << inc.pid << "," << s.t << "," << s.rss_kib << "," << s.fds << "\n";
    }
  }
  return o.str();
}

}  // namespace surge::stress
