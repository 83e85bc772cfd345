#!/bin/busybox sh
# /init of the QEMU drive host: a busybox system with the distribution's nvme-cli and fio, and one
# command agent on the virtio-serial port named "agent" (agent.sh). Nothing else runs in the guest.
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tracefs nodev /sys/kernel/tracing   # the block tracepoints (a plan's timing.block_trace)
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mkdir -p /dev/pts /dev/shm /mnt
mount -t devpts devpts /dev/pts
for m in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_console; do
  insmod /lib/modules/$m.ko || echo "insmod $m failed" > /dev/console
done
hostname drivehost
P=""
for i in $(seq 1 100); do
  for d in /sys/class/virtio-ports/*; do
    [ -e "$d/name" ] && [ "$(cat "$d/name")" = agent ] && P=/dev/$(basename "$d")
  done
  [ -n "$P" ] && [ -e "$P" ] && break
  P=""; sleep 0.05
done
echo "AGENT on ${P:-nothing}" > /dev/console
[ -n "$P" ] && ( while true; do /bin/agent "$P"; sleep 0.05; done ) &
while true; do setsid cttyhack sh </dev/console >/dev/console 2>&1; done
