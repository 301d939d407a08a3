#!/bin/bash
# What a truncate costs through the mount, old binaries against new in one
# run: a local cluster on tmpfs (3 data servers, the shipped replicas 2) per
# build and round, FILES files of 64 KiB written through the mount, then
#   rewrite:   open(O_WRONLY|O_TRUNC), write 64 KiB, close (cp or IOR over
#              an existing file)
#   ftruncate: open(O_RDWR), ftruncate to 0, close
# over every file, each phase timed as files/s. ROUNDS rounds alternate the
# builds.
#   FILES=500 ROUNDS=3 bash tests/client/bench_truncate.sh OLD_BUILD NEW_BUILD
# Needs root (tmpfs, the mount).
set -euo pipefail
cd "$(dirname "$0")/../.."
OLD=$(readlink -f "$1")
NEW=$(readlink -f "$2")
FILES=${FILES:-500}
ROUNDS=${ROUNDS:-3}
launcher=tools/surge-local-cluster
work=$(mktemp -d /tmp/surge-bench-truncate.XXXXXX)

phases() {  # label mountpoint
  python3 - "$1" "$2" "$FILES" <<'PY'
import os, sys, time
label, mnt, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = os.path.join(mnt, "t")
os.mkdir(d)
block = os.urandom(64 << 10)
paths = [os.path.join(d, "f%d" % i) for i in range(n)]
for p in paths:
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, block)
    os.close(fd)
out = []
t = time.monotonic()
for p in paths:
    fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, block)
    os.close(fd)
out.append("rewrite=%.0f/s" % (n / (time.monotonic() - t)))
t = time.monotonic()
for p in paths:
    fd = os.open(p, os.O_RDWR)
    os.ftruncate(fd, 0)
    os.close(fd)
out.append("ftruncate=%.0f/s" % (n / (time.monotonic() - t)))
print(label, " ".join(out), flush=True)
PY
}

for round in $(seq 1 "$ROUNDS"); do
  for which in old new; do
    build=$OLD
    [ "$which" = new ] && build=$NEW
    dir=$work/$which
    "$launcher" start --dir "$dir" --port 7600 --tmpfs 3g --build "$build" >"$work/start.log" 2>&1 ||
      { cat "$work/start.log"; exit 1; }
    phases "round $round, $which ($build):" "$dir/mnt"
    "$launcher" stop --dir "$dir" >/dev/null
  done
done
rm -rf "$work"
