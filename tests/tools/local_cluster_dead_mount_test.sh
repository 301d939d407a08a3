#!/bin/bash
# surge-local-cluster start clears a dead Surge mount left at its mount
# point by a cluster whose daemons died (SIGKILLed here: the mount point
# then answers "Transport endpoint is not connected"), and the new cluster's
# mount works. Before, start failed at its mkdir of the mount point.
set -uo pipefail
tool=$1 build=$2
dir=$(mktemp -d)
cleanup() {
  "$tool" stop --dir "$dir/c" >/dev/null 2>&1
  umount -l "$dir/c/mnt" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

# shellcheck source=free_ports.sh
source "$(dirname "$0")/free_ports.sh"
pick_base_port

start() { timeout 120 "$tool" start --dir "$dir/c" --build "$build" --port "$base" 2>&1; }
out=$(start) || { echo "FAIL: the first start failed: $out"; exit 1; }
for f in "$dir"/c/run/*.pid; do kill -KILL "$(cat "$f")" 2>/dev/null; done
for _ in $(seq 1 100); do free "$base" && break; sleep 0.1; done
if stat "$dir/c/mnt" >/dev/null 2>&1; then
  echo "FAIL: the mount point still answers after every daemon was killed"; exit 1
fi
out=$(start) || { echo "FAIL: start over the dead mount failed: $out"; exit 1; }
grep -q "cleared a dead Surge mount at $dir/c/mnt" <<<"$out" ||
  { echo "FAIL: start did not say it cleared the dead mount: $out"; exit 1; }
echo hello >"$dir/c/mnt/f" && [ "$(cat "$dir/c/mnt/f")" = hello ] ||
  { echo "FAIL: the new mount does not take a file"; exit 1; }
echo "ok: the dead mount was cleared and the new mount works"
