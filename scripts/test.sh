#!/bin/bash
# The test command: installs what is missing, then runs the parts in
# SURGE_TEST_PARTS, in this order:
#   main  build/ (Release, warnings as errors) and every ctest test, the
#         RDMA ones in a Soft-RoCE VM
#   fuzz  every fuzzer for a bounded time (scripts/fuzz.sh, build-fuzz/)
#   asan  ASan+UBSan build, unit + integration + fuse (scripts/sanitize.sh)
#   tsan  TSan build, the net and client suites (scripts/sanitize.sh)
#   bash scripts/test.sh            # all four (what .ci/run runs)
#   bash scripts/test.sh -L unit    # extra args go to ctest: main part only
#   SURGE_TEST_PARTS="main fuzz" bash scripts/test.sh
# The first part that fails stops the run; docs/testing.md has how long
# each takes. A part that changes the source tree
# (a tracked file modified, or a file git does not ignore created) fails
# too: tests write under their build dir or /tmp only.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then
  PARTS=${SURGE_TEST_PARTS:-main}
else
  PARTS=${SURGE_TEST_PARTS:-main fuzz asan tsan}
fi
bash scripts/install-deps.sh
# ccache hits across clones and build dirs: paths are hashed relative to here.
export CCACHE_BASEDIR="$PWD"
# The builds here are unity builds (CMAKE_UNITY_BUILD: up to 8 sources of a
# target compiled as one), a quarter less CPU on a cold cache, where CI
# always starts; a developer's own build/ may leave it off.
# Tests run two at a time (most wait on daemons and the network more than
# they compute); the emulated VMs and the kill-and-verify stress test are
# RUN_SERIAL and run alone. SURGE_TEST_JOBS=1 runs everything serially.
export SURGE_TEST_JOBS=${SURGE_TEST_JOBS:-2}

part_main() {
  local build=${SURGE_BUILD_DIR:-build}
  # The deploy test's VM image (tests/deploy/rootfs.sh: debootstrap from
  # the mirror, minutes of downloads and unpacking but little CPU) is made
  # while the build compiles, when every test runs; deploy_test.sh then
  # finds it cached. A failure here is only reported: the test makes the
  # image again and fails loudly itself.
  local image_pid=""
  if [ $# -eq 0 ]; then
    bash tests/deploy/rootfs.sh "${SURGE_DEPLOY_CACHE:-/var/cache/surge-deploy}" \
      >/tmp/surge-deploy-image.log 2>&1 &
    image_pid=$!
  fi
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSURGE_WERROR=ON -DCMAKE_UNITY_BUILD=ON
  cmake --build "$build" -j "$(nproc)"
  if [ -n "$image_pid" ] && ! wait "$image_pid"; then
    echo "test.sh: making the deploy test's VM image failed (deploy_vm_test tries again):" >&2
    tail -20 /tmp/surge-deploy-image.log >&2
  fi
  (cd "$build" && ctest --output-on-failure --timeout 900 -j "$SURGE_TEST_JOBS" "$@")
}

# What git sees of the checkout: status, and the content of what is
# already modified (so a change to a file edited before the run counts).
tree_state() {
  git status --porcelain=v1 --untracked-files=all
  git diff HEAD --binary | sha256sum
}
in_git=0
git rev-parse --is-inside-work-tree >/dev/null 2>&1 && in_git=1

for part in $PARTS; do
  start=$(date +%s)
  echo "test.sh: part $part"
  [ "$in_git" = 1 ] && before=$(tree_state)
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
  if [ "$in_git" = 1 ] && [ "$(tree_state)" != "$before" ]; then
    echo "test.sh: part $part changed the source tree (git status before / after):" >&2
    diff <(echo "$before") <(tree_state) >&2 || true
    exit 1
  fi
  echo "test.sh: part $part passed in $(( $(date +%s) - start )) s"
done
