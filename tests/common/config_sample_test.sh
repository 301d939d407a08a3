#!/bin/bash
# The shipped sample configs are what the daemons' field tables print
# (surge-mds / surge-ods --print-config: every key of the table at its
# default, with its note), byte for byte; and the configs the Ansible roles
# render carry exactly the table's keys (tests/ansible/check_templates.py).
# A setting added to a table but not to the shipped file or a template, or
# the other way round, fails here. Everything this test writes is in a
# scratch dir: it never touches the source tree (the samples are rewritten
# by scripts/update-config-samples.sh only).
set -euo pipefail
src=${SURGE_SOURCE_DIR:?} build=${SURGE_BUILD_DIR:?}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
for d in mds ods; do
  "$build/$d/surge-$d" --print-config >"$out/surge-$d.toml"
  if ! diff -u "$src/$d/surge-$d.toml" "$out/surge-$d.toml"; then
    echo "$d/surge-$d.toml is not what surge-$d --print-config prints (regenerate both with" \
      "bash scripts/update-config-samples.sh $build)" >&2
    status=1
  fi
done
export ANSIBLE_LOCALHOST_WARNING=false ANSIBLE_INVENTORY_UNPARSED_WARNING=false ANSIBLE_NOCOLOR=1
mkdir "$out/rendered"
ansible-playbook -i localhost, "$src/tests/ansible/render.yml" -e "out=$out/rendered" \
  -e "surge_mds_address=tcp://192.0.2.10:7100" >"$out/render.log" || { cat "$out/render.log"; exit 1; }
for d in mds ods; do
  /usr/bin/python3 "$src/tests/ansible/check_templates.py" "$out/rendered/surge-$d.toml" \
    "$out/surge-$d.toml" || status=1
done
[ "$status" = 0 ] && echo "config: shipped files and Ansible templates list exactly the tables' keys"
exit "$status"
