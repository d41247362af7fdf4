# The failing member found: an md RAID1 over two dm-delay mappings of two NVMe disks, written to all along. The daemon ties both members to the array (diskpulse_disk_set_info set="md0"); a live Prometheus on the host with the shipped rules (the disk groups' durations divided by 60: their hour is a minute, their 5-minute rates 5 s) fires nothing for a healthy minute and more, then, with 20 ms added to every I/O of one member, DiskpulseDiskSlowerThanSiblings names that member and not the other.
# timeout: 400
# disk: nvme1disk 64M
# qemu: -device nvme,id=nvme1,serial=DPNVME1,drive=nvme1disk
# prometheus: 60 diskpulse.disk diskpulse.alerts.disk
# runbook: DiskpulseDiskSlowerThanSiblings
need dmsetup
modprobe dm-delay 2>/dev/null || skip "no dm-delay module"
modprobe md_mod 2>/dev/null && modprobe raid1 2>/dev/null || skip "no md raid1 module"
check "second NVMe disk" wait_for 10 block_present nvme1n1
SZ=$(blockdev --getsz /dev/nvme0n1)
check "dm-delay 0 ms over nvme0n1" dmsetup create ma --table "0 $SZ delay /dev/nvme0n1 0 0"
check "dm-delay 0 ms over nvme1n1" dmsetup create mb --table "0 $SZ delay /dev/nvme1n1 0 0"
A=$(basename "$(readlink -f /dev/mapper/ma)")
B=$(basename "$(readlink -f /dev/mapper/mb)")
# md0 without mdadm, through sysfs (Documentation/admin-guide/md.rst): no superblock, both
# members in sync from the start (no resync writing one member only).
M=/sys/block/md0/md
mk_md() {
	echo md0 >/sys/module/md_mod/parameters/new_array && echo none >$M/metadata_version &&
		echo raid1 >$M/level && echo 2 >$M/raid_disks &&
		cat /sys/block/$A/dev >$M/new_dev && cat /sys/block/$B/dev >$M/new_dev &&
		echo 0 >$M/dev-$A/slot && echo 1 >$M/dev-$B/slot &&
		for d in $M/dev-$A $M/dev-$B; do echo 0 >$d/offset && echo $((SZ / 2)) >$d/size || return 1; done &&
		echo $((SZ / 2)) >$M/component_size && echo none >$M/resync_start && echo active >$M/array_state
}
check "md0: RAID1 over $A and $B" mk_md
note "$(grep -A1 '^md0' /proc/mdstat | tr '\n' ' ')"
# writes all along: 4 KiB direct writes, mirrored to both members
( i=0; while :; do dd if=/dev/zero of=/dev/md0 bs=4k count=20 seek=$((i % 800)) oflag=direct 2>/dev/null; i=$((i + 20)); sleep 0.2; done ) &
LOAD=$!
daemon_start --no-collector.smart --no-collector.canary --diskstats.interval=1s || exit 1
check_metric "diskpulse_disk_set_info{device=\"$A\",set=\"md0\"}" == 1
check_metric "diskpulse_disk_set_info{device=\"$B\",set=\"md0\"}" == 1
check_metric "diskpulse_disk_set_info{device=\"nvme0n1\"}" absent
check "the host's Prometheus scrapes the daemon" wait_for 60 prom_has 'up{job="diskpulse"} == 1'
check "Prometheus: both members' write await with their set" wait_for 30 eval \
	'[ "$(prom "count(set:diskpulse_disk_write_await_seconds:rate5m{set=\"md0\"})" | grep -o "\"[0-9]*\"]")" = "\"2\"]" ]'
# A healthy minute and a half: longer than the scaled hour of "for".
sleep 90
note "write await now: $(prom 'set:diskpulse_disk_write_await_seconds:rate5m' | grep -o '"device":"[^"]*"\|"[0-9.e-]*"]' | tr '\n' ' ')"
note "alerts pending or firing while both members were healthy: $(alerts_seen)"
# Fired, not pending: under TCG on a busy host a healthy member's scaled 5-second rate can pass
# twice its sibling's for a moment (both sit near the 2 ms floor), which is what the rule's "for"
# absorbs; only an alert that outlasted it would page.
check "Prometheus: nothing fired while both members were healthy" \
	eval '! prom_has "count_over_time(ALERTS{alertstate=\"firing\",alertname=\"DiskpulseDiskSlowerThanSiblings\"}[1h])"'

delay() { dmsetup suspend mb && dmsetup reload mb --table "0 $SZ delay /dev/nvme1n1 0 $1" && dmsetup resume mb; }
check "20 ms added to every I/O of $B" delay 20
check "Prometheus: DiskpulseDiskSlowerThanSiblings names $B" \
	wait_for 200 firing DiskpulseDiskSlowerThanSiblings "device=\"$B\",set=\"md0\""
note "write await now: $(prom 'set:diskpulse_disk_write_await_seconds:rate5m' | grep -o '"device":"[^"]*"\|"[0-9.e-]*"]' | tr '\n' ' ')"
check "... and not $A" eval '! prom_has "ALERTS{alertname=\"DiskpulseDiskSlowerThanSiblings\",device=\"$A\"}"'
# The runbook's commands while it fires (tests/runbook/guest.py): the member is a dm device, so
# smartctl asks the disk under it, as the runbook says.
runbook DiskpulseDiskSlowerThanSiblings md DEV=$B SIBLING=$A UNDER=nvme1n1
kill $LOAD
wait $LOAD 2>/dev/null
check "daemon exits 0" daemon_stop
# Tidying only (the guest goes away with the test): the array may still be busy for a moment
# (the killed load's last I/Os), and its refusal is no verdict of this scenario.
echo inactive >$M/array_state 2>/dev/null || true
echo clear >$M/array_state 2>/dev/null || true
