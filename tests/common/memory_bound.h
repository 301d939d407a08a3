// How much more memory a test lets a process hold in a sanitized build
// (the memory counterpart of time_scale.h). ASan+UBSan and TSan processes
// carry the sanitizer's runtime and shadow memory, ASan a redzone around
// every allocation and a quarantine of freed chunks it does not reuse at
// once (scripts/sanitize.sh caps it at 32 MiB, quarantine_size_mb). Measured
// under ASan (docs/testing.md): surge-ods's peak 95-98 MiB where Release
// peaks at 41 MiB, and surge-fuse growing by 102 MiB over 4,000 files with
// the default 256 MiB quarantine (under 4 MiB without one). So in those
// builds every bound is twice the Release one plus 64 MiB: it still catches
// a process that grows without bound; the tight Release bound is checked by
// the main part, which runs the same tests.
// Header-only: every test part includes it.
#pragma once

#include <cstdint>

namespace surge::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr uint64_t kMemoryScale = 2;
inline constexpr uint64_t kMemorySlackKiB = 64 * 1024;
#else
inline constexpr uint64_t kMemoryScale = 1;
inline constexpr uint64_t kMemorySlackKiB = 0;
#endif

// A bound in KiB (resident size, or its growth) that holds in Release,
// widened for a sanitized build.
constexpr uint64_t sanitizer_memory_kib(uint64_t release_kib) {
  return release_kib * kMemoryScale + kMemorySlackKiB;
}

}  // namespace surge::test
