#!/bin/bash
# Metadata rates through mounts with one and with two MDS serving one file
# system from etcd, in one run: surge-local-cluster --mds-backend etcd
# --mds N (3 data servers and a 3-member etcd, everything on tmpfs), a
# second mount, and surge-bench --mode md -n 1 --files FILES on both mounts
# at once. With two MDS each mount talks to its own (the second lists them
# the other way round); with one, both talk to it. Prints each phase's
# rate, the two mounts' sum first. ROUNDS rounds alternate 1 and 2 MDS.
#   FILES=3000 ROUNDS=2 bash tests/client/bench_two_mds.sh [BUILD_DIR]
# Needs root (tmpfs, mounts) and etcd.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=$(readlink -f "${1:-${SURGE_BUILD_DIR:-build}}")
FILES=${FILES:-3000}
ROUNDS=${ROUNDS:-2}
launcher=tools/surge-local-cluster
work=$(mktemp -d /tmp/surge-two-mds.XXXXXX)

run_pair() {  # label mount-dir-1 mount-dir-2
  "$BUILD/tools/surge-bench" --mode md -n 1 --files "$FILES" -o "$2" --json --no-progress \
    >"$work/a.json" &
  local a=$!
  "$BUILD/tools/surge-bench" --mode md -n 1 --files "$FILES" -o "$3" --json --no-progress \
    >"$work/b.json" &
  local b=$!
  wait "$a" "$b"
  python3 - "$1" "$work/a.json" "$work/b.json" <<'PY'
import json, sys
def rates(path):
    return {p["phase"]: p["ops_per_s"] for p in json.load(open(path))["phases"]}
a, b = rates(sys.argv[2]), rates(sys.argv[3])
print(sys.argv[1], " ".join(f"{k}={a[k] + b[k]:.0f}/s({a[k]:.0f}+{b[k]:.0f})" for k in a))
PY
}

for round in $(seq 1 "$ROUNDS"); do
  for n in 1 2; do
    dir=$work/c$n
    "$launcher" start --dir "$dir" --port 7300 --tmpfs 3g --mds-backend etcd --mds "$n" \
      --build "$BUILD" >"$work/start.log" 2>&1 || { cat "$work/start.log"; exit 1; }
    list=$(cat "$dir/run/mds_list")
    reversed=$list
    [ "$n" -eq 2 ] && reversed="${list#*,},${list%%,*}"
    mkdir -p "$dir/mnt2"
    "$BUILD/client/fuse/surge-fuse" "$reversed" "$dir/mnt2" \
      -o "key_file=$dir/cluster.key,allow_other,log_file=$dir/logs/fuse2.log"
    mkdir "$dir/mnt/a" "$dir/mnt2/b"
    run_pair "round $round, $n MDS:" "$dir/mnt/a" "$dir/mnt2/b"
    umount "$dir/mnt2"
    "$launcher" stop --dir "$dir" >/dev/null
  done
done
rm -rf "$work"
