# Flushes dropped on the way (ext4 mounted nobarrier on a disk whose write cache is "write back") show as a flush ratio of 0, next to about 1 for the same kind of filesystem with barriers.
# timeout: 150
A=sda B=nvme0n1
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
check_metric 'diskpulse_sync_flush_ratio{path="/mnt/nb",device="sda",mode="fdatasync"}' == 0
check_metric 'diskpulse_sync_flush_ratio{path="/mnt/b",device="nvme0n1",mode="fdatasync"}' '>=' 0.9
check_metric 'diskpulse_disk_write_cache_info{device="sda",mode="write back"}' == 1
note "nobarrier median $(canary /mnt/nb recent_seconds 'regime="idle",quantile="0.5"') s, barrier median $(canary /mnt/b recent_seconds 'regime="idle",quantile="0.5"') s"
check "daemon exits 0" daemon_stop
