#include "tests/stress/file_model.h"

#include <algorithm>
#include <cstring>

namespace surge::stress {

namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::string hex_byte(unsigned char c) {
  static const char* d = "0123456789abcdef";
  return std::string("0x") + d[c >> 4] + d[c & 15];
}

}  // namespace

void fill_content(uint32_t wid, uint64_t offset, size_t len, char* out) {
  if (wid == 0) {
    std::memset(out, 0, len);
    return;
  }
  const uint64_t base = static_cast<uint64_t>(wid) << 40;
  for (size_t i = 0; i < len; i += 8) {
    const uint64_t v = splitmix(base ^ ((offset + i) >> 3));
    std::memcpy(out + i, &v, std::min<size_t>(8, len - i));
  }
}

void FileModel::grow(size_t sectors) {
  if (cur_.size() >= sectors) return;
  cur_.resize(sectors, 0);
  alt_.resize(sectors, 0);
  state_.resize(sectors, kCertain);
}

void FileModel::apply(const Update& u, bool acknowledged) {
  if (u.kind == Update::kWrite) {
    const size_t first = u.offset / kSector, end = (u.offset + u.length) / kSector;
    grow(end);
    for (size_t s = first; s < end; ++s) {
      if (acknowledged) {
        cur_[s] = u.wid;
        state_[s] = kCertain;
      } else if (state_[s] == kCertain) {
        alt_[s] = cur_[s];
        cur_[s] = u.wid;
        state_[s] = kEither;
      } else {
        state_[s] = kAny;
      }
    }
    const uint64_t e = u.offset + u.length;
    if (acknowledged) {
      size_min_ = std::max(size_min_, e);
      size_max_ = std::max(size_max_, e);
    } else {
      size_max_ = std::max(size_max_, e);
    }
    return;
  }
  // Truncate to u.offset: the sectors past it read as zeros from now on
  // (or, unacknowledged, maybe still as before).
  const size_t keep = u.offset / kSector;
  for (size_t s = keep; s < cur_.size(); ++s) {
    if (acknowledged) {
      cur_[s] = 0;
      state_[s] = kCertain;
    } else if (state_[s] == kCertain) {
      if (cur_[s] != 0) {
        alt_[s] = cur_[s];
        cur_[s] = 0;
        state_[s] = kEither;
      }
    } else {
      state_[s] = kAny;
    }
  }
  if (acknowledged) {
    size_min_ = size_max_ = u.offset;
  } else {
    size_min_ = std::min(size_min_, u.offset);
    size_max_ = std::max(size_max_, u.offset);
  }
}

std::string FileModel::check(const std::string& data) const {
  if (data.size() < size_min_ || data.size() > size_max_) {
    return path_ + ": size " + std::to_string(data.size()) + ", want " +
           (size_min_ == size_max_ ? std::to_string(size_min_)
                                   : std::to_string(size_min_) + ".." + std::to_string(size_max_));
  }
  char want[kSector], other[kSector];
  for (uint64_t off = 0; off < data.size(); off += kSector) {
    const size_t s = off / kSector;
    const size_t n = std::min<uint64_t>(kSector, data.size() - off);
    const uint32_t cur = s < cur_.size() ? cur_[s] : 0;
    const uint8_t st = s < state_.size() ? state_[s] : kCertain;
    if (st == kAny) continue;
    fill_content(cur, off, n, want);
    if (std::memcmp(data.data() + off, want, n) == 0) continue;
    if (st == kEither) {
      fill_content(alt_[s], off, n, other);
      if (std::memcmp(data.data() + off, other, n) == 0) continue;
    }
    size_t i = 0;
    while (i < n && data[off + i] == want[i]) ++i;
    return path_ + ": wrong byte at offset " + std::to_string(off + i) + ": read " +
           hex_byte(static_cast<unsigned char>(data[off + i])) + ", want " +
           hex_byte(static_cast<unsigned char>(want[i])) + " (write " + std::to_string(cur) +
           (cur == 0 ? ", a hole" : "") + (st == kEither ? ", or write " + std::to_string(alt_[s]) : "") +
           ")";
  }
  return "";
}

uint64_t FileModel::unknown_bytes() const {
  uint64_t n = 0;
  for (uint8_t st : state_) n += st == kAny ? kSector : 0;
  return n + (size_max_ - size_min_);
}

}  // namespace surge::stress
