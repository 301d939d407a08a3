#!/bin/bash
# rdma_guest.sh BUILD_DIR: the client end-to-end tests over RDMA, run inside
# the Soft-RoCE VM (tests/rdma/vm_run.sh) in one boot: the cluster of
# LocalCluster listens on rdma://10.99.0.1, libsurge and the FUSE mount
# reach it over verbs. Fails if any test fails or is missing; a test that
# hangs is killed after its own bound (SURGE_RDMA_TEST_TIMEOUT seconds,
# default 600; the chain failover test 3x that) and fails, so its own output
# shows where, not just the VM's timeout. Each test's time is printed.
# client_metrics_dashboard_test: the dashboard's metrics are on the pages
# of a cluster and mount that talk RDMA.
# The replicated-chain tests: chain forwarding (the successor pulls from
# its predecessor's registered buffer), resync and rebuild between data
# servers over RDMA; each asserts on the data servers' metrics pages that
# none of them made a call over TCP (tests/client/metrics_page.h).
# SURGE_RDMA_CHAIN_FILTER replaces the failover test's --gtest_filter.
#
# The EC tests: full-group writes (the client's parity pieces are heap
# buffers the transport bounces through its pool), parity deltas between
# data servers, truncates, degraded reads rebuilt from K positions into
# heap buffers (client_ec_io_test's whole-group and random-write cases,
# client_ec_degraded_test: about 2 min in the VM; all of client_ec_io_test
# passed there too, 131 s), and one case of client_ec_degraded_write_test
# (writes to a down data position through its stand-in). Second argument
# "ec": only these, every case, and client_ec_rebuild_test (the rebuild
# reads the other positions over RDMA; 185 s in the VM, left out of the
# default run for the test command's time).
#
# The clusters' directories go to the guest's tmpfs /dev/shm
# (SURGE_TEST_TMPDIR, tests/client/local_cluster.h): the guest's /tmp is
# the host's over 9p, slow and without fallocate.
#
# The default run has one chain case: replicas 2 with a data server
# SIGKILLed under the writers (forwarding over RDMA READ, the client's
# retry on the new chain, the returning member's resync, scrub; about a
# minute in the VM). The rest of the chain tests run when asked (second
# argument "chains"; 3.5 min more on a quiet host, 9-10 at load 12-15,
# docs/testing.md, "RDMA in the VM"), to keep the test command's time:
#   tests/rdma/vm_run.sh --timeout 2400 --mem 3072 -- \
#     tests/client/rdma_guest.sh build chains
set -u
BUILD=${1:?usage: rdma_guest.sh BUILD_DIR [chains|ec]}
CHAINS=${2:-}
export SURGE_BUILD_DIR=$BUILD SURGE_TEST_TRANSPORT=rdma SURGE_RDMA_HOST=10.99.0.1
export SURGE_TEST_TMPDIR=${SURGE_TEST_TMPDIR:-/dev/shm}
# Three of the failover test's six cases, to keep the VM test's time
# bounded (each killing case takes 2-3 min in the VM; docs/testing.md,
# "RDMA in the VM"): replicas 2 with a server killed under the writers (the
# head of two chains and the tail of two), replicas 3 with the middle of
# the chain killed (forwards into and out of it cut), and replicas 1's EIO
# naming the dead server's rdma:// address. All six passed over RDMA
# (SURGE_RDMA_CHAIN_FILTER='*').
CHAIN_FILTER=${SURGE_RDMA_CHAIN_FILTER:-ChainFailover.TwoReplicasSurviveAKilledTargetMidWrite:HeadMiddleTail/ChainMemberKill.EveryWriteAndByteSurvivesTheKilledMember/Middle:ChainFailover.OneReplicaGivesEioNamingTheChunkTargetAndAddress}
rc=0
LIMIT=${SURGE_RDMA_TEST_TIMEOUT:-600}
run() {  # run TIMEOUT TEST [GTEST ARGS...]
  local limit=$1 t=$2 start=$SECONDS
  shift 2
  if [ ! -x "$BUILD/tests/client/$t" ]; then echo "rdma_guest: $t not built" >&2; rc=1; return; fi
  echo "=== rdma_guest: $t over rdma $*"
  if timeout -k 10 "$limit" "$BUILD/tests/client/$t" --gtest_brief=1 "$@"; then
    echo "=== rdma_guest: $t passed in $((SECONDS - start)) s"
  else
    echo "=== rdma_guest: $t FAILED (exit $?; 124 is a timeout) after $((SECONDS - start)) s"; rc=1
  fi
}
[ -d "$SURGE_TEST_TMPDIR" ] || { echo "rdma_guest: no directory $SURGE_TEST_TMPDIR (SURGE_TEST_TMPDIR)" >&2; exit 1; }
if [ "$CHAINS" = ec ]; then
  run "$LIMIT" client_ec_io_test
  run "$LIMIT" client_ec_degraded_test
  run "$LIMIT" client_ec_rebuild_test
  run "$LIMIT" client_ec_degraded_write_test
  exit $rc
fi
run "$LIMIT" client_ec_io_test \
  --gtest_filter=EcIo.WholeGroupsAreEncodedByTheClient:EcIo.RandomOverwritesAndTruncatesMatchAModel
run "$LIMIT" client_ec_degraded_test
# Degraded writes: the stand-in reads the group and sends deltas over RDMA.
run "$LIMIT" client_ec_degraded_write_test \
  --gtest_filter=EcDegradedWrite.WritesToADownDataPositionLandAndSurviveItsReturn
# Every libsurge case but one: the open/close/truncate race is the
# client's own (200 rounds of a 4 MiB write, 84 of the test's 114 s in the
# VM on a quiet host), not the transport's; it runs over TCP in main.
run "$LIMIT" client_native_test --gtest_filter=-Native.OpensAndClosesOfOtherHandlesNeverUndoATruncate
run "$LIMIT" client_two_mounts_test
run "$LIMIT" client_metrics_dashboard_test
if [ "$CHAINS" = chains ]; then
  run $((LIMIT * 3)) client_chain_failover_test "--gtest_filter=$CHAIN_FILTER"
  run "$LIMIT" client_chain_rebuild_test
else
  run "$LIMIT" client_chain_failover_test --gtest_filter=ChainFailover.TwoReplicasSurviveAKilledTargetMidWrite
fi
exit $rc
