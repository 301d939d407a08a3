#!/bin/bash
# rootfs.sh: the Debian 12 disk image every deploy-test VM boots, built with
# debootstrap from the mirror this machine's apt uses, and cached:
#
#   tests/deploy/rootfs.sh CACHE_ROOT      -> prints the image's folder
#
# The folder (CACHE_ROOT/<hash of this recipe>/) holds rootfs.img (ext4,
# systemd as init, sshd, python3 for Ansible, and every library the Surge
# packages depend on: the VMs have no route to any mirror, so apt installs
# the .debs from what is here, and fails loudly if a dependency is missing)
# and id_ed25519, the key root logs in with. A change of this file makes a
# new hash: a new image. The image holds no kernel: the VMs boot this
# machine's (vm_boot.sh), whose initramfs loads every module they need.
#
# The VMs run emulated (ansible/README.md), so the image is as small as it
# can be: minbase, no kernel or initramfs-tools, no timers, no fsck.
set -euo pipefail
CACHE_ROOT=${1:?usage: rootfs.sh CACHE_ROOT}

# Everything in the image. Runtime libraries: what dpkg-shlibdeps finds for
# the Surge binaries, plus fuse3 and ibverbs-providers (declared Depends).
PACKAGES=(
  systemd-sysv udev dbus openssh-server python3 python3-apt procps
  fuse3 ibverbs-providers
  libfuse3-3 libibverbs1 librdmacm1 libprotobuf-lite32 libprotobuf32 libspdlog1.10 libfmt9
  libssl3 libisal2 liburing2 libtomlplusplus3 librocksdb7.8 libsnappy1v5 liblz4-1
  libzstd1 libbz2-1.0 libnl-3-200 libnl-route-3-200 libgcc-s1 libstdc++6 zlib1g
  libgrpc++1.51 libgrpc29 libabsl20220623 libc-ares2 libre2-9 libprotoc32
)
IMAGE_MB=2048

hash=$( { cat "$0"; } | sha256sum | cut -c1-16)
out=$CACHE_ROOT/$hash
if [ -s "$out/rootfs.img" ] && [ -s "$out/id_ed25519" ]; then
  echo "$out"; exit 0
fi

for tool in debootstrap mkfs.ext4 ssh-keygen; do
  command -v "$tool" >/dev/null || { echo "rootfs: missing $tool (run scripts/install-deps.sh)" >&2; exit 1; }
done
# The mirror of this machine's own apt sources (deb822 or one-line form).
mirror=$(grep -hoE 'https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
           /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | tr -d ' ' || true)
[ -n "$mirror" ] || { echo "rootfs: no Debian mirror in /etc/apt/sources.list*" >&2; exit 1; }

mkdir -p "$CACHE_ROOT"
work=$(mktemp -d "$CACHE_ROOT/build.XXXXXX")
trap 'umount -R "$work/root" 2>/dev/null || true; rm -rf "$work"' EXIT
echo "rootfs: debootstrap bookworm from $mirror into $work/root" >&2
debootstrap --variant=minbase --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  bookworm "$work/root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
  { tail -30 "$work/debootstrap.log" >&2; echo "rootfs: debootstrap failed" >&2; exit 1; }

r=$work/root
ssh-keygen -q -t ed25519 -N "" -C surge-deploy-test -f "$work/id_ed25519"
install -d -m 700 "$r/root/.ssh"
install -m 600 "$work/id_ed25519.pub" "$r/root/.ssh/authorized_keys"
# Identity comes from the kernel command line (systemd.hostname=, ip=), so
# one image serves every VM.
: > "$r/etc/hostname"
# The initramfs mounts / read-write; a throw-away overlay needs no fsck.
echo "/dev/vda / ext4 defaults 0 0" > "$r/etc/fstab"
# ip= on the command line becomes .network files (systemd-network-generator).
chroot "$r" systemctl enable systemd-networkd.service systemd-network-generator.service >/dev/null 2>&1
# network-online.target waits for the configured links (the _netdev mount
# and the daemons are ordered after it).
chroot "$r" systemctl enable systemd-networkd-wait-online.service >/dev/null 2>&1
# Nothing periodic, no console on a screen the VMs do not have: every
# emulated cycle goes to booting, the playbook and Surge.
chroot "$r" systemctl mask apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer \
  e2scrub_all.timer e2scrub_reap.service fstrim.timer getty@tty1.service >/dev/null 2>&1
# No modules in the image (the initramfs loaded them all): nothing to load.
chroot "$r" systemctl mask kmod-static-nodes.service systemd-modules-load.service systemd-pstore.service \
  modprobe@drm.service modprobe@dm_mod.service modprobe@efi_pstore.service modprobe@loop.service \
  modprobe@configfs.service modprobe@fuse.service >/dev/null 2>&1
# The console login needs no password (the VM is reachable from this host only).
chroot "$r" passwd -d root >/dev/null
sed -i 's/^#\?UseDNS.*/UseDNS no/' "$r/etc/ssh/sshd_config"
# No mirror reachable: apt must not try.
rm -f "$r/etc/apt/sources.list"
chroot "$r" apt-get clean
rm -rf "$r/var/lib/apt/lists/"* "$r/usr/share/doc/"* "$r/usr/share/man/"* "$r/usr/share/locale/"*

echo "rootfs: writing the ext4 image" >&2
truncate -s "${IMAGE_MB}M" "$work/rootfs.img"
mkfs.ext4 -q -F -L surge-root -d "$r" "$work/rootfs.img"
rm -rf "$r"
mkdir -p "$out"
mv "$work/id_ed25519" "$work/id_ed25519.pub" "$work/rootfs.img" "$out/"
echo "$out"
