#!/bin/bash
# surge-local-cluster --help and -h print the usage and exit 0, before any
# command and after one, without touching a cluster directory.
set -uo pipefail
tool=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
for args in "--help" "-h" "status --help"; do
  # shellcheck disable=SC2086
  out=$("$tool" $args --dir "$dir/never" 2>&1)
  rc=$?
  if [ $rc -ne 0 ] || ! grep -q "surge-local-cluster start" <<<"$out"; then
    echo "FAIL: surge-local-cluster $args: exit $rc, output: $out"
    fail=1
  fi
done
[ -e "$dir/never" ] && { echo "FAIL: --help created the cluster directory"; fail=1; }
[ $fail -eq 0 ] && echo "ok: usage printed for --help, -h and status --help"
exit $fail
