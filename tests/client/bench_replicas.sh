#!/bin/bash
# Replication's cost, in one run on loopback: a local cluster (1 MDS,
# 3 data servers with their object stores on tmpfs), then libsurge
# (surge-bench --api native) writing fresh files and reading them back, as
# IOR does, 1 MiB transfers, JOBS tasks (file per task), in three
# directories of 1 MiB x 3 stripes:
#   f1   no scheme: format 1 layouts, one copy (what every file was before chains)
#   r1   setstripe --replicas 1: one-member chains
#   r2   setstripe --replicas 2: every byte stored twice, through the head
# then the time from a SIGKILL of a data server under a replicas-2 writer to
# its first IO served again (the client logs "served again after N ms").
# Each figure is the best of REPEAT runs (other load only makes a run slower).
#   SIZE=1g JOBS=2 REPEAT=3 bash tests/client/bench_replicas.sh [BUILD_DIR]
# DIRS="f1" runs only the format 1 case (a build from before chains).
# Needs root (tmpfs).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=$(readlink -f "${1:-${SURGE_BUILD_DIR:-build}}")
SIZE=${SIZE:-1g}
JOBS=${JOBS:-2}
REPEAT=${REPEAT:-3}
PORT=${PORT:-7340}
DIRS=${DIRS:-f1 r1 r2}
KILL=${KILL:-1}
DIR=$(mktemp -d /var/tmp/surge-bench-replicas.XXXXXX)
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
"$CLUSTER" start --dir "$DIR" --build "$BUILD" --port "$PORT" --tmpfs 8g >/dev/null
echo "cluster up in $DIR (object stores on tmpfs); $SIZE per phase over $JOBS tasks"
ctl() { "$BUILD/tools/surgectl" --mds "$MDS" --key-file "$KEY" "$@"; }
for d in $DIRS; do
  mkdir -p "$DIR/mnt/$d"
  case $d in
    f1) ctl setstripe --size 1048576 --count 3 "/$d" ;;
    r*) ctl setstripe --size 1048576 --count 3 --replicas "${d#r}" "/$d" ;;
  esac
done

bench() {  # dir [flags]
  local d=$1
  shift
  "$BUILD/tools/surge-bench" --api native --mds "$MDS" --key-file "$KEY" -o "/$d" -t 1m \
    -b "$per" -n "$JOBS" -F --no-progress --json "$@"
}
# The files of a run are unlinked at its end and their chunks removed by
# the MDS's orphan collector in the background (not before its startup
# grace, 30 s after the MDS starts). Each run starts on empty stores, so a
# repeat neither meets ENOSPC on the tmpfs nor competes with those removals.
wait_space_back() {
  local used i
  for i in $(seq 1 600); do
    used=$(df --output=used -B1M "$DIR/tmpfs" | tail -1 | tr -d ' ')
    [ "$used" -lt 64 ] && return 0
    sleep 0.2
  done
  echo "bench_replicas: the tmpfs still holds ${used} MiB two minutes after the files were removed" >&2
  return 1
}
declare -A R
keep_best() {  # key value
  R[$1]=$(awk -v a="${R[$1]:-0}" -v b="$2" 'BEGIN { print (b > a) ? b : a }')
}
for _ in $(seq 1 "$REPEAT"); do
  for d in $DIRS; do
    wait_space_back
    out=$(bench "$d" -e) || {
      echo "bench_replicas: surge-bench in /$d failed: $out" >&2
      exit 1
    }
    keep_best "$d,w" "$(echo "$out" | sed -n 's/.*"phase":"write"[^}]*"mib_per_s":\([0-9.]*\).*/\1/p')"
    keep_best "$d,r" "$(echo "$out" | sed -n 's/.*"phase":"read"[^}]*"mib_per_s":\([0-9.]*\).*/\1/p')"
  done
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
echo
printf "%-22s %12s %12s\n" "fresh files, $JOBS tasks" "write MiB/s" "read MiB/s"
for d in $DIRS; do
  printf "%-22s %12s %12s\n" "$d" "${R[$d,w]}" "${R[$d,r]}"
done
case " $DIRS " in
  *" r1 "*" r2 "*)
    printf "%-22s %12s %12s\n" "r2 / r1" "$(ratio "${R[r2,w]}" "${R[r1,w]}")" \
      "$(ratio "${R[r2,r]}" "${R[r1,r]}")" ;;
esac
case " $DIRS " in
  *" f1 "*" r1 "*)
    printf "%-22s %12s %12s\n" "r1 / f1" "$(ratio "${R[r1,w]}" "${R[f1,w]}")" \
      "$(ratio "${R[r1,r]}" "${R[f1,r]}")" ;;
esac

# -- kill to first retry served ---------------------------------------------
if [ "$KILL" = 1 ] && [[ " $DIRS " == *" r2 "* ]]; then
  log=$DIR/kill-bench.log
  "$BUILD/tools/surge-bench" --api native --mds "$MDS" --key-file "$KEY" -o /r2 -t 1m \
    -b "$per" -n "$JOBS" -F -w --no-progress 2>"$log" >/dev/null &
  bpid=$!
  sleep 1
  pid=$(cat "$DIR/run/ods1.pid")
  killed=$(date +%s.%N)
  kill -KILL "$pid"
  wait "$bpid" && rc=0 || rc=$?
  first=$(grep -m1 'served again' "$log" | awk '{ print $1 }' || true)
  if [ -n "$first" ]; then
    at=$(date -d "${first/T/ }" +%s.%N)
    echo "kill of data server 1 under a replicas-2 writer: write phase rc=$rc," \
      "first IO served again $(awk -v a="$at" -v b="$killed" 'BEGIN { printf "%.0f", (a - b) * 1000 }') ms after the kill"
    grep -m1 'served again' "$log"
  else
    echo "kill: no retry was logged (rc=$rc); log:"
    tail -5 "$log"
  fi
fi
