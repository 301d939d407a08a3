// Crash points (see crash_points.h).
#include "ods/store/crash_points.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace surge::ods {
namespace {

struct Armed {
  std::string name;
  long at = 0;  // 0: disarmed
  std::atomic<long> passed{0};
};

Armed& armed() {
  static Armed* a = [] {
    auto* x = new Armed;
    if (const char* env = std::getenv("SURGE_ODS_CRASH_AT")) {
      std::string spec = env;
      auto colon = spec.rfind(':');
      if (colon != std::string::npos) {
        x->name = spec.substr(0, colon);
        x->at = std::strtol(spec.c_str() + colon + 1, nullptr, 10);
      }
    }
    return x;
  }();
  return *a;
}

}  // namespace

void crash_point(const char* name) {
  Armed& a = armed();
  if (a.at <= 0 || a.name != name) return;
  if (a.passed.fetch_add(1) + 1 == a.at) {
    static const char msg[] = "surge-ods: crash point reached, killing myself\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::kill(::getpid(), SIGKILL);
  }
}

}  // namespace surge::ods
