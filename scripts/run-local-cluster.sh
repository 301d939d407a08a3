#!/bin/bash
# The README's first command: a Surge cluster on this machine in one go.
# Installs missing Debian packages (as root), builds the daemons, the mount
# and the tools, starts 1 MDS + 3 data servers on 127.0.0.1 with their data
# under /var/tmp/surge-local (or --dir DIR), mounts it and prints where and
# how to stop it.
#   bash scripts/run-local-cluster.sh            # start (installs, builds)
#   bash scripts/run-local-cluster.sh status     # what runs
#   bash scripts/run-local-cluster.sh stop       # unmount, stop what it started
# Extra arguments go to tools/surge-local-cluster (--dir, --mount, --port,
# --ods, --tmpfs SIZE).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${SURGE_BUILD_DIR:-build}
case "${1:-start}" in
  status|stop)
    cmd=$1; shift
    exec tools/surge-local-cluster "$cmd" --build "$BUILD" "$@" ;;
  start) [ $# -gt 0 ] && shift ;;
esac
if [ "$(id -u)" -ne 0 ]; then
  echo "run-local-cluster: run as root (it installs packages and mounts with FUSE)" >&2
  exit 1
fi
bash scripts/install-deps.sh
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target surge-mds surge-ods surge-fuse surgectl surge-bench
exec tools/surge-local-cluster start --build "$BUILD" "$@"
