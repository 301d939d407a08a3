#!/bin/bash
# Rewrites the shipped sample configs, mds/surge-mds.toml and
# ods/surge-ods.toml, from the daemons' field tables (surge-mds /
# surge-ods --print-config of a build tree), after a setting was added or
# changed in mds/daemon/mds_config.cpp or ods/daemon/ods_config.cpp.
#   bash scripts/update-config-samples.sh [BUILD_DIR]   # default: build
# Each file is replaced only once the daemon printed it whole: a daemon
# that fails, or an old one without --print-config, leaves the sample as it
# was (a plain `surge-mds --print-config > mds/surge-mds.toml` empties the
# file before the daemon runs, and leaves it empty when the daemon fails).
# Only this script writes these files; no test does
# (tests/common/config_sample_test.sh compares them in a scratch dir).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
for d in mds ods; do
  bin=$build/$d/surge-$d
  [ -x "$bin" ] || { echo "update-config-samples: no $bin (build it: ninja -C $build surge-$d)" >&2; exit 1; }
  tmp=$(mktemp "$d/.surge-$d.toml.XXXXXX")
  if ! "$bin" --print-config >"$tmp" || [ ! -s "$tmp" ]; then
    rm -f "$tmp"
    echo "update-config-samples: $bin --print-config failed; $d/surge-$d.toml left as it was" >&2
    exit 1
  fi
  chmod 0644 "$tmp"
  mv "$tmp" "$d/surge-$d.toml"
  echo "update-config-samples: $d/surge-$d.toml from $bin --print-config"
done
