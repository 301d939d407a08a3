#!/bin/bash
# vm_run.sh: runs one command inside a throw-away QEMU virtual machine that
# has a real (software) RDMA device, Soft-RoCE "rxe0", and returns the
# command's exit status. This machine's own kernel has no RDMA stack; the
# Debian kernel package (linux-image-amd64) does, so we boot that.
#
#   tests/rdma/vm_run.sh [--timeout SEC] [--boot-timeout SEC] [--mem MIB] [--cpus N] -- CMD [ARG...]
#
# The guest:
#   * boots /boot/vmlinuz-<newest>-amd64 with a tiny busybox initramfs that
#     loads the needed modules, mounts this machine's / over virtio-9p and
#     chroots into it: same paths, same binaries, same build tree;
#   * has interface rdma0 (dummy, no NIC: nothing leaves the VM) holding
#     10.99.0.1 .. 10.99.0.8 (one address per simulated host) and the rxe
#     device rxe0 on it; `ulimit -l unlimited`; runs CMD as root in the
#     current directory with the current environment.
#
# Exit status: CMD's; 125 when the VM never reported a result (the kernel
# log tail and console tail are printed); 124 on timeout; 126 when the guest
# booted but has no working RDMA device (never a silent skip).
#
# Boot watchdog: a guest boots in seconds, but QEMU without KVM has been
# seen (rarely, in CI) to sit silent before ever reaching CMD. A guest that
# has not reported its RDMA device ready within --boot-timeout (default
# 180 s) is killed, its kernel log shown, and booted once more. Only the
# boot is retried: once the guest reports ready, CMD runs exactly once and
# its result stands, pass or fail. --timeout bounds the whole call.
#
# Invariants: one VM per call, its job directory under /tmp (shared with the
# guest) is removed on every exit path; QEMU is killed when this script is.
set -uo pipefail

TIMEOUT=900 BOOT_TIMEOUT=180 BOOT_TRIES=2 MEM=2048 CPUS=2
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) TIMEOUT=$2; shift 2 ;;
    --boot-timeout) BOOT_TIMEOUT=$2; shift 2 ;;
    --mem) MEM=$2; shift 2 ;;
    --cpus) CPUS=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
if [ $# -eq 0 ]; then
  echo "vm_run: usage: $0 [--timeout SEC] [--boot-timeout SEC] [--mem MIB] [--cpus N] -- CMD [ARG...]" >&2
  exit 2
fi

die() { echo "vm_run: $*" >&2; exit 125; }

# Everything the VM needs must already be installed (scripts/install-deps.sh);
# a missing piece is a loud failure, not a skip.
for tool in qemu-system-x86_64 busybox cpio gzip modprobe depmod rdma timeout; do
  command -v "$tool" >/dev/null || die "missing '$tool' (run scripts/install-deps.sh)"
done
[ -e /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so ] ||
  die "missing the rxe verbs provider librxe-rdmav34.so (package ibverbs-providers)"
KVER=$(ls /boot/vmlinuz-*-amd64 2>/dev/null | sort -V | tail -1 | sed 's#^/boot/vmlinuz-##')
[ -n "$KVER" ] || die "no /boot/vmlinuz-*-amd64 (package linux-image-amd64)"
[ -d "/lib/modules/$KVER" ] || die "no /lib/modules/$KVER for kernel $KVER"

# The initramfs depends only on the kernel version and this script: cache it.
CACHE=${SURGE_RDMA_VM_CACHE:-/var/tmp/surge-rdma-vm}
INITRD=$CACHE/initrd-$KVER.cpio.gz
MODULES="virtio_pci 9pnet_virtio 9p dummy fuse crc32_generic rdma_rxe ib_uverbs rdma_ucm"
build_initrd() {
  local w
  w=$(mktemp -d /tmp/surge-rdma-initrd.XXXXXX) || return 1
  mkdir -p "$w"/{bin,proc,sys,dev,root}
  cp "$(command -v busybox)" "$w/bin/busybox" || return 1
  for applet in $(busybox --list); do
    [ "$applet" = busybox ] || ln -s busybox "$w/bin/$applet"
  done
  local m f rel
  for m in $MODULES; do
    modprobe -S "$KVER" --show-depends "$m" | awk '$1 == "insmod" {print $2}'
  done | sort -u | while read -r f; do
    rel=${f#/lib/modules/$KVER/}
    mkdir -p "$w/lib/modules/$KVER/$(dirname "$rel")"
    cp "$f" "$w/lib/modules/$KVER/$rel"
  done
  depmod -b "$w" "$KVER" 2>/dev/null || return 1
  # PID 1 of the guest. Its only job: modules, root over 9p, chroot, run the
  # job's guest script, record its status, power off. Any failure here shows
  # up on the console (the host prints the kernel log tail).
  cat > "$w/init" <<EOF
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# Progress goes to the serial console (the host's kernel.log), so a guest
# that stops somewhere says where.
echo "vm_run-init: up \$(cut -d' ' -f1 /proc/uptime)s, loading modules" > /dev/console
for m in $MODULES; do modprobe \$m || echo "vm_run-init: modprobe \$m failed"; done
echo "vm_run-init: modules loaded, mounting the host root over 9p" > /dev/console
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=none host /root || echo "vm_run-init: 9p mount failed"
for d in proc sys dev; do mount --bind /\$d /root/\$d; done
mount -t tmpfs run /root/run
mkdir -p /root/dev/shm; mount -t tmpfs shm /root/dev/shm
job=\$(sed -n 's/.*surge_job=\([^ ]*\).*/\1/p' /proc/cmdline)
echo "vm_run-init: running \$job/guest.sh at \$(cut -d' ' -f1 /proc/uptime)s" > /dev/console
chroot /root /bin/bash "\$job/guest.sh" > /root\$job/console 2>&1
echo \$? > /root\$job/rc.tmp
mv /root\$job/rc.tmp /root\$job/rc
sync
echo o > /proc/sysrq-trigger
sleep 60
EOF
  chmod +x "$w/init"
  (cd "$w" && find . | cpio -o -H newc --quiet | gzip -1) > "$INITRD.tmp.$$" &&
    mv "$INITRD.tmp.$$" "$INITRD"
  local rc=$?
  rm -rf "$w"
  return $rc
}
mkdir -p "$CACHE" || die "cannot create cache dir $CACHE"
if [ ! -s "$INITRD" ] || [ "$0" -nt "$INITRD" ]; then
  build_initrd || die "building the initramfs $INITRD failed"
fi

JOB=$(mktemp -d /tmp/surge-rdma-vm.XXXXXX) || die "mktemp failed"
QPID="" TPID=""
cleanup() {
  [ -n "$QPID" ] && kill "$QPID" 2>/dev/null && wait "$QPID" 2>/dev/null
  [ -n "$TPID" ] && kill "$TPID" 2>/dev/null && wait "$TPID" 2>/dev/null
  rm -rf "$JOB"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The guest script: network and RDMA device first, checked, then CMD.
{
  echo 'fail() { echo "vm_run-guest: $*"; exit 126; }'
  echo 'ip link set lo up || fail "lo up"'
  echo 'ip link add rdma0 type dummy || fail "cannot create dummy interface rdma0"'
  echo 'for i in 1 2 3 4 5 6 7 8; do ip addr add 10.99.0.$i/24 dev rdma0 || fail "address 10.99.0.$i"; done'
  echo 'ip link set rdma0 up || fail "rdma0 up"'
  echo 'rdma link add rxe0 type rxe netdev rdma0 || fail "cannot create Soft-RoCE device rxe0 on rdma0"'
  echo '[ -e /sys/class/infiniband/rxe0 ] || fail "no /sys/class/infiniband/rxe0 after rdma link add"'
  echo 'ls /dev/infiniband/uverbs* >/dev/null 2>&1 || fail "no /dev/infiniband/uverbs* (ib_uverbs not loaded?)"'
  echo '[ -e /dev/infiniband/rdma_cm ] || fail "no /dev/infiniband/rdma_cm (rdma_ucm not loaded?)"'
  echo 'ulimit -l unlimited'
  # The host's boot watchdog waits for this line.
  echo 'echo "vm_run-guest: rxe0 ready after $(cut -d" " -f1 /proc/uptime)s of uptime"'
  printf 'cd %q || fail "cd %q"\n' "$PWD" "$PWD"
  # Same environment as the caller, minus what describes this shell only.
  export -p | grep -v -E '^declare -x (PWD|OLDPWD|SHLVL|_|HOSTNAME|TERM|TMUX[A-Z_]*)(=|$)'
  printf '%q ' "$@"
  echo
} > "$JOB/guest.sh"
: > "$JOB/console"
tail -n +1 -f "$JOB/console" &
TPID=$!

READY='^vm_run-guest: rxe0 ready'
DEADLINE=$((SECONDS + TIMEOUT))
QRC=0 BOOTED=0
for try in $(seq 1 "$BOOT_TRIES"); do
  : > "$JOB/console"
  : > "$JOB/kernel.log"
  left=$((DEADLINE - SECONDS))
  [ "$left" -gt 0 ] || { QRC=124; break; }
  timeout --kill-after=10 "$left" qemu-system-x86_64 \
    -machine q35 -cpu max -smp "$CPUS" -m "$MEM" \
    -display none -monitor none -serial "file:$JOB/kernel.log" -no-reboot -nic none \
    -kernel "/boot/vmlinuz-$KVER" -initrd "$INITRD" \
    -append "console=ttyS0 loglevel=4 panic=-1 surge_job=$JOB" \
    -virtfs "local,path=/,mount_tag=host,security_model=none,multidevs=remap" &
  QPID=$!
  # Boot watchdog: the guest must report ready (or finish) in BOOT_TIMEOUT.
  boot_end=$((SECONDS + BOOT_TIMEOUT))
  while kill -0 "$QPID" 2>/dev/null; do
    if grep -q "$READY" "$JOB/console" 2>/dev/null || [ -s "$JOB/rc" ]; then BOOTED=1; break; fi
    if [ "$SECONDS" -ge "$boot_end" ]; then break; fi
    sleep 0.5
  done
  if [ "$BOOTED" = 0 ] && kill -0 "$QPID" 2>/dev/null; then
    echo "vm_run: the guest did not report ready within ${BOOT_TIMEOUT}s (boot $try of $BOOT_TRIES); kernel log tail:" >&2
    tail -30 "$JOB/kernel.log" >&2
    kill "$QPID" 2>/dev/null; wait "$QPID" 2>/dev/null
    QPID="" QRC=125
    continue
  fi
  wait "$QPID"
  QRC=$?
  QPID=""
  # A guest that ended before ready (no RDMA device, say) is not retried:
  # that is a result, reported below.
  break
done
sleep 0.3
kill "$TPID" 2>/dev/null; wait "$TPID" 2>/dev/null; TPID=""

if [ -s "$JOB/rc" ]; then
  RC=$(cat "$JOB/rc")
  if [ "$RC" = 126 ]; then
    echo "vm_run: the guest has no working RDMA device (see above); kernel log tail:" >&2
    tail -30 "$JOB/kernel.log" >&2
  fi
  exit "$RC"
fi
if [ "$QRC" = 124 ] || [ "$QRC" = 137 ]; then
  echo "vm_run: timed out after ${TIMEOUT}s; guest console tail:" >&2
  tail -20 "$JOB/console" >&2
  echo "vm_run: kernel log tail:" >&2
  tail -30 "$JOB/kernel.log" >&2
  exit 124
fi
echo "vm_run: the VM ended without a result (qemu exit $QRC); kernel log tail:" >&2
tail -40 "$JOB/kernel.log" >&2
exit 125
