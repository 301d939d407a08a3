#!/bin/bash
# initrd.sh: the kernel the deploy-test VMs boot directly (-kernel/-initrd),
# this machine's own Debian kernel (package linux-image-amd64, as the RDMA
# VM's), and a busybox initramfs for it, cached:
#
#   tests/deploy/initrd.sh CACHE_ROOT     -> prints "VMLINUZ INITRD"
#
# The initramfs loads every module a VM uses (virtio disk and NICs, ext4,
# FUSE for the client's mount), mounts /dev/vda and hands over to its
# systemd. It does in a second what Debian's initramfs does in a minute of
# emulation (udev, scripts), and the image then needs no kernel package.
# Cached by the kernel version and the hash of this file.
set -euo pipefail
CACHE_ROOT=${1:?usage: initrd.sh CACHE_ROOT}

kver=$(ls /boot/vmlinuz-*-amd64 2>/dev/null | sort -V | tail -1 | sed 's#^/boot/vmlinuz-##')
[ -n "$kver" ] || { echo "initrd: no /boot/vmlinuz-*-amd64 (package linux-image-amd64)" >&2; exit 1; }
[ -d "/lib/modules/$kver" ] || { echo "initrd: no /lib/modules/$kver for kernel $kver" >&2; exit 1; }
for tool in busybox cpio gzip modprobe; do
  command -v "$tool" >/dev/null || { echo "initrd: missing $tool (run scripts/install-deps.sh)" >&2; exit 1; }
done
# In load order: modprobe --show-depends lists each one's dependencies first.
MODULES="virtio_pci virtio_blk virtio_net virtio_rng crc32c_generic ext4 fuse"

hash=$(sha256sum "$0" | cut -c1-16)
initrd=$CACHE_ROOT/initrd-$kver-$hash.cpio.gz
if [ ! -s "$initrd" ]; then
  mkdir -p "$CACHE_ROOT"
  w=$(mktemp -d "$CACHE_ROOT/initrd.XXXXXX")
  trap 'rm -rf "$w"' EXIT
  mkdir -p "$w"/{bin,proc,sys,dev,newroot,modules}
  cp "$(command -v busybox)" "$w/bin/busybox"
  for applet in sh mount umount insmod sleep switch_root echo cat; do ln -s busybox "$w/bin/$applet"; done
  : > "$w/modules/order"
  for m in $MODULES; do
    modprobe -S "$kver" --show-depends "$m" | awk '$1 == "insmod" {print $2}'
  done | awk '!seen[$0]++' | while read -r f; do
    cp "$f" "$w/modules/"
    echo "$(basename "$f")" >> "$w/modules/order"
  done
  cat > "$w/init" <<'EOF'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules/order); do
  insmod /modules/$m || echo "surge-initrd: insmod $m failed" > /dev/console
done
i=0
while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
mount -t ext4 -o rw /dev/vda /newroot ||
  { echo "surge-initrd: cannot mount /dev/vda" > /dev/console; sleep 5; echo b > /proc/sysrq-trigger; }
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /sbin/init
EOF
  chmod +x "$w/init"
  (cd "$w" && find . | cpio -o -H newc --quiet | gzip -1) > "$w.cpio.gz"
  mv "$w.cpio.gz" "$initrd"
fi
echo "/boot/vmlinuz-$kver $initrd"
