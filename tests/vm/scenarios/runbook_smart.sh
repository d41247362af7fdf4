# The runbook's SMART sections run where their alerts fire, in one guest: a live Prometheus on the host scrapes the daemon with the shipped rules (the SMART alerts' hour is 30 s). A daemon without capabilities raises DiskpulseSmartReadsFailing for reason="permission"; then, with them, a failing NVMe drive (QEMU's critical warning bit 2 and a sector that cannot be read) raises DiskpulseSmartUnhealthy and DiskpulseNvmeCriticalWarning, an NVMe drive whose own over-temperature threshold is set below its temperature the warning's temperature bit, a scsi_debug disk that predicts its failure and cannot read a sector DiskpulseSmartUnhealthy, and QEMU's SATA disk with SMART switched off DiskpulseSmartReadsFailing and DiskpulseSmartDataStale. A SATA read that times out makes the kernel reset the link. Each section's commands run in the guest with the Debian tools and show what the runbook says (tests/runbook/guest.py holds what each must show); sections whose condition QEMU's drives cannot produce (wear, spare, unsafe shutdowns, error log, throttling, reallocation) run on the nearest drive, and guest.py says what was not produced.
# timeout: 400
# runbook: DiskpulseSmartUnhealthy, DiskpulseNvmeCriticalWarning, DiskpulseMediaErrorsIncreasing, DiskpulseTemperatureHigh, DiskpulseTemperatureCritical, DiskpulseWearForecast, DiskpulseWearExhausted, DiskpulseSpareLow, DiskpulseUnsafeShutdown, DiskpulseNvmeErrorLogGrowing, DiskpulseNvmeThermalThrottling, DiskpulseSectorsReallocated, DiskpulseSataLinkErrors, DiskpulseSmartReadsFailing, DiskpulseSmartDataStale
# The failing NVMe drive: its reads of sector 65536 fail (blkdebug under a raw node; null-co stores nothing).
# qemu: -blockdev '{"driver":"raw","node-name":"bad1","file":{"driver":"blkdebug","inject-error":[{"event":"read_aio","errno":5,"sector":65536}],"image":{"driver":"null-co","size":67108864,"read-zeroes":true}}}' -device nvme,id=nvme1,serial=DPBAD1,drive=bad1
# A second SATA disk, the one whose link is reset.
# disk: slow 64M
# qemu: -device ide-hd,id=sata1,bus=ahci.1,drive=slow,serial=DPSLOW1
# prometheus: 120 diskpulse.alerts.smart
smart_up() { scrape && [ "$(metric "diskpulse_smart_up{device=\"$1\"}")" = 1 ]; }
# The kernel numbers NVMe controllers and SATA disks in the order their probes finish: find the
# NVMe drives by serial, the SATA disks by port (AHCI port 0 is ata1, QEMU's sata0; port 1 ata2).
ctrl_of() { basename "$(readlink -f "/sys/block/$1/device")"; }
ata_port() { readlink -f "/sys/block/$1" | grep -o 'ata[0-9]*' | head -n 1; }
on_port() {
	for _b in /sys/block/sd*; do
		[ "$(ata_port "${_b#/sys/block/}")" = "$1" ] && echo "${_b#/sys/block/}" && return 0
	done
	return 1
}
scsi_debug_disk() {
	for _b in /sys/block/sd*; do
		[ "$(tr -d ' ' <"$_b/device/model" 2>/dev/null)" = scsi_debug ] && echo "${_b#/sys/block/}" && return 0
	done
	return 1
}
# warning QDEV_ID VALUE: QEMU's critical warning byte of an NVMe controller (nvme1 as in -device)
warning() {
	qmp "{\"execute\":\"qom-set\",\"arguments\":{\"path\":\"/machine/peripheral/$1\",\"property\":\"smart_critical_warning\",\"value\":$2}}" >/dev/null
}
# throttle BYTES_PER_SECOND: QEMU's limit on reads of the second SATA disk (0: none)
throttle() {
	qmp "{\"execute\":\"block_set_io_throttle\",\"arguments\":{\"id\":\"sata1\",\"bps\":0,\"bps_rd\":$1,\"bps_wr\":0,\"iops\":0,\"iops_rd\":0,\"iops_wr\":0}}" >/dev/null
}

check "the failing NVMe drive" wait_for 20 nvme_by_serial DPBAD1
check "the second SATA disk" wait_for 20 on_port ata2
NV=$(nvme_by_serial DPNVME0) BAD=$(nvme_by_serial DPBAD1)
NVC=$(ctrl_of $NV) BADC=$(ctrl_of $BAD)
SATA=$(on_port ata1) SLOW=$(on_port ata2)
# opts=2: reads of sector 4660 (0x1234) fail with MEDIUM ERROR, unrecovered read error.
modprobe scsi_debug ptype=0 dev_size_mb=16 opts=2 || skip "no scsi_debug module"
check "the scsi_debug disk" wait_for 15 scsi_debug_disk
SD=$(scsi_debug_disk) || exit 1
udevadm settle -t 10 2>/dev/null
note "NVMe: healthy $NV ($NVC, DPNVME0), failing $BAD ($BADC, DPBAD1); SATA: $SATA (ata1), $SLOW (ata2); scsi_debug $SD"

# The runbook's Conventions: `nvme list -v` pairs a namespace with its controller.
"$RUNBOOK_BIN/nvme" list -v >/tmp/nvme-list 2>&1
check "nvme list -v pairs $BAD with its controller $BADC" grep -q -E "^$BADC +DPBAD1 .* $BAD\$" /tmp/nvme-list

# A link reset: reads of $SLOW throttled by QEMU to 2 KiB/s, its command timeout 2 s. The first of
# three 8 KiB reads passes (a throttle lets a request through while its bucket is empty), the
# second waits for about 4 s, times out, and the kernel resets the link. (QEMU finishes the
# throttled read during the port reset, so the guest stands still for a moment.) Before the
# daemon starts: with its SMART reads of the disk going on, the timed-out read ended in the SCSI
# layer (DID_TIME_OUT) without libata's error handling, and nothing was reset.
check "reads of $SLOW throttled to 2 KiB/s" throttle 2048
echo 2 >/sys/block/$SLOW/device/timeout
dd if=/dev/$SLOW of=/dev/null bs=8k count=3 skip=100 iflag=direct 2>/dev/null &
DD=$!
check "the kernel resets the link of $SLOW (ata2)" wait_for 60 eval "dmesg | grep -q 'ata2: hard resetting link'"
check "$SLOW's reads no longer throttled" throttle 0
wait $DD
echo 30 >/sys/block/$SLOW/device/timeout

# The daemon without capabilities: uid 0 in a new user namespace holds none where the kernel
# checks them (as a unit that lost its CapabilityBoundingSet), so NVMe and ATA reads fail with
# "permission" (SCSI LOG SENSE needs none).
printf '#!/bin/sh\nexec unshare -U -r /bin/diskpulse "$@"\n' >/tmp/dp-userns
chmod 755 /tmp/dp-userns
DAEMON=/tmp/dp-userns
daemon_start --smart.interval=2s || exit 1
check "the host's Prometheus scrapes the daemon" wait_for 60 prom_has 'up{job="diskpulse"} == 1'
check "Prometheus: DiskpulseSmartReadsFailing fires for $NV" wait_for 90 firing DiskpulseSmartReadsFailing "device=\"$NV\""
runbook DiskpulseSmartReadsFailing permission DEV=$NV
check "daemon exits 0" daemon_stop

# With its capabilities. Every drive read once; then SMART switched off on the SATA disk, whose
# reads fail from then on (the drive refuses them) while the other sections run.
DAEMON=/bin/diskpulse
daemon_start --smart.interval=2s || exit 1
check "SMART of $NV, $BAD, $SATA and $SD" wait_for 30 eval 'smart_up $NV && smart_up $BAD && smart_up $SATA && smart_up $SD'
check "Prometheus has every drive healthy" wait_for 30 eval \
	'[ "$(prom "count(diskpulse_smart_healthy == 1)" | grep -o "\"[0-9]*\"]")" = "\"5\"]" ]'
runbook DiskpulseSectorsReallocated ata DEV=$SATA
runbook DiskpulseSataLinkErrors link-reset DEV=$SLOW
check "smartctl -s off $SATA" smartctl -q silent -s off /dev/$SATA

# The healthy NVMe drive, written to all along by one process (pidstat names who writes):
# 512-byte direct writes take tens of seconds for the 64 MiB; started again if they end.
( while dd if=/dev/zero of=/dev/$NV bs=512 count=131072 oflag=direct 2>/dev/null; do :; done ) &
LOAD=$!
runbook DiskpulseWearForecast healthy DEV=$NV
runbook DiskpulseWearExhausted healthy DEV=$NV
runbook DiskpulseSpareLow healthy DEV=$NV
runbook DiskpulseUnsafeShutdown healthy DEV=$NV
runbook DiskpulseNvmeErrorLogGrowing healthy DEV=$NV
runbook DiskpulseNvmeThermalThrottling healthy DEV=$NV
kill $LOAD
wait $LOAD 2>/dev/null

# The failing NVMe drive: it says so, and a read fails.
check "critical warning 4 (reliability) on $BADC" warning nvme1 4
if dd if=/dev/$BAD of=/dev/null bs=512 skip=65536 count=1 iflag=direct 2>/dev/null; then
	fail "a read of sector 65536 of $BAD fails" "it succeeded"
else
	ok "a read of sector 65536 of $BAD fails"
fi
check "Prometheus: DiskpulseSmartUnhealthy fires for $BAD" wait_for 60 firing DiskpulseSmartUnhealthy "device=\"$BAD\""
check "Prometheus: DiskpulseNvmeCriticalWarning fires for $BAD, flag reliability" \
	wait_for 30 firing DiskpulseNvmeCriticalWarning "device=\"$BAD\",flag=\"reliability\""
runbook DiskpulseSmartUnhealthy nvme DEV=$BAD
runbook DiskpulseNvmeCriticalWarning reliability DEV=$BAD FLAG=reliability
runbook DiskpulseMediaErrorsIncreasing nvme DEV=$BAD
# Why that section names nvme device-self-test: Debian 12's smartctl (7.3) starts no self-test on
# an NVMe drive, exits 0 and says nothing of a test.
smartctl -t long /dev/$BAD >/tmp/sc_test 2>&1
sc_rc=$?
check "smartctl -t long on NVMe exits 0 ($sc_rc) without a word of a test" eval \
	'[ $sc_rc = 0 ] && ! grep -qi -e self-test -e testing /tmp/sc_test'

# The hot NVMe drive: its over-temperature threshold (feature 4, kelvin) below QEMU's fixed 323 K.
check "over-temperature threshold of $NVC set to 320 K" \
	"$RUNBOOK_BIN/nvme" set-feature /dev/$NVC --feature-id=4 --value=320
check "Prometheus: DiskpulseNvmeCriticalWarning fires for $NV, flag temperature" \
	wait_for 30 firing DiskpulseNvmeCriticalWarning "device=\"$NV\",flag=\"temperature\""
runbook DiskpulseNvmeCriticalWarning temperature DEV=$NV FLAG=temperature
runbook DiskpulseTemperatureHigh nvme DEV=$NV
runbook DiskpulseTemperatureCritical nvme DEV=$NV

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

# The SATA disk whose reads have failed all this while.
check "Prometheus: DiskpulseSmartReadsFailing fires for $SATA" \
	wait_for 60 firing DiskpulseSmartReadsFailing "device=\"$SATA\""
runbook DiskpulseSmartReadsFailing device_status DEV=$SATA
check "Prometheus: DiskpulseSmartDataStale fires for $SATA" \
	wait_for 60 firing DiskpulseSmartDataStale "device=\"$SATA\""
runbook DiskpulseSmartDataStale device_status DEV=$SATA
note "alerts pending or firing: $(alerts_seen)"

check "smartctl -s on $SATA" smartctl -q silent -s on /dev/$SATA
check "over-temperature threshold of $NVC back to its WCTEMP, 343 K" \
	"$RUNBOOK_BIN/nvme" set-feature /dev/$NVC --feature-id=4 --value=343
check "critical warning of $BADC cleared" warning nvme1 0
check "daemon exits 0" daemon_stop
