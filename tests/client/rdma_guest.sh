#!/bin/bash
# rdma_guest.sh BUILD_DIR: the client end-to-end tests over RDMA, run inside
# the Soft-RoCE VM (tests/rdma/vm_run.sh) in one boot: the cluster of
# LocalCluster listens on rdma://10.99.0.1, libsurge and the FUSE mount
# reach it over verbs. Fails if any test fails or is missing; a test that
# hangs is killed after SURGE_RDMA_TEST_TIMEOUT seconds (default 400) and
# fails, so its own output shows where, not just the VM's timeout.
# client_metrics_dashboard_test: the dashboard's metrics are on the pages
# of a cluster and mount that talk RDMA.
set -u
BUILD=${1:?usage: rdma_guest.sh BUILD_DIR}
export SURGE_BUILD_DIR=$BUILD SURGE_TEST_TRANSPORT=rdma SURGE_RDMA_HOST=10.99.0.1
rc=0
for t in client_native_test client_two_mounts_test client_metrics_dashboard_test; do
  if [ ! -x "$BUILD/tests/client/$t" ]; then echo "rdma_guest: $t not built" >&2; rc=1; continue; fi
  echo "=== rdma_guest: $t over rdma"
  timeout -k 10 "${SURGE_RDMA_TEST_TIMEOUT:-400}" "$BUILD/tests/client/$t" --gtest_brief=1 || {
    echo "=== rdma_guest: $t FAILED (exit $?; 124 is a timeout)"; rc=1; }
done
exit $rc
