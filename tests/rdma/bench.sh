#!/bin/bash
# bench.sh [BUILD_DIR]: Surge's RDMA transport against perftest, in ONE
# Soft-RoCE VM run, at 64 KiB and 1 MiB, and prints the ratios.
#
#   tests/rdma/bench.sh build-rdma
#
# Pairs (same VM, same rxe0):
#   Surge push (server RDMA WRITE into the client, then the reply)
#       vs ib_write_bw
#   Surge pull (server RDMA READ from the client, then the reply)
#       vs ib_read_bw
# Surge is measured two ways with tests/net/net_bench over rdma://10.99.0.1:
#   * one call at a time (BM_RpcPush / BM_RpcPull): latency-bound;
#   * QD calls in flight on the one channel (BM_RpcPushQD / BM_RpcPullQD:
#     16 at both sizes, and 64 at 64 KiB, nearer perftest's own 128), the
#     way the striped client drives a data server.
# perftest runs with its own defaults (ib_write_bw: TX depth 128;
# ib_read_bw: TX depth 128 and as many outstanding READs as the device
# allows); the depths it reports are printed next to the figures.
#
# The machine is shared and emulation is slow, so the runs are interleaved:
# ROUNDS rounds, each running perftest then net_bench back to back, and the
# ratio of each round is computed from that round's own pair. The table
# shows the median ratio and the range over the rounds. Under emulation
# without KVM the absolute numbers mean nothing; the ratio is the figure of
# merit (target >= 0.8).
#
# Environment: SURGE_BENCH_ROUNDS (default 3),
# SURGE_BENCH_64K_ITERS / SURGE_BENCH_1M_ITERS (perftest -n, default
# 1000 / 200), SURGE_BENCH_MIN_TIME (net_bench --benchmark_min_time, s, 2).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)

if [ "${1:-}" != "--guest" ]; then
  BUILD=$(cd "${1:-$HERE/../../build}" && pwd) || exit 2
  [ -x "$BUILD/tests/net/net_bench" ] || { echo "bench: $BUILD/tests/net/net_bench not built" >&2; exit 2; }
  exec "$HERE/vm_run.sh" --timeout 1800 -- "$HERE/bench.sh" --guest "$BUILD"
fi

BUILD=$2
ROUNDS=${SURGE_BENCH_ROUNDS:-3}
PERF_64K_ITERS=${SURGE_BENCH_64K_ITERS:-1000}
PERF_MIB_ITERS=${SURGE_BENCH_1M_ITERS:-200}
MIN_TIME=${SURGE_BENCH_MIN_TIME:-2}
OUT=$(mktemp -d /tmp/surge-rdma-bench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

# perftest ROUND TOOL SIZE: runs it with its own server on 10.99.0.1 and
# leaves the client's output in $OUT. Iteration mode (-n): under emulation
# a 1 MiB run in duration mode can finish no iteration inside its window.
# Default queue depths otherwise.
perftest() {
  local round=$1 tool=$2 size=$3 port=$((18515 + RANDOM % 1000))
  local iters=$(( size >= 1048576 ? PERF_MIB_ITERS : PERF_64K_ITERS ))
  local out="$OUT/$tool-$size-$round.client"
  timeout 300 "$tool" -d rxe0 -s "$size" -n "$iters" -F -p "$port" > "$OUT/$tool-$size.server" 2>&1 &
  local spid=$! try
  # The server needs a moment to listen (slower still under load): retry.
  for try in 1 2 3 4 5 6 7 8 9 10; do
    sleep 1
    timeout 300 "$tool" -d rxe0 -s "$size" -n "$iters" -F -p "$port" 10.99.0.1 > "$out" 2>&1 && break
  done
  kill "$spid" 2>/dev/null
  wait "$spid" 2>/dev/null
  grep -E "^ *$size " "$out" | sed "s/^/bench: round $round: $tool: /" >&2
}

FILTER="BM_Rpc(Push|Pull)/(4096|65536|1048576)/|BM_Rpc(Push|Pull)QD/(65536/(16|64)|1048576/16)/"
for round in $(seq 1 "$ROUNDS"); do
  echo "bench: round $round of $ROUNDS: perftest ..." >&2
  for size in 65536 1048576; do
    perftest "$round" ib_write_bw "$size"
    perftest "$round" ib_read_bw "$size"
  done
  echo "bench: round $round of $ROUNDS: net_bench over rdma://10.99.0.1 ..." >&2
  # BM_RpcPush/4096 comes first and only warms up (server start, pool
  # registration, connect).
  SURGE_NET_TRANSPORT=rdma SURGE_NET_HOST=10.99.0.1 "$BUILD/tests/net/net_bench" \
    --benchmark_filter="$FILTER" --benchmark_min_time="$MIN_TIME" --benchmark_repetitions=1 \
    --benchmark_out="$OUT/net_bench-$round.json" --benchmark_out_format=json >&2 || {
    echo "bench: net_bench failed" >&2; exit 1; }
done

python3 - "$OUT" "$ROUNDS" <<'EOF'
import json, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])

def perf(tool, size, r):
    """perftest's BW average (MiB/s) and the depths it ran with."""
    try:
        text = open("%s/%s-%d-%d.client" % (out, tool, size, r)).read()
    except OSError:
        return None, ""
    bw = None
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 4 and f[0] == str(size):
            bw = float(f[3])
    depth = []
    for key in ("TX depth", "Outstand reads"):
        m = re.search(r"%s\s*:\s*(\d+)" % key, text)
        if m:
            depth.append("%s %s" % (key, m.group(1)))
    return bw, ", ".join(depth)

def surge(r):
    runs = {}
    try:
        for b in json.load(open("%s/net_bench-%d.json" % (out, r)))["benchmarks"]:
            if b.get("run_type", "iteration") == "iteration" and "error_message" not in b:
                runs[b.get("run_name", b["name"])] = (b["bytes_per_second"] / 1048576.0,
                                                      b.get("csw", 0.0))
    except (OSError, ValueError, KeyError):
        pass
    return runs

rows = []
for op, bench, tool in (("push", "BM_RpcPush", "ib_write_bw"), ("pull", "BM_RpcPull", "ib_read_bw")):
    for size in (65536, 1048576):
        rows.append((op, size, tool, "1 at a time", "%s/%d/real_time" % (bench, size)))
        for qd in ((16, 64) if size == 65536 else (16,)):
            rows.append((op, size, tool, "QD %d" % qd, "%sQD/%d/%d/real_time" % (bench, size, qd)))

print("\nSurge over rdma://10.99.0.1 vs perftest, %d interleaved rounds "
      "(median ratio, [min..max]; MiB/s medians)" % rounds)
print("(csw: context switches per Surge call, all threads of client and server)")
print("%-5s %8s %-12s %-11s %10s %10s %7s  %-12s %5s  %s" %
      ("op", "size", "vs", "surge", "surge", "perftest", "ratio", "range", "csw", "perftest depth"))
bad = False
depths = {}
for op, size, tool, label, name in rows:
    ratios, s_all, p_all, csw = [], [], [], []
    for r in range(1, rounds + 1):
        p, d = perf(tool, size, r)
        s, c = surge(r).get(name, (None, None))
        if d:
            depths[(tool, size)] = d
        if p and s:
            ratios.append(s / p); s_all.append(s); p_all.append(p); csw.append(c)
    if not ratios:
        print("%-5s %8d %-12s %-11s  missing" % (op, size, tool, label)); bad = True; continue
    print("%-5s %8d %-12s %-11s %10.1f %10.1f %7.2f  [%.2f..%.2f] %5.1f  %s" %
          (op, size, tool, label, statistics.median(s_all), statistics.median(p_all),
           statistics.median(ratios), min(ratios), max(ratios), statistics.median(csw),
           depths.get((tool, size), "?")))
sys.exit(1 if bad else 0)
EOF
