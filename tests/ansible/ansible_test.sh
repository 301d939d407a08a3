#!/bin/bash
# The Ansible deployment: the site playbook parses, and the rendered daemon
# configurations match the daemons' documented settings key for key.
set -euo pipefail
src=${SURGE_SOURCE_DIR:?}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export ANSIBLE_LOCALHOST_WARNING=false ANSIBLE_INVENTORY_UNPARSED_WARNING=false ANSIBLE_NOCOLOR=1
ansible-playbook --syntax-check -i "$src/ansible/inventory/example.ini" "$src/ansible/site.yml"
ansible-playbook -i localhost, "$src/tests/ansible/render.yml" -e "out=$out" -e "surge_mds_address=tcp://192.0.2.10:7100" >"$out/render.log" ||
  { cat "$out/render.log"; exit 1; }
/usr/bin/python3 "$src/tests/ansible/check_templates.py" "$out/surge-mds.toml" "$src/mds/surge-mds.toml"
/usr/bin/python3 "$src/tests/ansible/check_templates.py" "$out/surge-ods.toml" "$src/ods/surge-ods.toml"
echo "ansible: playbook parses; templates match the daemons' settings"
