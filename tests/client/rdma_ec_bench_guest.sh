#!/bin/bash
# rdma_ec_bench_guest.sh BUILD_DIR: EC 4+2 beside replicas 1 over RDMA, run
# inside the Soft-RoCE VM (issue 16):
#   tests/rdma/vm_run.sh --timeout 1200 --mem 3072 -- \
#     tests/client/rdma_ec_bench_guest.sh build
# 1 MDS and 6 data servers listening on rdma://10.99.0.1, their stores on
# the guest's tmpfs; libsurge (surge-bench --api native) writes fresh files
# (1 MiB transfers, a file per task, JOBS tasks of BLOCK bytes each, in
# surge-bench's units: 16m) and reads
# them back, in "/" given replicas 1 and then EC 4+2 (256 KiB units: a
# 1 MiB write is a whole stripe group, whose parity the client sends from
# its heap, bounced by the transport). Best of REPEAT runs per row. Soft-RoCE
# under emulation moves tens of MiB/s: only the ratios mean anything.
set -u
BUILD=$(readlink -f "${1:?usage: rdma_ec_bench_guest.sh BUILD_DIR}")
BLOCK=${BLOCK:-32m}
JOBS=${JOBS:-2}
REPEAT=${REPEAT:-3}
H=${SURGE_RDMA_HOST:-10.99.0.1}
D=$(mktemp -d /dev/shm/surge-ec-bench.XXXXXX)
MDS=rdma://$H:7500
pids=()
cleanup() {
  [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$D"
}
trap cleanup EXIT
die() { echo "rdma_ec_bench_guest: $*" >&2; exit 1; }
ctl() { "$BUILD/tools/surgectl" --mds "$MDS" --key-file "$D/key" "$@"; }

"$BUILD/tools/surgectl" keygen "$D/key" >/dev/null || die "keygen failed"
"$BUILD/mds/surge-mds" --data-dir "$D/mds" --listen "$MDS" --cluster-key-file "$D/key" \
  --log-level warn >"$D/mds.log" 2>&1 &
pids+=($!)
for i in 0 1 2 3 4 5; do
  "$BUILD/ods/surge-ods" --data-dir "$D/ods$i" --listen "rdma://$H:$((7510 + i))" --mds "$MDS" \
    --cluster-key-file "$D/key" --log-level warn >"$D/ods$i.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 60); do
  ctl status 2>/dev/null | grep -q "targets 6 up of 6" && break
  sleep 1
done
ctl status 2>/dev/null | grep -q "targets 6 up of 6" || { cat "$D"/*.log >&2; die "6 data servers not up after 60 s"; }

# One write-then-read run: "WRITE_MIBS READ_MIBS".
run() {
  local out
  out=$("$BUILD/tools/surge-bench" --api native --mds "$MDS" --key-file "$D/key" -o / -t 1m \
    -b "$BLOCK" -n "$JOBS" -F --no-progress 2>&1) || die "surge-bench failed: $out"
  echo "$(awk '$1 == "write" {print $4}' <<<"$out") $(awk '$1 == "read" {print $4}' <<<"$out")"
}
best() {  # best of REPEAT runs, each column on its own
  local w=0 r=0 a b
  for _ in $(seq "$REPEAT"); do
    read -r a b <<<"$(run)"
    [ -n "$a" ] && [ -n "$b" ] || die "a surge-bench run printed no write and read figures"
    w=$(awk -v x="$a" -v y="$w" 'BEGIN {print (x > y) ? x : y}')
    r=$(awk -v x="$b" -v y="$r" 'BEGIN {print (x > y) ? x : y}')
  done
  echo "$w $r"
}
echo "6 data servers over rdma on $H; $BLOCK per task, $JOBS tasks, best of $REPEAT (MiB/s)"
ctl setstripe --replicas 1 --count 6 --size 1048576 / >/dev/null || die "setstripe replicas 1 failed"
read -r r1w r1r <<<"$(best)"
ctl setstripe --ec 4+2 --count 2 / >/dev/null || die "setstripe ec 4+2 failed"
read -r ecw ecr <<<"$(best)"
printf '%-12s %10s %10s\n' layout write read r1 "$r1w" "$r1r" "ec 4+2" "$ecw" "$ecr"
awk -v a="$ecw" -v b="$r1w" -v c="$ecr" -v d="$r1r" \
  'BEGIN {printf "ec / r1      %10.2f %10.2f\n", a / b, c / d}'
