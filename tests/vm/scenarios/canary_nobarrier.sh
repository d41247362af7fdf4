# Flushes dropped on the way (ext4 mounted nobarrier on a disk whose write cache is "write back") show as a flush ratio of 0, next to about 1 for the same kind of filesystem with barriers.
# timeout: 150
# disk: nb 64M
# qemu: -device nvme,id=nvmenb,serial=DPNB,drive=nb
# The nobarrier filesystem goes on the SATA disk where there is one (amd64), else (arm64's virt
# machine has no AHCI) on a second NVMe disk; the one with barriers on the first NVMe disk.
# The init waits for nvme0n1 alone; the second controller may come up a moment later.
disks() {
	B=$(nvme_by_serial DPNVME0)
	if [ -e /sys/block/sda ]; then A=sda; else A=$(nvme_by_serial DPNB); fi
	[ -n "$A" ] && [ -n "$B" ]
}
check "two disks" wait_for 30 disks || exit 1
note "$A nobarrier, $B with barriers"
check "$A has a write-back cache" [ "$(cat /sys/block/$A/queue/write_cache)" = "write back" ]
# No lazy inode table init on $A: its kernel thread zeroes the tables after mount and sends a
# cache flush of its own whatever nobarrier says, which a probe cycle then counts (1 in 17).
mkfs.ext4 -q -F -E lazy_itable_init=0 /dev/$A && mkfs.ext4 -q -F /dev/$B || { fail mkfs "mkfs.ext4"; exit 1; }
mkdir -p /mnt/nb /mnt/b
check "ext4 on $A mounted nobarrier" mount -o nobarrier /dev/$A /mnt/nb
check "ext4 on $B mounted with barriers" mount /dev/$B /mnt/b
daemon_start --no-collector.smart --canary.path=/mnt/nb --canary.path=/mnt/b --canary.interval=300ms \
	--diskstats.interval=300ms || exit 1
# A cycle is one spaced probe and a burst of 16 (--canary.burst); its flushes are counted when the
# cycle ends, so probes_total passes 15 inside the first cycle, before any flush is counted. Three
# whole cycles: probe 51 returns in the third, so the first two have their flush counts.
both() { canary_probes_at_least /mnt/nb 51 && canary_probes_at_least /mnt/b 51; }
check "3 probe cycles on each" wait_for 60 both
check_metric "diskpulse_sync_flush_ratio{path=\"/mnt/nb\",device=\"$A\",mode=\"fdatasync\"}" == 0
check_metric "diskpulse_sync_flush_ratio{path=\"/mnt/b\",device=\"$B\",mode=\"fdatasync\"}" '>=' 0.9
check_metric "diskpulse_disk_write_cache_info{device=\"$A\",mode=\"write back\"}" == 1
note "nobarrier median $(canary /mnt/nb recent_seconds 'regime="idle",quantile="0.5"') s, barrier median $(canary /mnt/b recent_seconds 'regime="idle",quantile="0.5"') s"
check "daemon exits 0" daemon_stop
