# Writes failing with EIO under the canary (dm-flakey error_writes) are counted as EIO, the target goes down and the daemon keeps serving; with the device healthy and the filesystem mounted again the target is up after a fresh cycle.
# timeout: 200
need dmsetup
modprobe dm-flakey 2>/dev/null || skip "no dm-flakey module"
D=nvme0n1
mkfs.ext4 -q -F /dev/$D || { fail mkfs "mkfs.ext4 /dev/$D"; exit 1; }
SZ=$(blockdev --getsz /dev/$D)
check "linear mapping over $D" dmsetup create flaky --table "0 $SZ linear /dev/$D 0"
mkdir -p /mnt/f
check "ext4 mounted on /dev/mapper/flaky" mount /dev/mapper/flaky /mnt/f
daemon_start --no-collector.smart --canary.path=/mnt/f --canary.interval=300ms --diskstats.interval=300ms || exit 1
check "canary up" wait_for 30 canary_up /mnt/f
check "3 probes" wait_for 30 canary_probes_at_least /mnt/f 3

# From now on every write to the device fails (up 0 s, down for an hour).
check "dm-flakey error_writes loaded" dmsetup reload flaky --table "0 $SZ flakey /dev/$D 0 0 3600 1 error_writes"
check "dm-flakey active" dmsetup resume flaky
eio() { scrape && num_cmp "$(canary /mnt/f errors_total 'errno="EIO"')" '>=' 1; }
check "EIO counted" wait_for 30 eio
check_metric 'diskpulse_sync_target_up{path="/mnt/f",mode="fdatasync"}' == 0
check "still serving /-/healthy" http_get /-/healthy /tmp/healthy
note "errors: $(grep '^diskpulse_sync_errors_total' "$METRICS" | tr '\n' ' ')"
n0=$(canary /mnt/f probes_total)

# Heal: unmount first (a suspend would have to freeze a filesystem that cannot write), then the
# linear table again, a check, and a fresh mount. Meanwhile the path lies on the root filesystem.
unmounted() { umount /mnt/f 2>/dev/null; }
check "unmounted (the canary closed its failed file)" wait_for 20 unmounted
check "linear mapping back" dmsetup reload flaky --table "0 $SZ linear /dev/$D 0"
check "device healthy" dmsetup resume flaky
e2fsck -fy /dev/mapper/flaky >/dev/null 2>&1
check "mounted again" mount /dev/mapper/flaky /mnt/f
DM=$(basename "$(readlink -f /dev/mapper/flaky)")
back() {
	canary_up /mnt/f && num_cmp "$(canary /mnt/f probes_total)" '>' "$n0" &&
		[ "$(metric_label 'diskpulse_sync_target_up{path="/mnt/f"}' device)" = "$DM" ]
}
check "up again on $DM after a fresh cycle" wait_for 30 back
check_metric 'diskpulse_sync_errors_total{path="/mnt/f",mode="fdatasync",errno="EIO"}' '>=' 1
check_exposition "after the canary's EIO"
check "daemon exits 0" daemon_stop
umount /mnt/f
