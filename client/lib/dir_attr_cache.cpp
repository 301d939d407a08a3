#include "client/lib/dir_attr_cache.h"

#include <sys/stat.h>

namespace surge::client {

namespace {

bool newer(const TimeSpec& a, const TimeSpec& b) {
  return a.sec != b.sec ? a.sec > b.sec : a.nsec > b.nsec;
}

}  // namespace

void DirAttrCache::note(const Attr& a) {
  if (!S_ISDIR(a.mode) || a.ino == 0) return;
  const auto now = Clock::now();
  std::lock_guard lk(mu_);
  auto it = entries_.find(a.ino);
  if (it != entries_.end()) {
    // Equal ctimes: the same change or one of the same nanosecond; the
    // later reply is as good.
    if (newer(it->second.attr.ctime, a.ctime)) return;
    it->second = Entry{a, now};
    return;
  }
  if (entries_.size() >= kMaxEntries) {
    auto oldest = entries_.begin();
    for (auto e = entries_.begin(); e != entries_.end(); ++e) {
      if (e->second.at < oldest->second.at) oldest = e;
    }
    entries_.erase(oldest);
  }
  entries_.emplace(a.ino, Entry{a, now});
}

void DirAttrCache::drop(Ino dir) {
  std::lock_guard lk(mu_);
  entries_.erase(dir);
}

std::optional<Attr> DirAttrCache::recent(Ino dir, Clock::duration max_age,
                                         Clock::duration* age) const {
  std::lock_guard lk(mu_);
  auto it = entries_.find(dir);
  if (it == entries_.end()) return std::nullopt;
  const auto a = Clock::now() - it->second.at;
  if (a >= max_age) return std::nullopt;
  if (age != nullptr) *age = a;
  return it->second.attr;
}

size_t DirAttrCache::size() const {
  std::lock_guard lk(mu_);
  return entries_.size();
}

}  // namespace surge::client
