# Flush loss seen through stacked devices: ext4 mounted nobarrier on a dm-linear mapping over sda (write-back cache) and ext4 with barriers on a dm-linear mapping over nvme0n1 (write-back cache too). The canary names the disk below each mapping (diskpulse_sync_backing_disk_info), the flush ratio is 0 on the first and about 1 on the second, and a live Prometheus on the host with the shipped rules (the sync alerts' durations divided by 60: their 15 minutes are 15 s) fires DiskpulseFlushesNotReachingDisk for the first target, labelled with its dm device, and never for the second.
# timeout: 240
# prometheus: 60 diskpulse.alerts.sync
need dmsetup
A=sda B=nvme0n1
check "$A has a write-back cache" [ "$(cat /sys/block/$A/queue/write_cache)" = "write back" ]
check "$B has a write-back cache" [ "$(cat /sys/block/$B/queue/write_cache)" = "write back" ]
check "dm-linear over $A" dmsetup create lina --table "0 $(blockdev --getsz /dev/$A) linear /dev/$A 0"
check "dm-linear over $B" dmsetup create linb --table "0 $(blockdev --getsz /dev/$B) linear /dev/$B 0"
DMA=$(basename "$(readlink -f /dev/mapper/lina)")
DMB=$(basename "$(readlink -f /dev/mapper/linb)")
note "$DMA over $A says '$(cat /sys/block/$DMA/queue/write_cache)' of its own cache, $DMB over $B '$(cat /sys/block/$DMB/queue/write_cache)'"
# No lazy inode table init: its kernel thread sends flushes of its own whatever nobarrier says.
mkfs.ext4 -q -F -E lazy_itable_init=0 /dev/mapper/lina && mkfs.ext4 -q -F /dev/mapper/linb ||
	{ fail mkfs "mkfs.ext4"; exit 1; }
mkdir -p /mnt/nb /mnt/b
check "ext4 on $DMA mounted nobarrier" mount -o nobarrier /dev/mapper/lina /mnt/nb
check "ext4 on $DMB mounted with barriers" mount /dev/mapper/linb /mnt/b
daemon_start --no-collector.smart --canary.path=/mnt/nb --canary.path=/mnt/b --canary.interval=300ms \
	--diskstats.interval=1s || exit 1
# Three whole cycles of a spaced probe and a burst of 16 (flushes are counted at a cycle's end).
both() { canary_probes_at_least /mnt/nb 51 && canary_probes_at_least /mnt/b 51; }
check "3 probe cycles on each" wait_for 60 both
check_metric "diskpulse_sync_backing_disk_info{path=\"/mnt/nb\",device=\"$DMA\",mode=\"fdatasync\",disk=\"$A\"}" == 1
check_metric "diskpulse_sync_backing_disk_info{path=\"/mnt/b\",device=\"$DMB\",mode=\"fdatasync\",disk=\"$B\"}" == 1
check "one backing disk each" [ "$(metric_count diskpulse_sync_backing_disk_info)" = 2 ]
check_metric "diskpulse_sync_flush_ratio{path=\"/mnt/nb\",device=\"$DMA\",mode=\"fdatasync\"}" == 0
check_metric "diskpulse_sync_flush_ratio{path=\"/mnt/b\",device=\"$DMB\",mode=\"fdatasync\"}" '>=' 0.9
check_metric "diskpulse_disk_write_cache_info{device=\"$A\",mode=\"write back\"}" == 1
check "the host's Prometheus scrapes the daemon" wait_for 60 prom_has 'up{job="diskpulse"} == 1'
# 15 s of "for", scrapes every second: well within 90 s.
check "Prometheus: DiskpulseFlushesNotReachingDisk fires for /mnt/nb on $DMA" \
	wait_for 90 firing DiskpulseFlushesNotReachingDisk "path=\"/mnt/nb\",device=\"$DMA\""
check "Prometheus: ... and never for /mnt/b, whose flushes reach $B" \
	eval '! prom_has "count_over_time(ALERTS{alertname=\"DiskpulseFlushesNotReachingDisk\",path=\"/mnt/b\"}[1h])"'
note "alerts pending or firing in Prometheus: $(alerts_seen)"
check "daemon exits 0" daemon_stop
umount /mnt/nb /mnt/b
dmsetup remove lina
dmsetup remove linb
