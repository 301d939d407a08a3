#!/bin/bash
# guest_suite.sh BUILD_DIR: runs every RDMA test binary, inside the
# Soft-RoCE VM (vm_run.sh starts it there), one after another, and fails if
# any fails or is missing. Keeping them in one boot keeps `ctest -L rdma`
# to one ~20 s boot plus the tests.
#
#  * tests/rdma/rdma_transport_test: the RDMA transport's own cases.
#  * tests/rdma/rdma_bad_input_test: hostile input from a raw rdma_cm peer
#    (the RDMA side of tests/net/bad_input_test, which speaks raw TCP).
#  * the tests that run over either transport, over RDMA:
#    SURGE_NET_TRANSPORT=rdma SURGE_NET_HOST=10.99.0.1: the net layer's
#    conformance tests (tests/net/net_rpc_test) and the data server's
#    service tests (tests/ods/ods_service_test: writes and reads of many
#    sizes and offsets byte for byte, concurrent clients, bad requests),
#    and the transport's metrics (tests/net/net_transport_metrics_test:
#    calls, bytes and RDMA completions counted).
#    A missing binary is a failure; SURGE_RDMA_CONFORMANCE_TESTS overrides
#    the list.
# A binary that hangs is killed after SURGE_RDMA_TEST_TIMEOUT seconds
# (default 400) and counts as failed.
set -u
BUILD=${1:?usage: guest_suite.sh BUILD_DIR}
export SURGE_BUILD_DIR=$BUILD
export SURGE_RDMA_HOST=10.99.0.1
failed=()
run() {
  local name=$1; shift
  echo "=== guest_suite: $name"
  if timeout -k 10 "${SURGE_RDMA_TEST_TIMEOUT:-400}" "$@"; then echo "=== guest_suite: $name PASSED"; else
    echo "=== guest_suite: $name FAILED (exit $?; 124 is a timeout)"; failed+=("$name"); fi
}
for t in rdma_transport_test rdma_bad_input_test; do
  if [ ! -x "$BUILD/tests/rdma/$t" ]; then
    echo "guest_suite: $BUILD/tests/rdma/$t is not built" >&2
    exit 1
  fi
done
run rdma_transport_test "$BUILD/tests/rdma/rdma_transport_test" --gtest_brief=1
run rdma_bad_input_test "$BUILD/tests/rdma/rdma_bad_input_test" --gtest_brief=1
for t in ${SURGE_RDMA_CONFORMANCE_TESTS:-tests/net/net_rpc_test tests/ods/ods_service_test tests/net/net_transport_metrics_test}; do
  if [ ! -x "$BUILD/$t" ]; then echo "guest_suite: $BUILD/$t is not built"; failed+=("$t"); continue; fi
  run "$t (over rdma)" env SURGE_NET_TRANSPORT=rdma SURGE_NET_HOST=10.99.0.1 "$BUILD/$t" --gtest_brief=1
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "guest_suite: FAILED: ${failed[*]}"
  exit 1
fi
echo "guest_suite: all passed"
