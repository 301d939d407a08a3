#!/bin/bash
# The floor under metadata through any FUSE mount on this host, beside
# surge-fuse and libsurge in the same run. fuse_floor_fs answers every
# request from memory (no network, no store) with surge-fuse's mount
# options and timeouts, so the kernel sends it the same requests per
# syscall; its rates are the most a FUSE daemon can reach here, and
# floor / libsurge is the most mount / libsurge can reach.
#
# One local cluster on tmpfs (3 data servers) and the floor, both up for
# the whole run; each round runs surge-bench --mode md through the floor,
# the Surge mount and libsurge, with N processes for each N in NS. Then
# CPU and context switches per create (perf stat over the daemon, the MDS
# and the benchmark), create phase only, 1 process.
#   FILES=5000 ROUNDS=3 NS="1 2" bash tests/client/bench_fuse_floor.sh BUILD
# Needs root (tmpfs, the mounts) and perf.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(readlink -f "${1:?usage: $0 BUILD}")
FILES=${FILES:-5000}
ROUNDS=${ROUNDS:-3}
NS=${NS:-1 2}
PORT=${PORT:-7800}
bench=$build/tools/surge-bench
floor_fs=$build/tests/client/fuse_floor_fs
[ -x "$floor_fs" ] || { echo "bench_fuse_floor.sh: $floor_fs is not built" >&2; exit 1; }
command -v perf >/dev/null || { echo "bench_fuse_floor.sh: perf is not installed" >&2; exit 1; }
launcher=tools/surge-local-cluster
work=$(mktemp -d /tmp/surge-bench-floor.XXXXXX)
dir=$work/cluster
floor=$work/floor

cleanup() {
  fusermount3 -u "$floor" 2>/dev/null || true
  "$launcher" stop --dir "$dir" >/dev/null 2>&1 || true
}
trap cleanup EXIT

"$launcher" start --dir "$dir" --port "$PORT" --tmpfs 2g --build "$build" >"$work/start.log" 2>&1 ||
  { cat "$work/start.log"; exit 1; }
mkdir -p "$floor"
"$floor_fs" "$floor" 16 >"$work/floor.log" 2>&1 &
floor_pid=$!
for _ in $(seq 50); do
  mountpoint -q "$floor" && break
  sleep 0.1
done
mountpoint -q "$floor" || { echo "bench_fuse_floor.sh: fuse_floor_fs did not mount" >&2; cat "$work/floor.log"; exit 1; }

# args_for API SUB: where surge-bench works for that API.
args_for() {
  case $1 in
    floor) echo "-o $floor/$2" ;;
    mount) echo "-o $dir/mnt/$2" ;;
    native) echo "--api native --mds tcp://127.0.0.1:$PORT --key-file $dir/cluster.key -o /$2" ;;
  esac
}
make_dir() {
  case $1 in
    floor) mkdir "$floor/$2" ;;
    mount) mkdir "$dir/mnt/$2" ;;
    native) mkdir "$dir/mnt/$2" ;;  # the same namespace libsurge sees
  esac
}

echo "ops/s per phase (create / stat / read / remove), $FILES files per process"
printf '%-6s %-3s %-7s %9s %9s %9s %9s\n' round N api create stat read remove
for round in $(seq 1 "$ROUNDS"); do
  for n in $NS; do
    for api in floor mount native; do
      sub=r${round}n$n$api
      make_dir "$api" "$sub"
      # shellcheck disable=SC2046
      "$bench" --mode md -n "$n" --files "$FILES" $(args_for "$api" "$sub") >"$work/run.txt" 2>&1 ||
        { cat "$work/run.txt"; exit 1; }
      rates=()
      for phase in create stat read remove; do
        r=$(awk -v p="$phase" '$1 == p {print $4}' "$work/run.txt")
        [ -n "$r" ] || { cat "$work/run.txt"; exit 1; }
        rates+=("$r")
      done
      printf '%-6s %-3s %-7s %9s %9s %9s %9s\n' "$round" "$n" "$api" "${rates[@]}"
    done
  done
done

# per_op FILE N (perf_per_op.sh).
source tests/client/perf_per_op.sh  # the cd above put us at the root

echo
echo "per create, 1 process, create phase only"
printf '%-6s %-7s %9s %24s %24s %24s %9s\n' round api creates/s "daemon us, switches" \
  "surge-mds us, switches" "bench us, switches" "total us"
mds=$(cat "$dir/run/mds.pid")
for round in $(seq 1 "$ROUNDS"); do
  for api in floor mount native; do
    sub=c$round$api
    make_dir "$api" "$sub"
    case $api in
      floor) daemon=$floor_pid ;;
      *) daemon=$(cat "$dir/run/fuse.pid") ;;
    esac
    perf stat -e task-clock,context-switches -p "$daemon" -o "$work/daemon.txt" &
    pd=$!
    perf stat -e task-clock,context-switches -p "$mds" -o "$work/mds.txt" &
    pm=$!
    sleep 0.5
    # shellcheck disable=SC2046
    perf stat -e task-clock,context-switches -o "$work/bench.txt" \
      "$bench" --mode md -n 1 --files "$FILES" --phases create $(args_for "$api" "$sub") \
      >"$work/run.txt" 2>&1 || { cat "$work/run.txt"; exit 1; }
    kill -INT "$pd" "$pm"
    wait "$pd" "$pm" 2>/dev/null || true
    rate=$(awk '$1 == "create" {print $4}' "$work/run.txt")
    [ -n "$rate" ] || { cat "$work/run.txt"; exit 1; }
    read -r dc ds <<<"$(per_op "$work/daemon.txt" "$FILES")"
    [ "$api" = native ] && { dc=0; ds=0; }  # the mount idles meanwhile
    read -r mc ms <<<"$(per_op "$work/mds.txt" "$FILES")"
    [ "$api" = floor ] && { mc=0; ms=0; }   # the MDS idles meanwhile
    read -r bc bs <<<"$(per_op "$work/bench.txt" "$FILES")"
    total=$(python3 -c "print('%.1f' % ($dc + $mc + $bc))")
    printf '%-6s %-7s %9s %24s %24s %24s %9s\n' "$round" "$api" "$rate" \
      "$dc, $ds" "$mc, $ms" "$bc, $bs" "$total"
  done
done
