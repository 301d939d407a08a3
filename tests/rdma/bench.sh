#!/bin/bash
# bench.sh [BUILD_DIR]: Surge's RDMA transport against perftest, in ONE
# Soft-RoCE VM run, at 64 KiB and 1 MiB, and prints the ratios.
#
#   tests/rdma/bench.sh build-rdma
#
# Pairs (same VM, same rxe0, one after another):
#   Surge push (server RDMA WRITE into the client, then the reply)
#       vs ib_write_bw
#   Surge pull (server RDMA READ from the client, then the reply)
#       vs ib_read_bw
# Surge numbers come from tests/net/net_bench (BM_RpcPush / BM_RpcPull, one
# call at a time, over rdma://10.99.0.1) and perftest's from its "BW
# average" column. Under emulation without KVM the absolute numbers mean
# nothing; the ratio is the figure of merit (target >= 0.8).
#
# Environment: SURGE_BENCH_64K_ITERS / SURGE_BENCH_1M_ITERS (perftest -n,
# default 1000 / 200),
# SURGE_BENCH_MIN_TIME (net_bench --benchmark_min_time, seconds, default 3).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)

if [ "${1:-}" != "--guest" ]; then
  BUILD=$(cd "${1:-$HERE/../../build}" && pwd) || exit 2
  [ -x "$BUILD/tests/net/net_bench" ] || { echo "bench: $BUILD/tests/net/net_bench not built" >&2; exit 2; }
  exec "$HERE/vm_run.sh" --timeout 1200 -- "$HERE/bench.sh" --guest "$BUILD"
fi

BUILD=$2
PERF_64K_ITERS=${SURGE_BENCH_64K_ITERS:-1000}
PERF_MIB_ITERS=${SURGE_BENCH_1M_ITERS:-200}
MIN_TIME=${SURGE_BENCH_MIN_TIME:-3}
OUT=$(mktemp -d /tmp/surge-rdma-bench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

# perftest TOOL SIZE -> MB/s (BW average), with its own server on 10.99.0.1.
# Iteration mode (-n): under emulation a 1 MiB run in duration mode can
# finish no iteration inside its window. Default queue depths otherwise.
perftest() {
  local tool=$1 size=$2 port=$((18515 + RANDOM % 1000))
  local iters=$(( size >= 1048576 ? PERF_MIB_ITERS : PERF_64K_ITERS ))
  timeout 300 "$tool" -d rxe0 -s "$size" -n "$iters" -F -p "$port" > "$OUT/$tool-$size.server" 2>&1 &
  local spid=$! try
  # The server needs a moment to listen (slower still under load): retry.
  for try in 1 2 3 4 5 6 7 8 9 10; do
    sleep 1
    timeout 300 "$tool" -d rxe0 -s "$size" -n "$iters" -F -p "$port" 10.99.0.1 \
      > "$OUT/$tool-$size.client" 2>&1 && break
  done
  kill "$spid" 2>/dev/null
  wait "$spid" 2>/dev/null
  grep -E "^ *$size " "$OUT/$tool-$size.client" | sed "s/^/bench: $tool: /" >&2
  awk -v s="$size" '$1 == s {print $4; exit}' "$OUT/$tool-$size.client"
}

echo "bench: perftest ..." >&2
declare -A PERF
for size in 65536 1048576; do
  PERF[write-$size]=$(perftest ib_write_bw "$size")
  PERF[read-$size]=$(perftest ib_read_bw "$size")
done

echo "bench: net_bench over rdma://10.99.0.1 ..." >&2
SURGE_NET_TRANSPORT=rdma SURGE_NET_HOST=10.99.0.1 "$BUILD/tests/net/net_bench" \
  --benchmark_filter='BM_Rpc(Push|Pull)/(4096|65536|1048576)' \
  --benchmark_min_time="$MIN_TIME" --benchmark_repetitions=2 \
  --benchmark_out="$OUT/net_bench.json" --benchmark_out_format=json >&2 || {
  echo "bench: net_bench failed" >&2; exit 1; }

python3 - "$OUT/net_bench.json" "${PERF[write-65536]}" "${PERF[write-1048576]}" \
  "${PERF[read-65536]}" "${PERF[read-1048576]}" <<'EOF'
import json, sys
# The first benchmark of the process (BM_RpcPush/4096, run only as the
# warm-up) pays for server start, pool registration and connect, and a
# repetition reuses the first one's iteration count: keep the LAST
# repetition of each.
runs = {}
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    if b.get("run_type", "iteration") == "iteration":
        runs[b["run_name"] if "run_name" in b else b["name"]] = b
perf = {("write", 65536): sys.argv[2], ("write", 1048576): sys.argv[3],
        ("read", 65536): sys.argv[4], ("read", 1048576): sys.argv[5]}
print("\n%-34s %14s %14s %7s" % ("exchange", "surge MiB/s", "perftest MiB/s", "ratio"))
bad = False
for op, bench, tool in (("write", "BM_RpcPush", "ib_write_bw"), ("read", "BM_RpcPull", "ib_read_bw")):
    for size in (65536, 1048576):
        r = runs.get("%s/%d/real_time" % (bench, size))
        p = perf[(op, size)]
        if r is None or "error_message" in r or not p or float(p) <= 0:
            print("%-34s  missing (surge %s, perftest %r)" % (bench, r is not None, p)); bad = True; continue
        surge = r["bytes_per_second"] / 1048576.0  # perftest's "MB" is 2^20 bytes
        print("%-34s %14.1f %14.1f %7.2f" % ("%s %d vs %s" % (bench, size, tool), surge, float(p), surge / float(p)))
sys.exit(1 if bad else 0)
EOF
