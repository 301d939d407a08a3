#!/bin/bash
# The test command: installs what is missing, builds (warnings as errors),
# and runs every test with ctest, the RDMA ones in a Soft-RoCE VM.
#   bash scripts/test.sh            # everything
#   bash scripts/test.sh -L unit    # extra args go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# ccache hits across clones and build dirs: paths are hashed relative to here.
export CCACHE_BASEDIR="$PWD"
BUILD=${SURGE_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSURGE_WERROR=ON
cmake --build "$BUILD" -j "$(nproc)"
cd "$BUILD"
ctest --output-on-failure --timeout 900 "$@"
