#!/bin/bash
# Installs every Debian 12 package Surge needs to build, test, benchmark and
# run a local cluster. Idempotent: packages already present are left alone.
# Run as root on a fresh machine; it runs `apt-get update` first.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git
  # the fuzzers (tests/fuzz): clang with libFuzzer and the sanitizer runtimes
  clang-14 libclang-rt-14-dev llvm-14
  # libraries
  libboost1.81-dev libprotobuf-dev protobuf-compiler
  librocksdb-dev libfuse3-dev fuse3
  libibverbs-dev librdmacm-dev ibverbs-providers rdma-core ibverbs-utils
  libssl-dev libisal-dev liburing-dev libspdlog-dev libfmt-dev libtomlplusplus-dev libcli11-dev
  nlohmann-json3-dev
  # the MDS's etcd backend (mds/kv/etcd): the gRPC client and code generator,
  # and etcd itself for the 3-member test cluster (tests/common/etcd_cluster)
  libgrpc++-dev protobuf-compiler-grpc etcd-server
  libgtest-dev libgmock-dev libbenchmark-dev
  # test and benchmark tools
  fio iperf3 perftest python3 attr rsync ansible-core psmisc procps util-linux e2fsprogs
  # the Soft-RoCE VM the RDMA tests run in
  qemu-system-x86 linux-image-amd64 busybox-static iproute2 cpio kmod
  # the deploy tests: packages (cpack, dpkg-shlibdeps, readelf), Debian 12 VMs from
  # debootstrap (booting the kernel and busybox above), Ansible over ssh into them,
  # ansible-lint
  dpkg-dev binutils openssl debootstrap qemu-utils openssh-client ansible-lint
)

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: must run as root (apt-get install)" >&2
  exit 1
fi

# etcd-server's package enables and starts a system etcd on 2379/2380. Surge's
# tests start their own members on free ports and an operator runs etcd for
# the MDS deliberately, so a stray default-configured one is stopped (on
# every run: it may have been installed before this script knew of it).
stop_system_etcd() {
  if [ -d /run/systemd/system ] && systemctl list-unit-files etcd.service >/dev/null 2>&1; then
    systemctl disable --now etcd.service >/dev/null 2>&1 || echo "install-deps: could not stop the system etcd" >&2
  fi
}

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  stop_system_etcd
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"
stop_system_etcd
