// How much longer a test's own waits and timeouts are in a sanitized build:
// ASan+UBSan and TSan binaries (and the daemons they start) run several
// times slower, so a call timeout tuned for Release (client_stripe_io_test's
// 1 s) fires on a healthy server. The factor is cmake/SurgeTest.cmake's for
// ctest's time limits, so a timeout still means a stall, not the
// instrumentation. Header-only: every test part includes it.
#pragma once

namespace surge::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr int kTimeScale = 4;
#else
inline constexpr int kTimeScale = 1;
#endif

// A duration (std::chrono) or a count of milliseconds, scaled.
template <class T>
constexpr T sanitizer_scaled(T t) {
  return t * kTimeScale;
}

}  // namespace surge::test
