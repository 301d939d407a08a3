#!/bin/bash
# Erasure coding's cost, in one run on loopback (issue 16): a local cluster
# (1 MDS, 6 data servers with their object stores on tmpfs), then libsurge
# (surge-bench --api native) writing fresh files and reading them back, as
# IOR does, 1 MiB transfers, JOBS tasks (file per task), in four
# directories:
#   r1   setstripe --replicas 1 --count 6: one copy
#   r3   setstripe --replicas 3 --count 6: three copies, through the head
#   ec   setstripe --ec 4+2 --count 2 (256 KiB units, the default with
#        --ec: a 1 MiB write is one whole stripe group, whose parity the
#        client encodes and sends itself; docs/redundancy.md "EC writes:
#        full groups")
#   ec1m setstripe --ec 4+2 --count 2 --size 1m: every 1 MiB write is one
#        unit of a group, a parity delta from its data position to both
#        parity positions (the partial-group path)
# then r1 and ec with 16 MiB transfers, and through the FUSE mount with 1
# MiB ones (surge-bench --api posix), then IOR-hard-like writes and reads
# (JOBS tasks interleaving 47,008-byte records in one shared file) in r1
# and ec, then degraded reads and writes: files written to /ecdeg and
# kept, read back and written over
# (healthy), then data server 0 killed (it holds a position of every EC
# chain) and the same by a fresh client: reads rebuild its positions from
# K others, writes of its data positions go to their stand-ins; and fresh
# files written and read in /ecfresh the same way, healthy and with the
# server killed (placed on chains with its position out: K + 1 serve).
# Each figure is the best of REPEAT runs (other load only makes a run slower).
#   SIZE=1g JOBS=2 REPEAT=3 bash tests/client/bench_ec.sh [BUILD_DIR]
# Needs root (tmpfs).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=$(readlink -f "${1:-${SURGE_BUILD_DIR:-build}}")
SIZE=${SIZE:-1g}
JOBS=${JOBS:-2}
REPEAT=${REPEAT:-3}
PORT=${PORT:-7360}
DIR=$(mktemp -d /var/tmp/surge-bench-ec.XXXXXX)
CLUSTER="tools/surge-local-cluster"
KEY=$DIR/cluster.key
MDS=tcp://127.0.0.1:$PORT
cleanup() {
  "$CLUSTER" stop --dir "$DIR" >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT

bytes() {  # 1g -> bytes
  local v=${1%[kKmMgG]} u=${1: -1}
  case $u in k|K) echo $((v << 10)) ;; m|M) echo $((v << 20)) ;; g|G) echo $((v << 30)) ;; *) echo "$1" ;; esac
}
per=$(($(bytes "$SIZE") / JOBS))
"$CLUSTER" start --dir "$DIR" --build "$BUILD" --port "$PORT" --ods 6 --tmpfs 12g >/dev/null
echo "cluster up in $DIR (6 data servers, object stores on tmpfs); $SIZE per phase over $JOBS tasks"
ctl() { "$BUILD/tools/surgectl" --mds "$MDS" --key-file "$KEY" "$@"; }
for d in r1 r3 ec ec1m ecdeg ecfresh; do mkdir -p "$DIR/mnt/$d"; done
ctl setstripe --size 1048576 --count 6 --replicas 1 /r1
ctl setstripe --size 1048576 --count 6 --replicas 3 /r3
ctl setstripe --count 2 --ec 4+2 /ec
ctl setstripe --size 1048576 --count 2 --ec 4+2 /ec1m
ctl setstripe --count 2 --ec 4+2 /ecdeg
ctl setstripe --count 2 --ec 4+2 /ecfresh

bench() {  # dir [flags]; TRANSFER (1m by default) sets the transfer size
  local d=$1
  shift
  "$BUILD/tools/surge-bench" --api native --mds "$MDS" --key-file "$KEY" -o "/$d" \
    -t "${TRANSFER:-1m}" -b "$per" -n "$JOBS" -F --no-progress --json "$@"
}
# Removed files' chunks go in the background (the MDS's orphan collector):
# each run starts on stores as empty as at the start (six chunk indexes
# and logs take some space of their own).
used_mib() { df --output=used -B1M "$DIR/tmpfs" | tail -1 | tr -d ' '; }
BASE=$(used_mib)
wait_space_back() {
  local used i
  for i in $(seq 1 600); do
    used=$(used_mib)
    [ "$used" -lt $((BASE + 64)) ] && return 0
    sleep 0.2
  done
  echo "bench_ec: the tmpfs still holds ${used} MiB (${BASE} at the start) two minutes after the files were removed" >&2
  return 1
}
declare -A R
keep_best() {  # key value
  R[$1]=$(awk -v a="${R[$1]:-0}" -v b="$2" 'BEGIN { print (b > a) ? b : a }')
}
rate() {  # json phase
  echo "$1" | sed -n "s/.*\"phase\":\"$2\"[^}]*\"mib_per_s\":\([0-9.]*\).*/\1/p"
}
# ONLY_DEGRADED=1: the degraded part alone.
MAIN_REPEAT=$REPEAT
[ "${ONLY_DEGRADED:-0}" = 1 ] && MAIN_REPEAT=0
# One run of fresh files on stores as empty as at the start: the command
# (a surge-bench --json run) and its write and read rates kept as KEY,w
# and KEY,r.
measure() {  # KEY WHAT COMMAND...
  local key=$1 what=$2 out
  shift 2
  wait_space_back
  out=$("$@") || { echo "bench_ec: $what failed: $out" >&2; exit 1; }
  keep_best "$key,w" "$(rate "$out" write)"
  keep_best "$key,r" "$(rate "$out" read)"
}
mount_bench() {  # dir: through the FUSE mount, as bench() does through libsurge
  "$BUILD/tools/surge-bench" --api posix -o "$DIR/mnt/$1" -t 1m -b "$per" -n "$JOBS" -F -e \
    --no-progress --json
}
for _ in $(seq 1 "$MAIN_REPEAT"); do
  for d in r1 r3 ec ec1m; do measure "$d" "surge-bench in /$d" bench "$d" -e; done
done
# 16 MiB transfers (two 1 MiB windows of each EC data chunk per write).
for _ in $(seq 1 "$MAIN_REPEAT"); do
  for d in r1 ec; do TRANSFER=16m measure "big-$d" "16 MiB transfers in /$d" bench "$d" -e; done
done
# Through the mount (surge-fuse's write behind keeps several batches of a
# file in flight): fresh files in r1 and ec, the same sizes.
for _ in $(seq 1 "$MAIN_REPEAT"); do
  for d in r1 ec; do measure "mnt-$d" "surge-bench through the mount in /$d" mount_bench "$d"; done
done
# IOR hard: 47,008-byte records, task t's j-th at (j * JOBS + t) * 47008.
hard_per=$(( (per / 47008) * 47008 ))
hard_bench() {  # dir
  "$BUILD/tools/surge-bench" --api native --mds "$MDS" --key-file "$KEY" -o "/$1" \
    -t 47008 -b "$hard_per" -n "$JOBS" --interleaved -e --no-progress --json
}
for _ in $(seq 1 "$MAIN_REPEAT"); do
  for d in r1 ec; do measure "hard-$d" "IOR-hard-like run in /$d" hard_bench "$d"; done
done
# Degraded: written once and kept, read healthy, then with a server gone.
wait_space_back
out=$(bench ecdeg -w -e -k) || { echo "bench_ec: writing /ecdeg failed: $out" >&2; exit 1; }
BASE=$(used_mib)  # the kept files stay
for _ in $(seq 1 "$REPEAT"); do
  out=$(bench ecdeg -r -k) || { echo "bench_ec: reading /ecdeg failed: $out" >&2; exit 1; }
  keep_best "deg,healthy" "$(rate "$out" read)"
  out=$(bench ecdeg -w -e -k) || { echo "bench_ec: writing over /ecdeg failed: $out" >&2; exit 1; }
  keep_best "deg,healthy-w" "$(rate "$out" write)"
  wait_space_back
  out=$(bench ecfresh -e) || { echo "bench_ec: fresh files in /ecfresh failed: $out" >&2; exit 1; }
  keep_best "fresh,healthy-w" "$(rate "$out" write)"
  keep_best "fresh,healthy" "$(rate "$out" read)"
done
kill -KILL "$(cat "$DIR/run/ods0.pid")"
for _ in $(seq 1 "$REPEAT"); do
  out=$(bench ecdeg -r -k) || { echo "bench_ec: degraded read of /ecdeg failed: $out" >&2; exit 1; }
  keep_best "deg,degraded" "$(rate "$out" read)"
  out=$(bench ecdeg -w -e -k) ||
    { echo "bench_ec: degraded write over /ecdeg failed: $out" >&2; exit 1; }
  keep_best "deg,degraded-w" "$(rate "$out" write)"
  # No wait for the space here: the killed server's chunks of removed
  # files stay orphans until it returns.
  out=$(bench ecfresh -e) ||
    { echo "bench_ec: fresh files in /ecfresh with a server down failed: $out" >&2; exit 1; }
  keep_best "fresh,degraded-w" "$(rate "$out" write)"
  keep_best "fresh,degraded" "$(rate "$out" read)"
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
echo
printf "%-30s %12s %12s\n" "fresh files, $JOBS tasks" "write MiB/s" "read MiB/s"
for d in r1 r3 ec ec1m; do printf "%-30s %12s %12s\n" "$d" "${R[$d,w]:-}" "${R[$d,r]:-}"; done
printf "%-30s %12s %12s\n" "ec / r1" "$(ratio "${R[ec,w]:-0}" "${R[r1,w]:-0}")" "$(ratio "${R[ec,r]:-0}" "${R[r1,r]:-0}")"
printf "%-30s %12s %12s\n" "ec / r3" "$(ratio "${R[ec,w]:-0}" "${R[r3,w]:-0}")" "$(ratio "${R[ec,r]:-0}" "${R[r3,r]:-0}")"
printf "%-30s %12s %12s\n" "ec1m / r1" "$(ratio "${R[ec1m,w]:-0}" "${R[r1,w]:-0}")" "$(ratio "${R[ec1m,r]:-0}" "${R[r1,r]:-0}")"
printf "%-30s %12s %12s\n" "r1, 16 MiB transfers" "${R[big-r1,w]:-0}" "${R[big-r1,r]:-0}"
printf "%-30s %12s %12s\n" "ec, 16 MiB transfers" "${R[big-ec,w]:-0}" "${R[big-ec,r]:-0}"
printf "%-30s %12s %12s\n" "ec / r1, 16 MiB transfers" "$(ratio "${R[big-ec,w]:-0}" "${R[big-r1,w]:-0}")" \
  "$(ratio "${R[big-ec,r]:-0}" "${R[big-r1,r]:-0}")"
printf "%-30s %12s %12s\n" "mount r1" "${R[mnt-r1,w]:-0}" "${R[mnt-r1,r]:-0}"
printf "%-30s %12s %12s\n" "mount ec" "${R[mnt-ec,w]:-0}" "${R[mnt-ec,r]:-0}"
printf "%-30s %12s %12s\n" "mount ec / r1" "$(ratio "${R[mnt-ec,w]:-0}" "${R[mnt-r1,w]:-0}")" \
  "$(ratio "${R[mnt-ec,r]:-0}" "${R[mnt-r1,r]:-0}")"
printf "%-30s %12s %12s\n" "IOR-hard-like r1" "${R[hard-r1,w]:-0}" "${R[hard-r1,r]:-0}"
printf "%-30s %12s %12s\n" "IOR-hard-like ec" "${R[hard-ec,w]:-0}" "${R[hard-ec,r]:-0}"
printf "%-30s %12s %12s\n" "IOR-hard-like ec / r1" "$(ratio "${R[hard-ec,w]:-0}" "${R[hard-r1,w]:-0}")" \
  "$(ratio "${R[hard-ec,r]:-0}" "${R[hard-r1,r]:-0}")"
printf "%-30s %12s %12s\n" "ec kept files, healthy" "${R[deg,healthy-w]:-0}" "${R[deg,healthy]:-0}"
printf "%-30s %12s %12s\n" "ec, data server 0 killed" "${R[deg,degraded-w]:-0}" "${R[deg,degraded]:-0}"
printf "%-30s %12s %12s\n" "degraded / healthy" "$(ratio "${R[deg,degraded-w]:-0}" "${R[deg,healthy-w]:-0}")" \
  "$(ratio "${R[deg,degraded]:-0}" "${R[deg,healthy]:-0}")"
printf "%-30s %12s %12s\n" "ec fresh files, healthy" "${R[fresh,healthy-w]:-0}" "${R[fresh,healthy]:-0}"
printf "%-30s %12s %12s\n" "ec fresh, server 0 killed" "${R[fresh,degraded-w]:-0}" "${R[fresh,degraded]:-0}"
printf "%-30s %12s %12s\n" "degraded / healthy" "$(ratio "${R[fresh,degraded-w]:-0}" "${R[fresh,healthy-w]:-0}")" \
  "$(ratio "${R[fresh,degraded]:-0}" "${R[fresh,healthy]:-0}")"
