#!/bin/bash
# What a create costs in CPU and context switches, summed over every thread
# of surge-fuse, surge-mds and the benchmark process, through the mount and
# through libsurge: `surge-bench --mode md -n 1 --phases create` under
# `perf stat`. On a shared 2-core host rates swing by half from run to run;
# CPU per create does not, and it is what bounds the rate when every
# process competes for the same cores. One local cluster on tmpfs per build
# (3 data servers), both up for the whole run; ROUNDS rounds alternate the
# builds.
#   FILES=5000 ROUNDS=3 bash tests/client/bench_create_cpu.sh BUILD [BUILD2]
# Needs root (tmpfs, the mount) and perf.
set -euo pipefail
cd "$(dirname "$0")/../.."
builds=()
for b in "$@"; do builds+=("$(readlink -f "$b")"); done
[ ${#builds[@]} -ge 1 ] || { echo "usage: $0 BUILD [BUILD2]" >&2; exit 2; }
command -v perf >/dev/null || { echo "bench_create_cpu.sh: perf is not installed" >&2; exit 1; }
FILES=${FILES:-5000}
ROUNDS=${ROUNDS:-3}
launcher=tools/surge-local-cluster
work=$(mktemp -d /tmp/surge-bench-create-cpu.XXXXXX)

cleanup() {
  for i in "${!builds[@]}"; do "$launcher" stop --dir "$work/c$i" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT

for i in "${!builds[@]}"; do
  "$launcher" start --dir "$work/c$i" --port $((7600 + 100 * i)) --tmpfs 2g \
    --build "${builds[$i]}" >"$work/start$i.log" 2>&1 || { cat "$work/start$i.log"; exit 1; }
done

# per_op FILE N (perf_per_op.sh).
source tests/client/perf_per_op.sh  # the cd above put us at the root

printf '%-6s %-5s %-7s %9s %28s %28s %28s %9s\n' round build api creates/s \
  "surge-fuse us, switches" "surge-mds us, switches" "bench us, switches" "total us"
for round in $(seq 1 "$ROUNDS"); do
  for i in "${!builds[@]}"; do
    dir=$work/c$i
    port=$((7600 + 100 * i))
    bench=${builds[$i]}/tools/surge-bench  # its own libsurge for --api native
    for api in posix native; do
      sub=r$round$api
      mkdir "$dir/mnt/$sub"
      fuse=$(cat "$dir/run/fuse.pid")
      mds=$(cat "$dir/run/mds.pid")
      perf stat -e task-clock,context-switches -p "$fuse" -o "$work/fuse.txt" &
      pf=$!
      perf stat -e task-clock,context-switches -p "$mds" -o "$work/mds.txt" &
      pm=$!
      sleep 0.5
      if [ "$api" = posix ]; then
        args=(-o "$dir/mnt/$sub")
      else
        args=(--api native --mds "tcp://127.0.0.1:$port" --key-file "$dir/cluster.key" -o "/$sub")
      fi
      perf stat -e task-clock,context-switches -o "$work/bench.txt" \
        "$bench" --mode md -n 1 --files "$FILES" --phases create "${args[@]}" >"$work/run.txt" 2>&1
      kill -INT "$pf" "$pm"
      wait "$pf" "$pm" 2>/dev/null || true
      rate=$(awk '$1 == "create" {print $4}' "$work/run.txt")
      [ -n "$rate" ] || { cat "$work/run.txt"; exit 1; }
      read -r fc fs <<<"$(per_op "$work/fuse.txt" "$FILES")"
      [ "$api" = native ] && { fc=0; fs=0; }  # the mount idles meanwhile
      read -r mc ms <<<"$(per_op "$work/mds.txt" "$FILES")"
      read -r bc bs <<<"$(per_op "$work/bench.txt" "$FILES")"
      total=$(python3 -c "print('%.1f' % ($fc + $mc + $bc))")
      printf '%-6s %-5s %-7s %9s %28s %28s %28s %9s\n' "$round" "$i" "$api" "$rate" \
        "$fc, $fs" "$mc, $ms" "$bc, $bs" "$total"
    done
  done
done
echo "builds: $(for i in "${!builds[@]}"; do printf '%s=%s ' "$i" "${builds[$i]}"; done)"
