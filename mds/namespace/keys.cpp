// Key encoding; see keys.h.
#include "mds/namespace/keys.h"

namespace surge::mds::keys {

void put_be64(std::string& out, uint64_t v) {
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>((v >> (i * 8)) & 0xff));
}
void put_be32(std::string& out, uint32_t v) {
  for (int i = 3; i >= 0; --i) out.push_back(static_cast<char>((v >> (i * 8)) & 0xff));
}
uint64_t get_be64(std::string_view in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(in[i]);
  return v;
}
uint32_t get_be32(std::string_view in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(in[i]);
  return v;
}

uint64_t name_cookie(std::string_view name) {
  // FNV-1a, then the splitmix64 finalizer to spread similar names. Part of
  // the on-disk format: never change.
  uint64_t h = 1469598103934665603ull;
  for (char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ull;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  h >>= 1;  // 63 bits: a positive off_t for FUSE
  return h < 3 ? h + 3 : h;
}

std::string inode(uint64_t ino) {
  std::string k;
  put_be64(k, ino);
  return k;
}
std::string dentry(uint64_t parent, std::string_view name) {
  std::string k;
  k.reserve(16 + name.size());
  put_be64(k, parent);
  put_be64(k, name_cookie(name));
  k.append(name);
  return k;
}
std::string dentry_from(uint64_t parent, uint64_t cookie) {
  std::string k;
  put_be64(k, parent);
  put_be64(k, cookie);
  return k;
}
std::string dentry_end(uint64_t parent) {
  std::string k;
  put_be64(k, parent + 1);
  return k;
}
std::string xattr(uint64_t ino, std::string_view name) {
  std::string k;
  put_be64(k, ino);
  k.append(name);
  return k;
}
std::string xattr_end(uint64_t ino) {
  std::string k;
  put_be64(k, ino + 1);
  return k;
}

std::string encode_dentry(const DentryValue& d) {
  std::string v;
  put_be64(v, d.child);
  put_be32(v, d.type);
  return v;
}
bool decode_dentry(std::string_view v, DentryValue* d) {
  if (v.size() != 12) return false;
  d->child = get_be64(v);
  d->type = get_be32(v.substr(8));
  return true;
}
bool decode_dentry_key(std::string_view k, uint64_t* parent, uint64_t* cookie,
                       std::string_view* name) {
  if (k.size() <= 16) return false;
  *parent = get_be64(k);
  *cookie = get_be64(k.substr(8));
  *name = k.substr(16);
  return true;
}

std::string target(uint32_t id) {
  std::string k(kTargetPrefix);
  put_be32(k, id);
  return k;
}
std::string chain(uint32_t id) {
  std::string k(kChainPrefix);
  put_be32(k, id);
  return k;
}
std::string orphan(uint64_t ino) {
  std::string k(kOrphanPrefix);
  put_be64(k, ino);
  return k;
}
std::string truncate_intent(uint64_t ino) {
  std::string k(kTruncateIntentPrefix);
  put_be64(k, ino);
  return k;
}

std::string session(uint64_t sid) {
  std::string k(kSessionPrefix);
  put_be64(k, sid);
  return k;
}

std::string session_open(uint64_t sid, uint64_t ino) {
  std::string k(kSessionOpenPrefix);
  put_be64(k, sid);
  put_be64(k, ino);
  return k;
}

std::string session_opens_end(uint64_t sid) {
  if (sid == UINT64_MAX) return std::string(kSessionOpenEnd);
  std::string k(kSessionOpenPrefix);
  put_be64(k, sid + 1);
  return k;
}

std::string open_by(uint64_t ino, uint64_t sid) {
  std::string k(kOpenPrefix);
  put_be64(k, ino);
  put_be64(k, sid);
  return k;
}

std::string opens_of_end(uint64_t ino) {
  if (ino == UINT64_MAX) return std::string(kOpenEnd);
  std::string k(kOpenPrefix);
  put_be64(k, ino + 1);
  return k;
}

std::string done_op(uint64_t op_id) {
  std::string k(kDoneOpPrefix);
  put_be64(k, op_id);
  return k;
}

std::string done_op_by_time(uint64_t when_ns, uint64_t op_id) {
  std::string k(kDoneOpByTimePrefix);
  put_be64(k, when_ns);
  put_be64(k, op_id);
  return k;
}

}  // namespace surge::mds::keys
