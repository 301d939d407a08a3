#!/bin/bash
# The test command: installs what is missing, then runs the parts in
# SURGE_TEST_PARTS, in this order:
#   main  build/ (Release, warnings as errors) and every ctest test, the
#         RDMA ones in a Soft-RoCE VM
#   fuzz  every fuzzer for a bounded time (scripts/fuzz.sh, build-fuzz/)
#   asan  ASan+UBSan build, unit + integration + fuse (scripts/sanitize.sh)
#   tsan  TSan build, the net and client suites (scripts/sanitize.sh)
#   bash scripts/test.sh            # main and fuzz (what .ci/run runs)
#   bash scripts/test.sh -L unit    # extra args go to ctest: main part only
#   SURGE_TEST_PARTS="main fuzz asan tsan" bash scripts/test.sh
# The first part that fails stops the run. asan and tsan are not yet in the
# default: docs/testing.md says why.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then
  PARTS=${SURGE_TEST_PARTS:-main}
else
  PARTS=${SURGE_TEST_PARTS:-main fuzz}
fi
bash scripts/install-deps.sh
# ccache hits across clones and build dirs: paths are hashed relative to here.
export CCACHE_BASEDIR="$PWD"

part_main() {
  local build=${SURGE_BUILD_DIR:-build}
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSURGE_WERROR=ON
  cmake --build "$build" -j "$(nproc)"
  (cd "$build" && ctest --output-on-failure --timeout 900 "$@")
}

for part in $PARTS; do
  start=$(date +%s)
  echo "test.sh: part $part"
  case "$part" in
    main) part_main "$@" ;;
    fuzz) bash scripts/fuzz.sh ;;
    asan) bash scripts/sanitize.sh asan ;;
    tsan) bash scripts/sanitize.sh tsan ;;
    *)
      echo "test.sh: unknown part '$part' (main fuzz asan tsan)" >&2
      exit 2
      ;;
  esac
  echo "test.sh: part $part passed in $(( $(date +%s) - start )) s"
done
