#!/bin/bash
# Build the QEMU drive host: the Debian cloud kernel (apt-get download; the NVMe driver, io_uring and
# PCIe hot-plug are built in) and an uncompressed initramfs (boots fastest) of busybox-static, this
# host's /usr/sbin/nvme and /usr/bin/fio with every library ldd lists, the virtio_console modules,
# init.sh and agent.sh. Usage: build_initramfs.sh OUT_DIR KERNEL_DL_DIR
set -euo pipefail
OUT=$1; DL=$2; HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT" "$DL"
cd "$DL"
KPKG=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
[ -n "$KPKG" ] || { echo "no Debian cloud kernel package found (apt-cache depends linux-image-cloud-amd64); run apt-get update" >&2; exit 1; }
ls "${KPKG}"_*.deb >/dev/null 2>&1 || apt-get download "$KPKG" >/dev/null
KDEB=$(ls "${KPKG}"_*.deb | head -1)
K=$OUT/.kroot; rm -rf "$K"; mkdir -p "$K"; dpkg-deb -x "$KDEB" "$K"
KVER=$(ls "$K/lib/modules")
cp "$K/boot/vmlinuz-$KVER" "$OUT/vmlinuz"
R=$OUT/.root; rm -rf "$R"
mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,usr/lib,lib,lib64,etc,proc,sys,dev,tmp,run,mnt,root,lib/modules}
cp /bin/busybox "$R/bin/busybox"
for b in /usr/sbin/nvme /usr/bin/fio; do
  cp "$b" "$R$b"
  for l in $(ldd "$b" | awk '/=> \//{print $3} /^\t\/lib64/{print $1}'); do
    mkdir -p "$R$(dirname "$l")"; [ -e "$R$l" ] || cp -L "$l" "$R$l"
  done
done
printf '/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu/ceph\n' > "$R/etc/ld.so.conf"
for m in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_console; do
  f=$(find "$K/lib/modules/$KVER" -name "$m.ko*" | head -1); cp "$f" "$R/lib/modules/$m.ko"
done
cp "$HERE/init.sh" "$R/init"; chmod 755 "$R/init"
cp "$HERE/agent.sh" "$R/bin/agent"; chmod 755 "$R/bin/agent"
echo "root:x:0:0:root:/root:/bin/sh" > "$R/etc/passwd"
(cd "$R" && find . | /bin/busybox cpio -o -H newc 2>/dev/null > "$OUT/initramfs.cpio.tmp")
mv "$OUT/initramfs.cpio.tmp" "$OUT/initramfs.cpio"
echo "$KPKG ($KVER)" > "$OUT/kernel.txt"
rm -rf "$K" "$R"
