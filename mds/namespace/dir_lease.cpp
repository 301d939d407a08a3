#include "mds/namespace/dir_lease.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace surge::mds::dir_lease {

uint64_t now_ms() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

void grant(records::InodeRecord& dir, uint64_t session, uint64_t now, uint32_t term_ms) {
  if (session == 0 || term_ms == 0) return;
  records::DirLease* l = dir.mutable_lease();
  l->set_session(session);
  l->set_until_ms(now + term_ms);
  l->set_recalled(false);
}

AddVerdict before_add(records::InodeRecord& dir, uint64_t session, uint64_t now, uint32_t term_ms) {
  if (!dir.has_lease()) return {};
  records::DirLease* l = dir.mutable_lease();
  bool cut = false;
  if (l->until_ms() > now + kMaxTermMs) {  // stored before this clock stepped back
    l->set_until_ms(now + kMaxTermMs);
    cut = true;
  }
  const bool over = now >= l->until_ms() + kSkewMs;  // on every MDS's clock
  if (session != 0 && l->session() == session) {
    // Still its own and not recalled, even if over: no other session has
    // added a name since the grant (each would have recalled or shed it),
    // so the holder's names are still all of them and it renews.
    if (!l->recalled() && term_ms != 0) {
      l->set_until_ms(now + term_ms);
      return {.lease_ms = term_ms};
    }
    if (over) dir.clear_lease();
    return {};  // recalled (or leases off): it ends at until
  }
  if (over) {  // the record sheds it
    dir.clear_lease();
    return {};
  }
  AddVerdict v;
  v.wait_until_ms = l->until_ms() + kSkewMs;
  v.store_first = cut || !l->recalled();
  l->set_recalled(true);
  return v;
}

void wait_until(uint64_t until_ms) {
  const uint64_t now = now_ms();
  if (until_ms <= now) return;
  const uint64_t ms = std::min<uint64_t>(until_ms - now, 1000);
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

}  // namespace surge::mds::dir_lease
