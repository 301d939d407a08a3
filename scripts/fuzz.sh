#!/bin/bash
# The fuzzers (tests/fuzz/README.md): builds them with Debian's clang in
# build-fuzz/ (-DSURGE_FUZZ=ON: libFuzzer + ASan + UBSan) and runs each for
# a bounded time, first over its committed corpus (tests/fuzz/corpus/NAME/,
# the regressions included). Any crash, sanitizer report, leak, timeout
# (an input taking over 30 s) or out-of-memory fails the run; the input
# that did it is saved under build-fuzz/findings/.
#   bash scripts/fuzz.sh                    # every fuzzer, SURGE_FUZZ_SECONDS (45) each
#   bash scripts/fuzz.sh frame_fuzzer ...   # only these
#   SURGE_FUZZ_SECONDS=600 bash scripts/fuzz.sh tcp_server_fuzzer
#   bash scripts/fuzz.sh --seeds            # rewrite the generated seeds in tests/fuzz/corpus/
# Fuzzers run SURGE_FUZZ_JOBS (default: the number of cores) at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="$PWD"
BUILD=${SURGE_FUZZ_BUILD_DIR:-build-fuzz}
SECONDS_EACH=${SURGE_FUZZ_SECONDS:-45}
JOBS=${SURGE_FUZZ_JOBS:-$(nproc)}

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  # -fdebug-prefix-map: so ccache does not hash the clone's path (-g1), and
  # a fresh clone hits the objects of an earlier one (docs/testing.md).
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -fdebug-prefix-map=$PWD=." \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -fdebug-prefix-map=$PWD=." \
    -DSURGE_FUZZ=ON -DSURGE_BUILD_TESTS=OFF -DSURGE_WERROR=ON -DCMAKE_UNITY_BUILD=ON
fi
cmake --build "$BUILD" -j "$(nproc)" --target fuzzers

ALL=$(sed -n 's/^surge_fuzzer(\([a-z_]*\).*/\1/p' tests/fuzz/CMakeLists.txt)

if [ "${1:-}" = "--seeds" ]; then
  for f in $ALL; do
    SURGE_FUZZ_WRITE_SEEDS="tests/fuzz/corpus/$f" "$BUILD/tests/fuzz/$f"
    echo "fuzz: seeds of $f in tests/fuzz/corpus/$f"
  done
  exit 0
fi

WANT=${*:-$ALL}
# A sanitizer report is fatal; libFuzzer turns it into a saved input.
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/sanitizers/lsan.supp}
mkdir -p "$BUILD/findings" "$BUILD/logs"

run_one() {
  local f=$1
  local work="$BUILD/corpus/$f"  # new inputs land here, not in the checkout
  mkdir -p "$work"
  local extra=()
  # RocksDB's caches make most inputs look like leaks to libFuzzer's
  # per-input check, which then runs LSan each time (8x fewer inputs);
  # leaks still fail the run through LSan at exit.
  [ "$f" = mds_rpc_fuzzer ] && extra+=(-detect_leaks=0)
  if "$BUILD/tests/fuzz/$f" "$work" "tests/fuzz/corpus/$f" -max_total_time="$SECONDS_EACH" \
      "${extra[@]}" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$BUILD/findings/$f-" >"$BUILD/logs/$f.log" 2>&1; then
    echo "fuzz: $f ok ($(grep -o 'stat::number_of_executed_units: [0-9]*' "$BUILD/logs/$f.log" | grep -o '[0-9]*$') inputs in ${SECONDS_EACH} s)"
  else
    echo "fuzz: $f FAILED (log: $BUILD/logs/$f.log, input: $BUILD/findings/$f-*)"
    tail -n 60 "$BUILD/logs/$f.log"
    return 1
  fi
}

failed=()
pids=()
names=()
for f in $WANT; do
  if [ ! -x "$BUILD/tests/fuzz/$f" ]; then
    echo "fuzz: no fuzzer named $f (have: $ALL)" >&2
    exit 2
  fi
  run_one "$f" &
  pids+=($!)
  names+=("$f")
  if [ ${#pids[@]} -ge "$JOBS" ]; then
    wait "${pids[0]}" || failed+=("${names[0]}")
    pids=("${pids[@]:1}")
    names=("${names[@]:1}")
  fi
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || failed+=("${names[$i]}")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}"
  exit 1
fi
echo "fuzz: every fuzzer ran ${SECONDS_EACH} s without a finding"
