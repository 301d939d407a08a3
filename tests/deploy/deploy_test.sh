#!/bin/bash
# deploy_test.sh: deploys Surge from its Debian packages with Ansible onto
# real systemd hosts, two QEMU VMs, and checks that it serves and that it
# comes back by itself after a reboot:
#
#   srv1   surge-mds and a surge-ods                   10.77.0.11
#   node1  a surge-ods and the client, mounted by fstab  10.77.0.12
#
# (1 MDS, 2 data servers, 1 client on two VMs: the VMs run emulated, see
# ansible/README.md, and each VM costs a boot.) Steps, each a loud failure:
#   1. cpack the build tree's packages; the cached Debian 12 image
#      (rootfs.sh) and kernel + initramfs (initrd.sh); boot the VMs, their
#      cluster NICs joined by a QEMU UDP socket pair on loopback;
#   2. ansible-playbook site.yml; an 8 MiB round trip through node1's mount
#      (striped over both data servers);
#   3. the playbook again: changed=0 on every host;
#   4. reboot node1 (a data server and the client): surge-ods active, the
#      mount back, the file reads back the same.
# Env: SURGE_BUILD_DIR, SURGE_SOURCE_DIR (set by ctest); SURGE_DEPLOY_CACHE
# (default /var/cache/surge-deploy); SURGE_DEPLOY_KEEP=1 keeps the VM folder;
# SURGE_DEPLOY_ACCEL (default tcg,thread=multi: emulated, see ansible/README.md;
# kvm on a host whose KVM boots stock kernels).
set -uo pipefail
src=${SURGE_SOURCE_DIR:?} build=${SURGE_BUILD_DIR:?}
cache=${SURGE_DEPLOY_CACHE:-/var/cache/surge-deploy}
accel=${SURGE_DEPLOY_ACCEL:-tcg,thread=multi}
here=$src/tests/deploy
t0=$SECONDS
say() { echo "deploy_test [$((SECONDS - t0))s]: $*"; }
die() { echo "deploy_test [$((SECONDS - t0))s]: FAILED: $*" >&2; exit 1; }

for tool in qemu-system-x86_64 qemu-img cpack ansible-playbook ssh python3 openssl; do
  command -v "$tool" >/dev/null || die "missing '$tool' (run scripts/install-deps.sh)"
done

job=$(mktemp -d /tmp/surge-deploy.XXXXXX)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  if [ "${SURGE_DEPLOY_KEEP:-0}" = 1 ]; then echo "deploy_test: kept $job"; else rm -rf "$job"; fi
}
trap cleanup EXIT
# Consoles of every VM on failure: where a boot or a daemon stopped.
show_consoles() {
  local f
  for f in "$job"/*/console.log; do echo "--- $f (tail)"; tail -25 "$f"; done
}

say "packages"
(cd "$build" && cpack -G DEB -B "$job/packages") >"$job/cpack.log" 2>&1 ||
  { tail -20 "$job/cpack.log"; die "cpack in $build"; }
rm -rf "$job/packages/_CPack_Packages"

say "image (cached in $cache)"
img=$(bash "$here/rootfs.sh" "$cache") || die "building the VM image (tests/deploy/rootfs.sh)"
read -r vmlinuz initrd < <(bash "$here/initrd.sh" "$cache") ||
  die "the VMs' kernel and initramfs (tests/deploy/initrd.sh)"
[ -n "${initrd:-}" ] || die "the VMs' kernel and initramfs (tests/deploy/initrd.sh)"
key=$img/id_ed25519

# Free ports on loopback: each VM's end of the cluster link, and its ssh.
read -r u1 u2 s1 s2 < <(python3 -c '
import socket
socks = []
for kind in [socket.SOCK_DGRAM] * 2 + [socket.SOCK_STREAM] * 2:
    s = socket.socket(socket.AF_INET, kind); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))')

# boot NAME INDEX LOCAL_UDP PEER_UDP SSH_PORT: one emulated vCPU, 1 GiB,
# a throw-away overlay of the image, the kernel booted directly.
boot() {
  local name=$1 i=$2 here_udp=$3 peer_udp=$4 ssh=$5 d=$job/$1
  mkdir -p "$d"
  qemu-img create -q -f qcow2 -b "$img/rootfs.img" -F raw "$d/disk.qcow2" || die "overlay for $name"
  qemu-system-x86_64 -machine q35 -accel "$accel" -cpu max -smp 1 -m 1024 \
    -display none -monitor none -serial "file:$d/console.log" \
    -kernel "$vmlinuz" -initrd "$initrd" \
    -append "console=ttyS0 quiet mitigations=off net.ifnames=0 ipv6.disable=1 systemd.hostname=$name \
ip=10.0.2.15:::255.255.255.0::eth0:none ip=10.77.0.1$i:::255.255.255.0::eth1:none" \
    -drive "file=$d/disk.qcow2,if=virtio,format=qcow2,cache=unsafe" \
    -netdev "user,id=mgmt,restrict=on,hostfwd=tcp:127.0.0.1:$ssh-:22" \
    -device "virtio-net-pci,netdev=mgmt,mac=52:54:00:00:00:1$i" \
    -netdev "socket,id=cluster,udp=127.0.0.1:$peer_udp,localaddr=127.0.0.1:$here_udp" \
    -device "virtio-net-pci,netdev=cluster,mac=52:54:00:77:00:1$i" \
    -object rng-random,id=rng,filename=/dev/urandom -device virtio-rng-pci,rng=rng \
    >"$d/qemu.log" 2>&1 &
  pids+=($!)
}
say "booting srv1 and node1"
boot srv1 1 "$u1" "$u2" "$s1"
boot node1 2 "$u2" "$u1" "$s2"

ssh_opts=(-i "$key" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR
          -o ConnectTimeout=10 -o BatchMode=yes)
declare -A port=([srv1]=$s1 [node1]=$s2)
on() { local h=$1; shift; ssh "${ssh_opts[@]}" -p "${port[$h]}" root@127.0.0.1 "$@"; }
# wait_ssh HOST: the VM booted to multi-user and sshd answers.
wait_ssh() {
  local h=$1 end=$((SECONDS + 600))
  until on "$h" true 2>/dev/null; do
    [ "$SECONDS" -lt "$end" ] || { show_consoles; die "$h: no ssh on port ${port[$h]} within 600 s"; }
    sleep 3
  done
}
for h in srv1 node1; do wait_ssh "$h"; done
say "VMs up"

openssl rand -hex 32 > "$job/cluster.key"
cat > "$job/inventory.ini" <<INV
[surge_mds]
srv1 ansible_port=$s1 surge_address=10.77.0.11

[surge_ods]
srv1
node1 ansible_port=$s2 surge_address=10.77.0.12

[surge_clients]
node1

[all:vars]
ansible_host=127.0.0.1
ansible_user=root
ansible_ssh_private_key_file=$key
ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'
ansible_python_interpreter=/usr/bin/python3
surge_deb_dir=$job/packages
surge_cluster_key_src=$job/cluster.key
surge_mds_default_stripe_count=2
# The VMs have 1 GiB: a smaller data-server pool than the default.
surge_ods_buffers_1m=16
INV
# Pipelining: one ssh round trip per task instead of several, each a python
# start on an emulated CPU.
export ANSIBLE_NOCOLOR=1 ANSIBLE_HOST_KEY_CHECKING=False ANSIBLE_LOCALHOST_WARNING=false \
       ANSIBLE_PIPELINING=True
# playbook N: one run, its output kept as $job/playbook-N.log.
playbook() {
  ansible-playbook -i "$job/inventory.ini" "$src/ansible/site.yml" >"$job/playbook-$1.log" 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] || { tail -40 "$job/playbook-$1.log"; show_consoles; die "playbook run $1 (rc $rc)"; }
}
say "playbook, first run"
playbook 1
say "round trip through node1:/mnt/surge"
on node1 'set -e; head -c 8M /dev/urandom > /root/rt.src; cp /root/rt.src /mnt/surge/rt; sync
          echo 3 > /proc/sys/vm/drop_caches; cmp /root/rt.src /mnt/surge/rt' ||
  { show_consoles; die "8 MiB written through node1's mount did not read back the same"; }
on node1 'findmnt -n -o SOURCE,FSTYPE /mnt/surge' || die "node1: /mnt/surge not a mount"
on node1 'surgectl --mds tcp://10.77.0.11:7100 targets' || die "node1: surgectl targets"

say "playbook, second run (must change nothing)"
playbook 2
recap=$(sed -n '/PLAY RECAP/,$p' "$job/playbook-2.log")
echo "$recap"
echo "$recap" | grep -q ': ok=' || die "no PLAY RECAP in the second playbook run"
echo "$recap" | grep -E ': ok=' | grep -vq 'changed=0 ' &&
  { grep -B3 'changed:' "$job/playbook-2.log" | head -40; die "second playbook run changed something"; }

say "reboot node1 (a data server and the client)"
boot_id=$(on node1 cat /proc/sys/kernel/random/boot_id) || die "node1: no boot id"
on node1 'systemctl reboot' 2>/dev/null
sleep 10
end=$((SECONDS + 600))
until now=$(on node1 cat /proc/sys/kernel/random/boot_id 2>/dev/null) && [ "$now" != "$boot_id" ]; do
  [ "$SECONDS" -lt "$end" ] || { show_consoles; die "node1: not back with a new boot within 600 s"; }
  sleep 3
done
say "node1 rebooted; waiting for surge-ods and the mount"
on node1 'systemctl is-system-running --wait >/dev/null; systemctl is-active surge-ods' ||
  { on node1 'journalctl -b -u surge-ods --no-pager | tail -30'; die "node1: surge-ods not active after reboot"; }
on node1 'findmnt -n -t fuse.surge /mnt/surge' ||
  { on node1 'journalctl -b --no-pager | grep -i surge | tail -30'; die "node1: /mnt/surge not mounted after reboot"; }
# The client retries a data server it finds down until io_timeout; the MDS
# learns of node1's data server's return at its next registration.
ok=0
for _ in $(seq 1 30); do
  if on node1 'echo 3 > /proc/sys/vm/drop_caches; cmp /root/rt.src /mnt/surge/rt'; then ok=1; break; fi
  sleep 5
done
[ "$ok" = 1 ] || die "after the reboot, node1:/mnt/surge/rt does not read back what was written"
say "passed: deployed, round trip, idempotent, services and mount back after reboot"
