#!/bin/bash
# surge-local-cluster start refuses, before it starts anything, when a port
# it would listen on is taken, and names the port, what it was for and who
# holds it. Before, another cluster's MDS on the port answered in place of
# the new one ("mds listening"), and the start failed later with "0 of 3
# data servers registered".
set -uo pipefail
tool=$1 build=$2
dir=$(mktemp -d)
holder=""
cleanup() {
  [ -n "$holder" ] && kill "$holder" 2>/dev/null
  "$tool" stop --dir "$dir/c" >/dev/null 2>&1
  rm -rf "$dir"
}
trap cleanup EXIT

# shellcheck source=free_ports.sh
source "$(dirname "$0")/free_ports.sh"
pick_base_port

fail=0
check_refused() {  # port-to-hold name
  local port=$1 name=$2 out rc
  python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8); time.sleep(300)' "$port" &
  holder=$!
  for _ in $(seq 1 100); do free "$port" || break; sleep 0.05; done
  out=$(timeout 60 "$tool" start --dir "$dir/c" --build "$build" --port "$base" 2>&1)
  rc=$?
  if [ $rc -eq 0 ]; then
    echo "FAIL: start with port $port ($name) held succeeded: $out"; fail=1
  elif ! grep -q "port $port on 127.0.0.1 (for $name) is in use by python3 (pid $holder)" <<<"$out"; then
    echo "FAIL: start with port $port ($name) held: exit $rc, the message does not name the port, $name and the holder: $out"; fail=1
  else
    echo "ok: port $port held, refused: $(tail -n 1 <<<"$out")"
  fi
  # Nothing was started: no pid file, no mount, and the MDS port stays free
  # (unless it is the one held).
  if compgen -G "$dir/c/run/*.pid" >/dev/null; then
    echo "FAIL: start with port $port held left pid files: $(ls "$dir/c/run")"; fail=1
  fi
  if awk -v m="$dir/c/mnt" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; then
    echo "FAIL: start with port $port held mounted $dir/c/mnt"; fail=1
  fi
  if [ "$port" != "$base" ] && ! free "$base"; then
    echo "FAIL: start with port $port held left something on the MDS port $base"; fail=1
  fi
  kill "$holder"; wait "$holder" 2>/dev/null; holder=""
  # Whatever a launcher that failed this check started goes before the next.
  "$tool" stop --dir "$dir/c" >/dev/null 2>&1
}

check_refused "$base" mds
check_refused $((base + 2)) ods1
exit $fail
