#!/bin/bash
# The sanitizer builds (docs/testing.md): each in its own build dir, run on
# the suites the issue asks for.
#   asan: build-asan/, gcc -fsanitize=address,undefined (SURGE_SANITIZE),
#         ctest -L 'unit|integration|fuse' (the RDMA VM tests are left out)
#   tsan: build-tsan/, gcc -fsanitize=thread (SURGE_TSAN),
#         ctest -R '^(net|client)_' -LE rdma (the transport and the client),
#         but the fault tests and the fsx test named below
#
#   bash scripts/sanitize.sh               # asan, then tsan
#   bash scripts/sanitize.sh asan          # one of them
#   bash scripts/sanitize.sh tsan -R net_  # extra args replace the default slice
#
# Both run their tests SURGE_TEST_JOBS (2) at a time, as the main part does
# (scripts/test.sh); asan is a unity build, tsan is not (see below).
#
# A finding fails the run, in the test binaries and in every daemon they
# start: ASan, UBSan (-fno-sanitize-recover) and TSan halt the process.
# ASan and TSan write their report to <build>/sanitizer-logs/, which must
# stay empty (a daemon's exit status is not always what a test looks at);
# gcc's UBSan writes to stderr only, caught in ctest's log (docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="$PWD"

run_kind() {
  local kind=$1
  shift
  local build option slice unity
  case "$kind" in
    asan)
      build=${SURGE_ASAN_BUILD_DIR:-build-asan}
      option=-DSURGE_SANITIZE=ON
      slice=(-L 'unit|integration|fuse')
      unity=ON
      ;;
    tsan)
      build=${SURGE_TSAN_BUILD_DIR:-build-tsan}
      option=-DSURGE_TSAN=ON
      # client_chain_restart_test is left out: each of its cases catches a
      # transient (a member syncing, a chain rebuilding) by polling
      # surgectl, a process start per poll, and under TSan the transient
      # ended between two polls in 3 of 6 runs of a case (docs/testing.md).
      # client_chain_failover_test and client_chain_pause_test are left
      # out for time (209 s and 140 s of the part's 892 s; the whole CI run
      # must stay under an hour): the retry and failover paths they drive
      # still run under TSan in client_chain_stall_test,
      # client_chain_cycle_test and client_failover_test. All three run in
      # main and under ASan. client_mds_failover_test and
      # client_mds_shared_map_test are left out as the mds_ etcd tests
      # are: their etcd harness and the daemons' etcd backend run gRPC
      # and abseil, which are not instrumented, and TSan reports abseil's
      # own synchronisation as races (seen 5 Dec 2026, in
      # absl::GraphCycles::GetId); they run in main and under ASan.
      # Also left out for time (7 Dec 2026: the whole command had grown to
      # 66 min in CI; 397 s of this part's 960 s of tests, measured here):
      # the fault tests whose threads other fault tests here already drive,
      # client_chain_(order|rebalance|drain|truncate)_test (chain resync
      # and forwarding: client_chain_rebuild_test, _stall_test stay) and
      # client_ec_(lost_delta|parity_rebuild|restart|truncate)_test (EC
      # rebuild, roll forward and deltas to a SYNCING member:
      # client_ec_rebuild_test and _degraded_test stay), and
      # client_fsx_mount_test (one fsx process; surge-fuse's threads run
      # under TSan in client_posix_mount_test and
      # client_mount_resources_test). All run in main; the fsx test under
      # ASan too.
      slice=(-R '^(net|client)_'
        -E '^client_(chain_(restart|failover|pause|order|rebalance|drain|truncate)|ec_(lost_delta|parity_rebuild|restart|truncate)|fsx_mount|mds_(failover|shared_map))_test$'
        -LE rdma)
      # Not a unity build: on 4 Dec 2026 the unity TSan build gave 10
      # reports in the daemons where the plain build of the same code gave
      # none, each a string RocksDB allocated for a WriteBatch in one
      # thread and appended to in another, with no rocksdb:: frame left in
      # either access's stack, so race:rocksdb:: (RocksDB synchronises its
      # write groups inside the uninstrumented library) no longer matched.
      # Not yet explained further (docs/testing.md).
      unity=OFF
      ;;
    *)
      echo "sanitize: unknown kind '$kind' (asan or tsan)" >&2
      exit 2
      ;;
  esac
  [ $# -gt 0 ] && slice=("$@")
  # -O1 with line tables: readable reports, a build much quicker than -O3.
  # -fdebug-prefix-map: with debug info ccache hashes the build dir's
  # absolute path unless it is mapped away, so without it a fresh clone
  # (CI) never hits the objects of an earlier clone (docs/testing.md).
  local flags="-O1 -g1 -DNDEBUG -fdebug-prefix-map=$PWD=."
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$flags" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$flags" \
    -DSURGE_WERROR=ON "-DCMAKE_UNITY_BUILD=$unity" "$option"
  # Only what the slice runs: its test binaries (their daemons come with
  # them, tests/*/CMakeLists.txt add_dependencies) and the daemons. A test
  # is named by its binary, or runs another test's binary again
  # (surge_test_run): the binary is what ctest -V shows as its command, or,
  # before it is built, the executable ctest says it could not find.
  local tests targets=() known
  tests=$(cd "$build" && ctest -N -V "${slice[@]}" 2>&1 |
    sed -n -e 's/^Could not find executable \([^ ]*\).*/\1/p' \
      -e 's/^[0-9]*: Test command: \([^ ][^ ]*\).*/\1/p' | xargs -r -n1 basename | sort -u)
  known=$(ninja -C "$build" -t targets all | sed 's/:.*//')
  for t in $tests surge-mds surge-ods surge-fuse; do
    grep -qxF "$t" <<<"$known" && targets+=("$t")
  done
  if [ ${#targets[@]} -eq 0 ]; then
    echo "sanitize: $kind: no test of '${slice[*]}' is a build target" >&2
    return 1
  fi
  cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

  local logs="$PWD/$build/sanitizer-logs"
  rm -rf "$logs"
  mkdir -p "$logs"
  local supp="$PWD/tests/sanitizers"
  # quarantine_size_mb: freed chunks ASan holds back (256 MiB by default)
  # count in a daemon's resident size; the memory bounds of the tests allow
  # for 32 (tests/common/memory_bound.h).
  export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:quarantine_size_mb=32:log_path=$logs/asan:suppressions=$supp/asan.supp"
  export LSAN_OPTIONS="suppressions=$supp/lsan.supp"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$logs/ubsan:suppressions=$supp/ubsan.supp"
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=4:log_path=$logs/tsan:suppressions=$supp/tsan.supp"
  local rc=0
  (cd "$build" && ctest --output-on-failure --timeout 1800 -j "${SURGE_TEST_JOBS:-2}" "${slice[@]}") || rc=$?
  if compgen -G "$logs/*" >/dev/null; then
    echo "sanitize: $kind: reports in $logs:"
    for f in "$logs"/*; do
      echo "==== $f"
      head -n 80 "$f"
    done
    rc=1
  fi
  # gcc's UBSan beside ASan ignores log_path and writes to stderr: a test
  # binary's report is in ctest's log (a daemon's only in its own log, so
  # it fails the run when its test notices the daemon exiting).
  local ctest_log="$build/Testing/Temporary/LastTest.log"
  if [ -f "$ctest_log" ] && grep -q "runtime error:" "$ctest_log"; then
    echo "sanitize: $kind: UBSan reports in $ctest_log:"
    grep -m 20 -A 4 "runtime error:" "$ctest_log"
    rc=1
  fi
  if [ $rc -ne 0 ]; then
    echo "sanitize: $kind FAILED"
    return 1
  fi
  echo "sanitize: $kind: no findings"
}

if [ $# -eq 0 ]; then
  run_kind asan
  run_kind tsan
else
  run_kind "$@"
fi
