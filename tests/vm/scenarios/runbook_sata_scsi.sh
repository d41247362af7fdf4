# The runbook's SATA and SCSI sections, and the SMART reading ones, run where their alerts fire. A scsi_debug disk that predicts its failure and cannot read a sector raises DiskpulseSmartUnhealthy in a live Prometheus on the host with the shipped rules (their hour 30 seconds); SMART switched off on QEMU's SATA disk raises DiskpulseSmartReadsFailing and then DiskpulseSmartDataStale; a daemon without capabilities (a user namespace) raises DiskpulseSmartReadsFailing for reason="permission". A SATA command that times out makes the kernel reset the link, which is what the link errors' kernel log shows. Each section's commands then run in the guest with the Debian tools and show what the runbook says (tests/runbook/guest.py).
# timeout: 480
# runbook: DiskpulseSmartUnhealthy, DiskpulseMediaErrorsIncreasing, DiskpulseSectorsReallocated, DiskpulseSataLinkErrors, DiskpulseSmartReadsFailing, DiskpulseSmartDataStale
# A second SATA disk, the one whose link is reset.
# disk: slow 64M
# qemu: -device ide-hd,id=sata1,bus=ahci.1,drive=slow,serial=DPSLOW1
# prometheus: 120 diskpulse.alerts.smart
smart_up() { scrape && [ "$(metric "diskpulse_smart_up{device=\"$1\"}")" = 1 ]; }
scsi_debug_disk() {
	for _b in /sys/block/sd*; do
		[ "$(tr -d ' ' <"$_b/device/model" 2>/dev/null)" = scsi_debug ] && echo "${_b#/sys/block/}" && return 0
	done
	return 1
}
# the SATA disk's port: its ataN (the kernel names link resets by port)
ata_port() { readlink -f "/sys/block/$1" | grep -o 'ata[0-9]*' | head -n 1; }
# the disk on port ataN: AHCI port 0 is ata1 (QEMU's sata0, serial DPSATA0), port 1 ata2 (sata1);
# their sdX names depend on which probe finishes first
on_port() {
	for _b in /sys/block/sd*; do
		[ "$(ata_port "${_b#/sys/block/}")" = "$1" ] && echo "${_b#/sys/block/}" && return 0
	done
	return 1
}

check "the second SATA disk" wait_for 20 on_port ata2
SATA=$(on_port ata1) SLOW=$(on_port ata2)
# opts=2: reads of sector 4660 (0x1234) fail with MEDIUM ERROR, unrecovered read error.
modprobe scsi_debug ptype=0 dev_size_mb=16 opts=2 || skip "no scsi_debug module"
check "the scsi_debug disk" wait_for 15 scsi_debug_disk
SD=$(scsi_debug_disk) || exit 1
udevadm settle -t 10 2>/dev/null
note "SATA disks $SATA (DPSATA0) on ata1 and $SLOW (DPSLOW1) on ata2, scsi_debug $SD"

# A link reset: reads of $SLOW throttled by QEMU to 2 KiB/s, its command timeout 2 s. The first of
# three 8 KiB reads passes (a throttle lets a request through while its bucket is empty), the
# second waits for about 4 s, times out, and the kernel resets the link. (QEMU finishes the
# throttled read during the port reset, so the guest stands still for a moment.) Before the
# daemon starts: with its SMART reads of the disk going on, the timed-out read ended in the SCSI
# layer (DID_TIME_OUT) without libata's error handling, and nothing was reset.
throttle() {
	qmp "{\"execute\":\"block_set_io_throttle\",\"arguments\":{\"id\":\"sata1\",\"bps\":0,\"bps_rd\":$1,\"bps_wr\":0,\"iops\":0,\"iops_rd\":0,\"iops_wr\":0}}" >/dev/null
}
check "reads of $SLOW throttled to 2 KiB/s" throttle 2048
echo 2 >/sys/block/$SLOW/device/timeout
dd if=/dev/$SLOW of=/dev/null bs=8k count=3 skip=100 iflag=direct 2>/dev/null &
DD=$!
check "the kernel resets the link of $SLOW (ata2)" wait_for 60 eval "dmesg | grep -q 'ata2: hard resetting link'"
check "$SLOW's reads no longer throttled" throttle 0
wait $DD
echo 30 >/sys/block/$SLOW/device/timeout

daemon_start --smart.interval=2s || exit 1
check "SMART of $SATA and $SD" wait_for 30 eval 'smart_up $SATA && smart_up $SD'
check "the host's Prometheus scrapes the daemon" wait_for 60 prom_has 'up{job="diskpulse"} == 1'
check "Prometheus has $SD healthy" wait_for 30 prom_has "diskpulse_smart_healthy{device=\"$SD\"} == 1"

# The failing SCSI disk: it predicts its failure, and a read fails.
check "sdparm --set=TEST=1 --page=ie $SD" sdparm -q --set=TEST=1 --page=ie /dev/$SD
if dd if=/dev/$SD of=/dev/null bs=512 skip=4660 count=1 iflag=direct 2>/dev/null; then
	fail "a read of sector 4660 of $SD fails" "it succeeded"
else
	ok "a read of sector 4660 of $SD fails"
fi
check "Prometheus: DiskpulseSmartUnhealthy fires for $SD" wait_for 60 firing DiskpulseSmartUnhealthy "device=\"$SD\""
runbook DiskpulseSmartUnhealthy scsi DEV=$SD
runbook DiskpulseMediaErrorsIncreasing scsi DEV=$SD

# QEMU's SATA disk as it is (no sector can be reallocated on it): attribute 5, a self-test.
runbook DiskpulseSectorsReallocated ata DEV=$SATA
runbook DiskpulseSataLinkErrors link-reset DEV=$SLOW

# SMART switched off on the SATA disk: its reads fail (the drive refuses them) after a success.
check "smartctl -s off $SATA" smartctl -q silent -s off /dev/$SATA
check "Prometheus: DiskpulseSmartReadsFailing fires for $SATA" \
	wait_for 90 firing DiskpulseSmartReadsFailing "device=\"$SATA\""
runbook DiskpulseSmartReadsFailing device_status DEV=$SATA
check "Prometheus: DiskpulseSmartDataStale fires for $SATA" \
	wait_for 90 firing DiskpulseSmartDataStale "device=\"$SATA\""
runbook DiskpulseSmartDataStale device_status DEV=$SATA
check "smartctl -s on $SATA" smartctl -q silent -s on /dev/$SATA
check "daemon exits 0" daemon_stop

# The daemon without capabilities: uid 0 in a new user namespace holds none where the kernel
# checks them (as a unit that lost its CapabilityBoundingSet), so every read fails "permission".
printf '#!/bin/sh\nexec unshare -U -r /bin/diskpulse "$@"\n' >/tmp/dp-userns
chmod 755 /tmp/dp-userns
DAEMON=/tmp/dp-userns
daemon_start --smart.interval=2s || exit 1
check "Prometheus: DiskpulseSmartReadsFailing fires for nvme0n1" \
	wait_for 90 firing DiskpulseSmartReadsFailing 'device="nvme0n1"'
runbook DiskpulseSmartReadsFailing permission DEV=nvme0n1
note "alerts pending or firing: $(alerts_seen)"
check "daemon exits 0" daemon_stop
