// Pause points (see pause_points.h).
#include "ods/chain/pause_points.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "common/log.h"

namespace surge::ods {
namespace {

struct Armed {
  std::string name;
  std::string dir;
  long at = 0;  // 0: disarmed
  std::atomic<long> passed{0};
};

// "NAME:N:DIR"; anything else leaves the points disarmed (and says so, so a
// test whose spec is wrong sees why nothing is held).
Armed& armed() {
  static Armed* a = [] {
    auto* x = new Armed;
    const char* env = std::getenv("SURGE_ODS_PAUSE_AT");
    if (env == nullptr) return x;
    const std::string spec = env;
    const auto c1 = spec.find(':');
    const auto c2 = c1 == std::string::npos ? c1 : spec.find(':', c1 + 1);
    if (c2 == std::string::npos || c2 + 1 >= spec.size()) {
      SLOG_WARN("SURGE_ODS_PAUSE_AT=\"{}\" is not NAME:N:DIR; no pause point armed", spec);
      return x;
    }
    x->name = spec.substr(0, c1);
    x->at = std::strtol(spec.c_str() + c1 + 1, nullptr, 10);
    x->dir = spec.substr(c2 + 1);
    return x;
  }();
  return *a;
}

bool touch(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

}  // namespace

PausePoint::PausePoint(const char* name) {
  Armed& a = armed();
  if (a.at <= 0 || a.name != name) return;
  if (a.passed.fetch_add(1) + 1 != a.at) return;
  held_ = true;
  const std::string go = a.dir + "/" + a.name + ".go";
  SLOG_WARN("pause point {} reached (pass {}): holding until {} exists", a.name, a.at, go);
  if (!touch(a.dir + "/" + a.name + ".held")) {
    SLOG_WARN("pause point {}: cannot create {}/{}.held; holding anyway", a.name, a.dir, a.name);
  }
  while (::access(go.c_str(), F_OK) != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  SLOG_WARN("pause point {} released", a.name);
}

PausePoint::~PausePoint() {
  if (!held_) return;
  Armed& a = armed();
  if (!touch(a.dir + "/" + a.name + ".done")) {
    SLOG_WARN("pause point {}: cannot create {}/{}.done", a.name, a.dir, a.name);
  }
}

}  // namespace surge::ods
