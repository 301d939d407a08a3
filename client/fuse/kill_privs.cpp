#include "client/fuse/kill_privs.h"

#include <cstddef>
#include <cstring>

#include "client/fuse/fuse_abi.h"
#include "client/fuse/fuse_loop.h"

namespace surge::fuse {

namespace {

// The kernel's ABI (include/uapi/linux/fuse.h): only what is read here;
// the header's offsets are in fuse_abi.h.
constexpr uint32_t kOpSetattr = 4, kOpOpen = 14, kOpWrite = 16;
constexpr size_t kSetattrValidAt = 0;      // fuse_setattr_in.valid
constexpr uint32_t kFattrKillSuidgid = 1u << 15;
constexpr size_t kOpenOpenFlagsAt = 4;     // fuse_open_in.open_flags
constexpr uint32_t kOpenKillSuidgid = 1u << 0;
constexpr size_t kWriteFlagsAt = 20;       // fuse_write_in.write_flags
constexpr uint32_t kWriteKillSuidgid = 1u << 2;

bool request_flag(uint32_t opcode, size_t at, uint32_t bit) {
  size_t len = 0;
  const std::byte* req = current_request(&len);
  if (req == nullptr || len < kInHeaderSize + at + 4) return false;
  uint32_t op, v;
  std::memcpy(&op, req + kInOpcodeAt, 4);
  if (op != opcode) return false;
  std::memcpy(&v, req + kInHeaderSize + at, 4);
  return (v & bit) != 0;
}

}  // namespace

bool write_kills_privs() { return request_flag(kOpWrite, kWriteFlagsAt, kWriteKillSuidgid); }
bool setattr_kills_privs() {
  return request_flag(kOpSetattr, kSetattrValidAt, kFattrKillSuidgid);
}
bool open_kills_privs() { return request_flag(kOpOpen, kOpenOpenFlagsAt, kOpenKillSuidgid); }

}  // namespace surge::fuse
