#!/bin/bash
# Rebuild rate on loopback: a local cluster (1 MDS, 4 data servers, all on
# tmpfs, the mount), FILES files of SIZE each written through the mount
# into a replicas-2 directory of 1 MiB x 4 stripes, then `surgectl drain 1
# --wait`: every chain that lists target 1 gets a replacement, and its last
# serving member sends the newcomer every chunk whole, the same pass a
# rebuild after chains.replace_after_ms runs (docs/redundancy.md,
# "Replacement, rebuild, drain, rebalance"). Prints the bytes moved (the
# sources' "resync of chain ... done" lines), the wall time from the drain
# to "drained" and the aggregate and per-chain rates.
#   FILES=4 SIZE=256m bash tests/client/bench_rebuild.sh [BUILD_DIR]
# Needs root (tmpfs, FUSE).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=$(readlink -f "${1:-${SURGE_BUILD_DIR:-build}}")
FILES=${FILES:-4}
SIZE=${SIZE:-256m}
PORT=${PORT:-7360}
DIR=$(mktemp -d /var/tmp/surge-bench-rebuild.XXXXXX)
CLUSTER="tools/surge-local-cluster"
MDS=tcp://127.0.0.1:$PORT
cleanup() {
  "$CLUSTER" stop --dir "$DIR" >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT
ctl() { "$BUILD/tools/surgectl" --mds "$MDS" --key-file "$DIR/cluster.key" "$@"; }

"$CLUSTER" start --dir "$DIR" --build "$BUILD" --port "$PORT" --ods 4 --tmpfs 6g >/dev/null
MNT=$DIR/mnt
mkdir -p "$MNT/r"
ctl setstripe --size 1048576 --count 4 --replicas 2 /r >/dev/null
head -c "$SIZE" /dev/urandom >"$DIR/tmpfs/src"
for i in $(seq 1 "$FILES"); do
  dd if="$DIR/tmpfs/src" of="$MNT/r/f$i" bs=1M conv=fsync status=none
done
rm -f "$DIR/tmpfs/src"
echo "wrote $FILES files of $SIZE (replicas 2, 1 MiB x 4 stripes) through the mount"

start=$(date +%s.%N)
ctl drain --wait 1 >"$DIR/drain.out"
end=$(date +%s.%N)
secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
# "resync of chain C (version V) to target T done: N chunks sent or removed (B bytes), U unchanged, in S s"
read -r bytes chain_secs chains < <(cat "$DIR"/logs/ods*.log |
  sed -n 's/.*resync of chain .* done: [0-9]* chunks sent or removed (\([0-9]*\) bytes), [0-9]* unchanged, in \([0-9.]*\) s.*/\1 \2/p' |
  awk '$1 > 0 { b += $1; s += $2; n++ } END { printf "%d %.3f %d\n", b, s, n }')
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.0f", b / 1048576 }')
echo "drain of target 1: $mib MiB sent by $chains chain(s) in $secs s from the drain to drained"
echo "aggregate: $(awk -v m="$mib" -v s="$secs" 'BEGIN { printf "%.0f", m / s }') MiB/s;" \
  "per chain: $(awk -v m="$mib" -v s="$chain_secs" 'BEGIN { if (s > 0) printf "%.0f", m / s; else print "n/a" }') MiB/s ($chain_secs chain-seconds)"
ctl scrub >"$DIR/scrub.out" 2>&1 && echo "scrub after the drain: clean" || {
  echo "scrub after the drain: exit $?"
  tail -5 "$DIR/scrub.out"
}
