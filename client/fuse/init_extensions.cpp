#include "client/fuse/init_extensions.h"

#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

#include "client/fuse/fuse_abi.h"
#include "common/log.h"

namespace surge::fuse {

namespace {

// The kernel's ABI (include/uapi/linux/fuse.h), which libfuse 3.14 keeps
// private: only the offsets this file reads or writes (the request
// header's are in fuse_abi.h).
constexpr uint32_t kOpInit = 26;
constexpr size_t kInUniqueAt = 8;             // uint64 unique
constexpr size_t kInitInFlagsAt = 12;         // fuse_init_in.flags
constexpr size_t kInitInFlags2At = 16;        // fuse_init_in.flags2
constexpr size_t kOutHeaderSize = 16;         // fuse_out_header
constexpr size_t kOutErrorAt = 4;             // int32 error
constexpr size_t kOutUniqueAt = 8;            // uint64 unique
constexpr size_t kInitOutFlagsAt = 12;        // fuse_init_out.flags
constexpr size_t kInitOutMaxPagesAt = 28;     // fuse_init_out.max_pages (uint16)
constexpr size_t kInitOutFlags2At = 32;       // fuse_init_out.flags2
constexpr uint32_t kMaxPagesFlag = 1u << 22;  // FUSE_MAX_PAGES: max_pages is valid
constexpr uint32_t kInitExt = 1u << 30;       // FUSE_INIT_EXT: flags2 is valid
constexpr uint32_t kAllowMmap2 = 1u << (36 - 32);  // FUSE_DIRECT_IO_ALLOW_MMAP
constexpr uint32_t kKillprivV2 = 1u << 28;    // FUSE_HANDLE_KILLPRIV_V2

constexpr uint16_t kMaxPages = 512;

std::atomic<uint64_t> g_init_unique{0};
std::atomic<uint32_t> g_offered{0};   // the kernel's INIT flags
std::atomic<uint32_t> g_offered2{0};  // the kernel's flags2, when it set INIT_EXT
std::atomic<bool> g_granted{false};

template <typename T>
T load(const void* base, size_t at) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + at, sizeof(T));
  return v;
}

template <typename T>
void store(void* base, size_t at, T v) {
  std::memcpy(static_cast<char*>(base) + at, &v, sizeof(T));
}

ssize_t read_request(int fd, void* buf, size_t len, void*) {
  ssize_t n = read(fd, buf, len);
  if (n >= static_cast<ssize_t>(kInHeaderSize + kInitInFlags2At + 4) &&
      load<uint32_t>(buf, kInOpcodeAt) == kOpInit) {
    const void* in = static_cast<const char*>(buf) + kInHeaderSize;
    uint32_t flags = load<uint32_t>(in, kInitInFlagsAt);
    g_offered.store(flags);
    g_offered2.store((flags & kInitExt) ? load<uint32_t>(in, kInitInFlags2At) : 0);
    g_init_unique.store(load<uint64_t>(buf, kInUniqueAt));
  }
  return n;
}

// The kernel's cap on pages per request, as text ("256 (fixed)" where the
// kernel has no such setting).
std::string pages_limit() {
  std::ifstream in("/proc/sys/fs/fuse/max_pages_limit");
  std::string v;
  if (!(in >> v)) return "256 (fixed)";
  return v;
}

// libfuse sends the INIT reply as {out header, fuse_init_out}; the second
// part is do_init's own copy, so it may be changed in place.
void extend_init_reply(iovec* iov, int count) {
  if (count < 2 || iov[0].iov_len < kOutHeaderSize) return;
  if (load<int32_t>(iov[0].iov_base, kOutErrorAt) != 0) return;
  if (iov[1].iov_len < kInitOutFlags2At + 4) return;  // an old kernel's short reply
  uint32_t flags = load<uint32_t>(iov[1].iov_base, kInitOutFlagsAt);
  if (flags & kMaxPagesFlag) {
    // libfuse asks for max_write's 256 pages. A 1 MiB read into memory that
    // is not page-aligned (malloc's) spans 257, and the kernel would split
    // it in two requests; max_read (FsOptions) still caps a request at
    // 1 MiB. The kernel clamps this to fs.fuse.max_pages_limit.
    store<uint16_t>(iov[1].iov_base, kInitOutMaxPagesAt, kMaxPages);
    SLOG_INFO("fuse: init: asked for {} pages per request (fs.fuse.max_pages_limit: {})",
              kMaxPages, pages_limit());
  }
  if (g_offered.load() & kKillprivV2) {
    // Setuid/setgid are cleared by us (kill_privs.h), told by the kernel
    // which writes, truncates and O_TRUNC opens come without CAP_FSETID.
    flags |= kKillprivV2;
    store<uint32_t>(iov[1].iov_base, kInitOutFlagsAt, flags);
    SLOG_INFO("fuse: init: setuid/setgid cleared by the file system (FUSE_HANDLE_KILLPRIV_V2)");
  } else {
    SLOG_WARN("fuse: init: the kernel does not offer FUSE_HANDLE_KILLPRIV_V2; writes by others"
              " than root may keep setuid/setgid bits");
  }
  if (!(flags & kInitExt) || !(g_offered2.load() & kAllowMmap2)) {
    SLOG_INFO("fuse: init: the kernel does not offer direct-IO mmap");
    return;
  }
  uint32_t flags2 = load<uint32_t>(iov[1].iov_base, kInitOutFlags2At);
  store<uint32_t>(iov[1].iov_base, kInitOutFlags2At, flags2 | kAllowMmap2);
  g_granted.store(true);
  SLOG_INFO("fuse: init: direct-IO files may be mapped (FUSE_DIRECT_IO_ALLOW_MMAP)");
}

ssize_t write_reply(int fd, iovec* iov, int count, void*) {
  uint64_t init = g_init_unique.load(std::memory_order_relaxed);
  if (init != 0 && iov[0].iov_len >= kOutHeaderSize &&
      load<uint64_t>(iov[0].iov_base, kOutUniqueAt) == init) {
    g_init_unique.store(0);
    extend_init_reply(iov, count);
  }
  return writev(fd, iov, count);
}

}  // namespace

bool install_init_extensions(fuse_session* se) {
  static const fuse_custom_io kIo = {write_reply, read_request, nullptr, nullptr};
  // The same descriptor: the session still closes it once, at destroy.
  int rc = fuse_session_custom_io(se, &kIo, fuse_session_fd(se));
  if (rc != 0) {
    SLOG_WARN("fuse: custom device IO refused ({}); no init extensions", std::strerror(-rc));
    return false;
  }
  return true;
}

bool direct_io_mmap_granted() { return g_granted.load(); }

bool killpriv_v2_offered() { return (g_offered.load() & kKillprivV2) != 0; }

}  // namespace surge::fuse
